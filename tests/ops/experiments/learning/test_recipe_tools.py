"""Training on SGLS instead of the real tools (issue 38, "Use it"): the tool-source arm set trains one recipe twice,
the arms differing only in who answers the rollouts' tool calls; both are evaluated on the real tools; the report
names sgls − real, paired, with its interval and the verdict of the rule fixed in code. No training here: `slca
train` and the evaluation are replaced by fakes that record what they were given."""

import asyncio
import json
import random
from pathlib import Path

import pytest

from ops.experiments.eval.suite import ItemRecord, write_jsonl
from ops.experiments.learning import recipe, recipe_eval
from ops.experiments.learning.files import write_json
from ops.experiments.learning.recipe_arms import ARM_SETS, RECIPE_ARMS
from ops.experiments.learning.recipe_report import write_report
from slca.cli import build_parser
from slca.config import load_config


def _args(tmp_path: Path, *sets: str):
    argv = ["bench", "recipe", "--block", "1", "--arm-set", "tools", "--minutes", "2", "--probe-size", "8"]
    return build_parser().parse_args([*(a for s in sets for a in ("--set", s)), *argv, "--out", str(tmp_path)])


@pytest.fixture(scope="module")
def items():
    return recipe.eval_items("everyday", 8)


def test_the_tools_arm_set_trains_the_default_recipe_twice_differing_only_in_the_tool_source(tmp_path):
    arms = ARM_SETS["tools"].arms(ARM_SETS["tools"].recipe)
    assert ARM_SETS["tools"].recipe == "g4-lr1e-5" and list(arms) == ["real", "sgls"]
    real, sgls = arms["real"], arms["sgls"]
    assert (real.tools, sgls.tools) == ("real", "sgls")
    assert real.settings == sgls.settings == {**RECIPE_ARMS["g4-lr1e-5"].settings, "sim.backend": "schema"}
    assert real.estimator == sgls.estimator == "slca"
    args = _args(tmp_path)
    argv = {
        a.name: recipe.train_argv(a, args, tmp_path, tmp_path / "w", tmp_path / "l", tmp_path / "t", 1)
        for a in arms.values()
    }
    differs = [(x, y) for x, y in zip(argv["real"], argv["sgls"]) if x != y]
    assert len(argv["real"]) == len(argv["sgls"]) and differs == [("real", "sgls")]
    assert argv["sgls"][argv["sgls"].index("--tools") + 1] == "sgls"
    other = ARM_SETS["tools"].arms("g4-lr3e-6")["sgls"]
    assert other.settings["learner.lr"] == 3e-6 and other.tools == "sgls"


def test_a_tools_block_runs_both_arms_rotated_at_the_default_recipe(tmp_path, monkeypatch, tiny_model_dir):
    from ops.experiments.warmstart import model as warm_model

    monkeypatch.setattr(warm_model, "resolve_warm_start", lambda name, config: tiny_model_dir)

    def fake_warm(model_dir, items, args, block_dir, cache):
        write_jsonl(
            [ItemRecord(i.suite, i.item_id, False, 0.0, 0.0) for i in items], block_dir / "warm_start.items.jsonl"
        )
        return {"checksum": "c", "scorer": "s", "records": [], "eval_seconds": 1.0}

    ran = []
    monkeypatch.setattr(recipe, "warm_start_records", fake_warm)
    monkeypatch.setattr(
        recipe, "run_arm", lambda arm, args, model, block_dir, items, seed: ran.append((arm.name, seed))
    )
    args = _args(tmp_path)
    assert args.recipe is None  # each arm set has its own default recipe
    assert recipe.run_block(args, load_config(None, [f"common.cache_dir={tmp_path / 'cache'}"])) == 0
    assert ran == [("sgls", 1), ("real", 1)]  # block 1: rotated by one
    block = json.loads((tmp_path / "tools-blocks" / "b1" / "block.json").read_text())
    assert (block["arm_set"], block["recipe"], block["world_seed"]) == ("tools", "g4-lr1e-5", None)


def _fake_train(argv, stdout=None, stderr=None) -> int:
    """`slca train` as far as `run_arm` reads it: one step's log line and a published v1."""
    run_dir = Path(next(a.split("=", 1)[1] for a in argv if a.startswith("learner.run_dir=")))
    seed = argv[argv.index("--seed") + 1]
    weights = run_dir / f"train-{argv[argv.index('--estimator') + 1]}-{seed}" / "weights" / "v1"
    weights.mkdir(parents=True)
    (weights / "manifest.json").write_text("{}")
    Path(argv[argv.index("--log") + 1]).write_text(json.dumps({"step": 1, "trajectories_trained": 32}) + "\n")
    return 0


def test_both_arms_are_evaluated_on_the_real_tools_whatever_they_trained_with(tmp_path, monkeypatch, items):
    from ops.experiments.train.controlled import offered_tools
    from sim.real.registry import RealTool
    from sim.settings import SimSettings
    from sim.simulated import SimulatedTool
    from sim import make_provider

    evaluated, trained = {}, {}

    def fake_eval(model_dir, items, max_tokens, engine, config_args, log):
        evaluated[log.parent.name] = ([i.task.model_dump(mode="json") for i in items], list(config_args))
        return [ItemRecord(i.suite, i.item_id, True, 1.0, 0.0) for i in items], 1.0

    def fake_call(argv, stdout=None, stderr=None):
        trained[Path(argv[argv.index("--log") + 1]).parent.name] = argv
        return _fake_train(argv)

    monkeypatch.setattr(recipe.subprocess, "call", fake_call)
    monkeypatch.setattr(recipe_eval, "evaluate", fake_eval)
    args = _args(tmp_path, "serve.torch_threads=1")
    for arm in ARM_SETS["tools"].arms("g4-lr1e-5").values():
        done = recipe.run_arm(arm, args, tmp_path / "model", tmp_path / "b1", items, seed=1)
        assert done["tools"] == arm.name
    assert "--tools" in trained["sgls"] and trained["sgls"][trained["sgls"].index("--tools") + 1] == "sgls"
    assert evaluated["real"] == evaluated["sgls"]  # the same items, tools and configuration for both
    tasks, config_args = evaluated["sgls"]
    assert tasks == [i.task.model_dump(mode="json") for i in items]  # the pack's own definitions
    assert config_args == ["--set", "serve.torch_threads=1"]  # neither the arm's tool source nor its settings

    async def bound(definitions):
        episode = await make_provider(SimSettings(cache=False)).new_episode(definitions)
        return episode.tools

    real_names = {d["function"]["name"] for i in items for d in i.task.tools if d["function"].get("x-mode") == "real"}
    assert real_names  # the everyday pack offers real tools
    for item in items:
        as_evaluated = asyncio.run(bound(item.task.tools))
        assert all(isinstance(as_evaluated[n], RealTool) for n in as_evaluated if n in real_names)
        as_trained_on_sgls = asyncio.run(bound(offered_tools(item.task.tools, "sgls")))
        assert set(as_trained_on_sgls) == set(as_evaluated)
        assert all(isinstance(t, SimulatedTool) for t in as_trained_on_sgls.values())
        assert offered_tools(item.task.tools, "real") == item.task.tools


def test_slca_train_serves_its_rollouts_tools_with_the_configured_sim_section():
    from ops.experiments.train.controlled import sim_settings

    sim = sim_settings(load_config(None, ["sim.backend=schema", "sim.world_seed=none", "sim.fault_rate=0.25"]))
    assert (sim.backend, sim.world_seed, sim.fault_rate) == ("schema", None, 0.25)
    assert build_parser().parse_args(["train", "--estimator", "slca"]).tools == "real"
    assert build_parser().parse_args(["train", "--estimator", "slca", "--tools", "sgls"]).tools == "sgls"


def _tools_block(out: Path, b: int, real: dict[str, list[bool]], sgls: dict[str, list[bool]]) -> None:
    d = out / "tools-blocks" / f"b{b}"
    meta = {"block": b, "arm_set": "tools", "recipe": "g4-lr1e-5", "world_seed": None, "minutes": 2}
    meta |= {"machine": {"cpu": "x", "cpu_flags": [], "load_average_1m": 0.1}, "order": ["real", "sgls"]}
    for name, suites in {"real": real, "sgls": sgls}.items():
        a = d / "arms" / name
        a.mkdir(parents=True)
        records = [ItemRecord(s, f"t{i}", ok, None, None) for s, o in suites.items() for i, ok in enumerate(o)]
        write_jsonl(records, a / "items.jsonl")
        (a / "train.jsonl").write_text(json.dumps({"success_mean": 0.5, "generate_s": 1, "step_s": 1}) + "\n")
        write_json(
            a / "done.json", {"arm": name, "settings": {}, "steps": 1, "trajectories": 32, "train_seconds": 60.0}
        )
    write_json(d / "block.json", meta)
    write_jsonl(
        [ItemRecord(s, f"t{i}", False, None, None) for s, o in real.items() for i, _ in enumerate(o)],
        d / "warm_start.items.jsonl",
    )


def test_the_report_names_sgls_minus_real_paired_with_its_interval_and_verdict(tmp_path):
    from ops.experiments.learning.recipe_tools import MARGIN, NOT_WORSE, WORSE

    assert MARGIN == 0.05  # fixed in code before any run
    assert write_report(tmp_path)["tools"]["verdict"].startswith("no tools block")
    rng = random.Random(3)
    probe = [rng.random() < 0.5 for _ in range(32)]
    test = [rng.random() < 0.5 for _ in range(60)]
    same = {"train_probe": probe, "test": test}
    for b in range(2):
        _tools_block(tmp_path / "same", b, same, same)
    results = write_report(tmp_path / "same")["tools"]
    assert results["comparison"] == "sgls − real" and results["blocks"] == 2
    assert results["comparisons"]["test"]["ci95"] == [0, 0] and results["verdict"].startswith(NOT_WORSE)
    md = (tmp_path / "same" / "results.md").read_text()
    assert md.startswith("## Training on SGLS instead of the real tools")  # a folder of tools blocks alone
    assert f"**Verdict: {NOT_WORSE}" in md and "sgls − real" in md and "−5 points" in md
    worse = [False if ok and i % 2 == 0 else ok for i, ok in enumerate(test)]  # ≈ −25 points
    _tools_block(tmp_path / "worse", 0, same, {"train_probe": probe, "test": worse})
    results = write_report(tmp_path / "worse")["tools"]
    lo, hi = results["comparisons"]["test"]["ci95"]
    assert hi < -MARGIN and results["verdict"].startswith(WORSE)
    assert f"[{lo * 100:+.1f}, {hi * 100:+.1f}]" in results["verdict"]
    assert (tmp_path / "worse" / "tools.png").stat().st_size > 0
