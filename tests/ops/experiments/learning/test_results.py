"""The result files: results.json has the schema (primary metric, verdicts, warm start, runs with arm/estimator/
seed, budget, command) and no machine paths (model by name, `out` relative, the command scrubbed), results.md
states the rule and α, then the verdicts, then the warm start's row, mean ± sd and per-seed values; the
diagnostics come from `slca train`'s per-step lines; the plot has a curve and band per arm and the effects."""

import argparse
import json
from pathlib import Path

import pytest

from ops.experiments.learning.diagnostics import run_diagnostics
from ops.experiments.learning.files import PathScrubber, machine_paths
from ops.experiments.learning.plan import Plan
from ops.experiments.learning.plot import plot_curves
from ops.experiments.learning.provenance import command_line
from ops.experiments.learning.results import Comparison, curves_json, results_json, results_md, write_results
from ops.experiments.learning.verdict import judge
from slca.cli import CliError

PLAN = Plan(
    model="SmolLM2-135M-Instruct-sft",
    arms=("slca", "grpo"),
    seeds=(0, 1, 2),
    steps=4,
    group_size=8,
    temperature=1.0,
    max_tokens=128,
    lr=5e-6,
    lr_schedule="constant",
    pack="everyday",
    eval_items=0,
    eval_max_tokens=256,
    eval_engine="hf",
    curve="eval",
    curve_every=2,
    curve_items=10,
)
SUCCESS = {"slca": [0.40, 0.45, 0.35], "grpo": [0.30, 0.25, 0.35]}


def item_outcomes(rate: float) -> dict[str, bool]:
    return {f"test/{i}": i < rate * 20 for i in range(20)}


def record(estimator: str, seed: int) -> dict:
    success = SUCCESS[estimator][seed]
    return {
        "arm": estimator,
        "estimator": estimator,
        "seed": seed,
        "steps": 4,
        "seconds": 300.0,
        "metrics": {"held_out/success": success, "test/success": 0.5},
        "diagnostics": {"diag/adv_abs_tool_call": 0.7, "diag/omission_rate": None},
        "curve": [[2, success / 2], [4, success]],
        "exec_reward": [[s, 0.1 * s] for s in range(1, 5)],
        "tool_turns": [[s, 1.0 + 0.1 * seed] for s in range(1, 5)],
    }


@pytest.fixture
def machine(tmp_path):
    """A repo folder (the working directory), a model cache and a home folder, all under tmp_path."""
    repo, models, home = tmp_path / "home" / "repo", tmp_path / "home" / ".cache" / "slca" / "models", tmp_path / "home"
    for p in (repo, models / "SmolLM2-135M-Instruct-sft"):
        p.mkdir(parents=True)
    return repo, models, home


def comparison(machine) -> Comparison:
    repo, models, home = machine
    scrub = PathScrubber(repo, models, home)
    args = argparse.Namespace(
        config=str(repo / "slca.toml"),
        minutes=110.0,
        model=str(models / PLAN.model),
        set=[
            f"common.data_dir={home}/var/x",
            "common.redis_url=redis://127.0.0.1:6379/0",
            "learner.run_dir=/mnt/scratch/runs",
        ],
    )
    command = command_line(args, PLAN, scrub.path(repo / "bench" / "learning" / "x"), scrub)
    records = [record(e, s) for s in PLAN.seeds for e in PLAN.arms]
    warm = {"metrics": {"held_out/success": 0.30, "test/success": 0.45}, "curve0": 0.1}
    runs = {a: {s: item_outcomes(SUCCESS[a][s]) for s in PLAN.seeds} for a in PLAN.arms}
    verdict = judge(item_outcomes(0.30), runs, list(PLAN.arms), reps=200, perms=200)
    return Comparison(PLAN, warm, records, {"model": PLAN.model, "steps_per_run": 4}, command, verdict)


def test_results_json_has_exactly_the_schema_and_no_machine_paths(machine):
    c = comparison(machine)
    data = results_json(c)
    assert list(data) == ["primary_metric", "verdict", "warm_start", "runs", "budget", "command"]
    assert data["primary_metric"] == "held_out/success" and data["warm_start"]["held_out/success"] == 0.30
    assert [(r["arm"], r["seed"]) for r in data["runs"]] == [(e, s) for s in (0, 1, 2) for e in ("slca", "grpo")]
    assert all(isinstance(r["held_out/success"], float) for r in data["runs"])
    assert data["verdict"]["alpha"] == 0.05 and len(data["verdict"]["comparisons"]) == 3
    assert data["runs"][0]["diag/adv_abs_tool_call"] == 0.7 and data["runs"][0]["diag/omission_rate"] is None
    assert machine_paths(data) == []
    cmd = data["command"]
    assert cmd.startswith("slca --config slca.toml --set 'common.data_dir=~/var/x'")
    assert "--model SmolLM2-135M-Instruct-sft" in cmd and "--out bench/learning/x" in cmd
    assert "redis://127.0.0.1:6379/0" in cmd and "learner.run_dir=<path>/runs" in cmd
    assert "--steps 4 " in cmd and "--curve-every 2 " in cmd  # the sized budget is pinned
    assert "--arms slca,grpo " in cmd and "--eval-items 0 " in cmd


def test_path_scrubber():
    s = PathScrubber(Path("/w/repo"), Path("/h/u/.cache/slca/models"), Path("/h/u"))
    assert s.path("/w/repo/bench/learning/a") == "bench/learning/a" and s.path("/w/repo") == "."
    assert s.path("/h/u/.cache/slca/models/tiny-smollm2") == "tiny-smollm2"
    assert s.path("/h/u/data") == "~/data" and s.path("/opt/models/m") == "<path>/m"
    assert s.path("relative/dir") == "relative/dir"
    assert s.text("a=/h/u/x b=http://host:1/p/q 3/4") == "a=~/x b=http://host:1/p/q 3/4"
    assert machine_paths({"k": ["ok", "/etc/passwd"]}) == ["/etc/passwd"]


def test_a_leaking_path_is_refused_not_written(machine, tmp_path):
    c = comparison(machine)
    leaking = Comparison(c.plan, c.warm, c.records, {"where": "/srv/data"}, c.command, c.verdict)
    with pytest.raises(CliError, match="machine paths"):
        write_results(leaking, tmp_path)
    assert not (tmp_path / "results.json").exists()


def test_results_md_states_the_rule_then_the_verdicts_then_the_tables(machine):
    c = comparison(machine)
    md = results_md(c)
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Verdict"
    # the rule and α first, then the numbers
    assert md.index("Rule, fixed before the run") < md.index("α = 0.05") < md.index("| slca vs grpo |")
    assert md.index("| slca vs grpo |") < md.index("## Primary metric")
    assert "| slca vs warm_start |" in md and "| grpo vs warm_start |" in md and "the best" not in md
    assert "| warm start | 0.300 | 0.450 |" in md
    assert "| slca | 0.400 ± 0.050 | 0.500 ± 0.000 |" in md and "| grpo | 0.300 ± 0.050 |" in md
    assert "| slca | 2 | 0.350 | 0.500 | 5.0 |" in md  # per seed, with minutes
    assert "Held-out success" in md and "Chosen before the run" in md


def test_diagnostics_from_the_per_step_lines():
    lines = [
        {
            "step": 1,
            "all/tokens": 10,
            "all/adv_abs_mean": 0.6,
            "tool_call/adv_abs_mean": 0.8,
            "summary/adv_abs_mean": 0.4,
            "estimator/zero_variance/exec": 0.0,
            "estimator/present/exec": 4.0,
            "estimator/zero_variance/pref": 1.0,
            "estimator/present/pref": 4.0,
            "tool_turns_mean": 1.0,
            "omission_rate": 0.25,
            "exec_mean": 0.5,
        },
        # all-zero advantages: the trainer skipped the group (no all/ keys); pref had one member only
        {
            "step": 2,
            "estimator/zero_variance/exec": 1.0,
            "estimator/present/exec": 4.0,
            "estimator/zero_variance/pref": 0.0,
            "estimator/present/pref": 1.0,
            "tool_turns_mean": 2.0,
            "omission_rate": 0.75,
            "exec_mean": 0.0,
        },
    ]
    lines[0]["task_id"], lines[1]["task_id"] = "needs-a-tool", "no-tool"
    d = run_diagnostics(lines, {"no-tool"})
    assert d["diag/adv_abs_tool_call"] == pytest.approx(0.4) and d["diag/adv_abs_summary"] == pytest.approx(0.2)
    assert d["diag/zero_variance_share"] == pytest.approx(2 / 3) and d["diag/zero_advantage_groups"] == 0.5
    assert (d["diag/tool_turns"], d["diag/omission_rate"], d["train/exec_reward"]) == (1.5, 0.5, 0.25)
    assert d["diag/zero_variance/exec"] == 0.5 and d["diag/zero_variance/pref"] == 1.0  # per channel
    assert d["diag/no_tool_task_tool_turns"] == 2.0  # tool turns where the task needs none
    assert run_diagnostics([{"step": 1}])["diag/omission_rate"] is None  # not logged: n/a, not 0


def test_plot_has_a_curve_and_a_band_per_arm(machine, tmp_path):
    from matplotlib.image import imread

    c = comparison(machine)
    data = json.loads(json.dumps(curves_json(c)))  # as read back from curves.json
    assert data["warm_start"] == 0.1 and data["runs"][0]["curve"] == [[2, 0.2], [4, 0.4]]
    assert [(x["a"], x["b"]) for x in data["comparisons"]][0] == ("slca", "grpo")
    plot_curves(data, tmp_path / "p.png", "test")
    pixels = imread(tmp_path / "p.png")[:, :, :3]
    blue, orange = [0x1F / 255, 0x77 / 255, 0xB4 / 255], [1.0, 0x7F / 255, 0x0E / 255]
    for colour in (blue, orange):  # matplotlib's first two colours: one per estimator
        assert (abs(pixels - colour).max(axis=2) < 0.05).sum() > 100
    # the seeds differ, so each estimator has a translucent band: its colour at alpha 0.2 over white
    for colour in (blue, orange):
        banded = [0.8 + 0.2 * ch for ch in colour]
        assert (abs(pixels - banded).max(axis=2) < 0.03).sum() > 100
