"""`slca bench learn-vs-trl`'s bookkeeping, no model and no TRL: the block's order, slca's checkpoints taken from a
weights folder the learner keeps pruning, TRL's save marks, the rule's verdict on synthetic paired records, the
resume of an arm, and the refusal without TRL."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
from pathlib import Path

import pytest

from ops.bench.learn_vs_trl import capture
from ops.bench.learn_vs_trl import main as block_main
from ops.bench.learn_vs_trl.arms import marks, order, slca_arm
from ops.bench.learn_vs_trl.capture import ChildFailed, capture_marks, complete, snapshot_newest
from ops.bench.learn_vs_trl.report import (
    MET,
    NOT_MET,
    NOT_SHOWN,
    PENDING,
    command_line,
    early_mark,
    judge,
    write_report,
)
from ops.bench.learn_vs_trl.slca_arm import figures
from ops.bench.rl.trl_marks import due_marks, save_at_marks
from ops.bench.rl.trl_side import TrlSpec, hierr_scalar
from ops.experiments.eval.suite import ItemRecord, write_jsonl
from ops.experiments.learning.files import link_tree, write_json
from ops.experiments.learning.recipe_arms import RECIPE_ARMS, RECIPE_FOR_TOOLS
from ops.experiments.learning.recipe_pairs import paired
from slca.cli import CliError
from slca.contracts import Reward
from slca.contracts.weights import MANIFEST_NAME


# -- the block's order and marks


def test_order_alternates_with_the_block_number():
    assert order(0) == ["slca", "trl"] and order(1) == ["trl", "slca"]
    assert order(2) == order(0) and order(7) == order(1)


def test_slca_trains_with_the_learners_default_recipe():
    assert slca_arm().settings == RECIPE_ARMS[RECIPE_FOR_TOOLS].settings and slca_arm().estimator == "slca"


def test_marks_end_at_the_budget_and_refuse_one_past_it():
    assert marks(60, [30.0]) == [30.0, 60.0] and marks(60, [60.0, 30.0, 30.0]) == [30.0, 60.0]
    with pytest.raises(CliError, match="each must be in"):
        marks(60, [30.0, 90.0])
    with pytest.raises(CliError, match="must be > 0"):
        marks(0, [30.0])


def test_the_early_mark_is_the_last_within_half_the_budget():
    assert early_mark([30.0, 60.0]) == 30 and early_mark([15.0, 30.0, 45.0, 60.0]) == 30
    assert early_mark([40.0, 60.0]) is None


# -- slca's checkpoints: the newest complete version, taken while the learner prunes


def _publish(weights: Path, version: int, manifest: bool = True) -> Path:
    d = weights / f"v{version}"
    d.mkdir(parents=True)
    (d / "model.safetensors").write_text(f"weights {version}")
    (d / "config.json").write_text("{}")
    if manifest:
        names = {"model.safetensors": "x", "config.json": "y"}
        body = {"version": version, "path": str(d), "sha256": names, "base_model": "m", "train_step": version}
        (d / MANIFEST_NAME).write_text(json.dumps(body))
    return d


def test_the_newest_complete_version_is_linked(tmp_path):
    weights = tmp_path / "weights"
    _publish(weights, 1)
    _publish(weights, 2)
    _publish(weights, 3, manifest=False)  # still being written: not a version yet
    got = snapshot_newest(weights, tmp_path / "checkpoints" / "30")
    assert got == tmp_path / "checkpoints" / "30" / "v2" and complete(got)
    assert (got / "model.safetensors").read_text() == "weights 2"
    assert os.stat(got / "model.safetensors").st_ino == os.stat(weights / "v2" / "model.safetensors").st_ino
    shutil.rmtree(weights / "v2")  # the learner prunes it: the checkpoint keeps its files
    assert (got / "model.safetensors").read_text() == "weights 2"


def test_a_version_pruned_while_it_is_linked_gives_way_to_the_newest(tmp_path, monkeypatch):
    from ops.experiments.learning import files

    weights = tmp_path / "weights"
    _publish(weights, 1)
    _publish(weights, 2)
    real, calls = files.link_tree, []

    def pruned_meanwhile(source: Path, target: Path) -> None:
        calls.append(source.name)
        if len(calls) == 1:  # the learner publishes v3 and prunes v2 (keep_versions) under our feet
            _publish(weights, 3)
            shutil.rmtree(weights / "v2")
        real(source, target)

    monkeypatch.setattr(files, "link_tree", pruned_meanwhile)
    got = snapshot_newest(weights, tmp_path / "checkpoints" / "30")
    assert calls == ["v2", "v3"] and got.name == "v3" and complete(got)
    assert sorted(p.name for p in got.parent.iterdir()) == ["v3"]  # nothing of v2 left behind


def test_a_half_deleted_version_is_not_complete(tmp_path):
    d = _publish(tmp_path / "weights", 4)
    (d / "model.safetensors").unlink()
    assert not complete(d) and not complete(tmp_path / "nowhere")


def test_nothing_published_yet_is_the_warm_start(tmp_path):
    assert snapshot_newest(tmp_path / "weights", tmp_path / "checkpoints" / "30") is None


class FakeChild:
    def __init__(self, status: int | None = None):
        self.status = status

    def poll(self) -> int | None:
        return self.status


class FakeClock:
    """Time that passes only when the capture sleeps; versions appear at the given seconds."""

    def __init__(self, weights: Path, publish_at: dict[int, float]):
        self.t, self.weights, self.publish_at = 1000.0, weights, publish_at

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s
        for version, at in self.publish_at.items():
            if 1000.0 + at <= self.t and not (self.weights / f"v{version}").exists():
                _publish(self.weights, version)


def test_each_mark_takes_the_version_published_by_then(tmp_path):
    weights = tmp_path / "weights"
    clock = FakeClock(weights, {1: 30, 2: 100, 3: 130})
    taken = capture_marks(FakeChild(), weights, [1.0, 2.0], tmp_path / "ck", 1000.0, clock.now, clock.sleep)
    assert [(c.minutes, c.version) for c in taken] == [(1.0, 1), (2.0, 2)]
    assert 60 <= taken[0].elapsed_s < 60 + capture.POLL_S and not taken[0].ended_early
    assert (tmp_path / "ck" / "2" / "v2" / MANIFEST_NAME).is_file()


def test_a_run_that_ended_cleanly_stands_with_its_last_version_and_a_failed_one_raises(tmp_path):
    weights = tmp_path / "weights"
    _publish(weights, 5)
    clock = FakeClock(weights, {})
    taken = capture_marks(FakeChild(0), weights, [30.0, 60.0], tmp_path / "ck", 1000.0, clock.now, clock.sleep)
    assert [(c.version, c.ended_early) for c in taken] == [(5, True), (5, True)]
    with pytest.raises(ChildFailed, match="status 1"):
        capture_marks(FakeChild(1), weights, [30.0], tmp_path / "ck2", 1000.0, clock.now, clock.sleep)


def test_figures_count_the_steps_up_to_the_version():
    lines = [{"step": s, "trajectories_trained": 24, "tokens_trained": 1000} for s in (1, 2, 3)]
    assert figures(lines, 2) == {"steps": 2, "trajectories": 48, "tokens": 2000}
    assert figures(lines, 0) == {"steps": 0, "trajectories": 0, "tokens": 0}


# -- TRL's side: the save marks and the reward


def test_marks_are_due_once_the_clock_reaches_them():
    assert due_marks([30.0, 60.0], 0, 29 * 60) == []
    assert due_marks([30.0, 60.0], 0, 30 * 60) == [30.0]
    assert due_marks([30.0, 60.0], 1, 45 * 60) == []
    assert due_marks([30.0, 60.0], 0, 61 * 60) == [30.0, 60.0]  # one long step past both: the same weights
    assert due_marks([30.0, 60.0], 2, 90 * 60) == []


class FakeModel:
    def save_pretrained(self, path: str, safe_serialization: bool = True) -> None:
        (Path(path) / "model.safetensors").write_text("trained")
        (Path(path) / "config.json").write_text("{}")


def test_a_save_is_a_version_directory_linked_into_every_mark_due(tmp_path):
    warm = tmp_path / "warm"
    warm.mkdir()
    (warm / "tokenizer.json").write_text("{}")
    (warm / "chat_template.jinja").write_text("{{ messages }}")
    first = save_at_marks(FakeModel(), warm, tmp_path / "ck", [30.0, 60.0], step=17)
    assert first == tmp_path / "ck" / "30" / "v17" and complete(first)
    other = tmp_path / "ck" / "60" / "v17"
    assert complete(other) and (other / "chat_template.jinja").is_file()  # the evaluation's chat template
    assert os.stat(other / "model.safetensors").st_ino == os.stat(first / "model.safetensors").st_ino


def test_link_tree_leaves_nothing_when_its_source_is_gone(tmp_path):
    with pytest.raises(FileNotFoundError):
        link_tree(tmp_path / "gone", tmp_path / "copy")
    assert list(tmp_path.iterdir()) == []


def _spec(**kw) -> TrlSpec:
    return TrlSpec(model="m", pack="p", group_size=8, max_new_tokens=8, seconds=1, lr=1e-6, bf16=False, **kw)


def test_the_reward_adds_success_only_when_asked():
    r = Reward(trajectory_id="t", exec=0.8, pref=0.5, components={"success": 1.0})
    assert hierr_scalar(r, _spec()) == r.scalar(1.0, 1.0)  # `slca bench rl`'s reward, unchanged
    assert hierr_scalar(r, _spec(success_weight=1.0, w_exec=0.5)) == pytest.approx(0.5 * 1.8 + 0.5)
    no_success = Reward(trajectory_id="t", exec=0.8, pref=0.5)
    assert hierr_scalar(no_success, _spec(success_weight=1.0)) == pytest.approx(1.3)


def test_new_spec_fields_default_to_slca_bench_rl():
    spec = _spec()
    assert (spec.tasks_file, spec.save_minutes, spec.save_dir, spec.success_weight, spec.device) == (
        None,
        [],
        None,
        0.0,
        "cpu",
    )


# -- the rule's verdict on synthetic paired records


def _blocks(n: int, slca30: float, slca60: float, trl60: float, items: int = 64, seed: int = 0) -> list[dict]:
    """n blocks whose items succeed with these rates per checkpoint (the warm start at 0.3), drawn per block."""
    rng = random.Random(seed)
    blocks = []
    for _ in range(n):
        draw = {k: [rng.random() < p for _ in range(items)] for k, p in (("w", 0.3), ("s30", slca30), ("s60", slca60))}
        draw["t60"] = [rng.random() < trl60 for _ in range(items)]

        def out(xs):
            return {f"train_probe/t{i}": float(x) for i, x in enumerate(xs)}

        arms = {"slca@30": draw["s30"], "slca@60": draw["s60"], "trl@60": draw["t60"]}
        blocks.append({"warm": out(draw["w"]), "arms": {k: {"outcomes": out(v)} for k, v in arms.items()}})
    return blocks


def _judged(blocks: list[dict]) -> str:
    reach = paired(blocks, "slca@30", "trl@60", "train_probe")
    ends = paired(blocks, "slca@60", "trl@60", "train_probe")
    return judge(reach, ends, min(reach["blocks"], ends["blocks"]))


def test_verdict_met_not_met_not_shown_and_pending():
    assert _judged(_blocks(3, slca30=0.75, slca60=0.95, trl60=0.4)) == MET
    assert _judged(_blocks(3, slca30=0.2, slca60=0.25, trl60=0.8)) == NOT_MET
    assert _judged(_blocks(3, slca30=0.5, slca60=0.52, trl60=0.5, seed=3)) == NOT_SHOWN
    assert _judged(_blocks(2, slca30=0.75, slca60=0.95, trl60=0.4)) == PENDING


def test_reaching_needs_the_point_at_zero_or_above_and_the_interval_within_the_margin():
    ends = {"diff": 0.2, "ci95": [0.1, 0.3]}
    assert judge({"diff": 0.0, "ci95": [-0.04, 0.04]}, ends, 3) == MET
    assert judge({"diff": -0.01, "ci95": [-0.04, 0.03]}, ends, 3) == NOT_SHOWN  # point below 0
    assert judge({"diff": 0.01, "ci95": [-0.06, 0.08]}, ends, 3) == NOT_SHOWN  # interval past −5 points
    assert judge({"diff": 0.1, "ci95": [0.05, 0.15]}, {"diff": 0.02, "ci95": [-0.01, 0.05]}, 3) == NOT_SHOWN
    assert judge({"diff": -0.1, "ci95": [-0.15, -0.05]}, ends, 3) == NOT_MET
    assert judge(None, ends, 3) == PENDING


# -- the report from the files a block writes, and an arm's resume


def _records(outcomes: list[bool]) -> list[ItemRecord]:
    return [ItemRecord("train_probe", f"t{i}", ok, None, None) for i, ok in enumerate(outcomes)] + [
        ItemRecord("test", f"h{i}", ok, None, None) for i, ok in enumerate(outcomes)
    ]


def _write_block(out: Path, b: int, rates: dict[str, float], rng: random.Random) -> None:
    d = out / "blocks" / f"b{b}"
    d.mkdir(parents=True)
    write_json(d / "block.json", {"block": b, "machine": {"cpu": "x"}, "order": order(b)})
    write_jsonl(_records([rng.random() < 0.3 for _ in range(64)]), d / "warm_start.items.jsonl")
    for arm in ("slca", "trl"):
        a = d / "arms" / arm
        a.mkdir(parents=True)
        checkpoints = []
        for m in (30, 60):
            write_jsonl(_records([rng.random() < rates[f"{arm}@{m}"] for _ in range(64)]), a / f"items-{m}.jsonl")
            checkpoints.append({"minutes": m, "elapsed_s": m * 60.0, "version": m, "steps": m, "trajectories": 8 * m})
            checkpoints[-1].update(tokens=100 * m, eval_seconds=1.0)
        run = {"arm": arm, "clock": "launch", "train_seconds": 3600.0, "checkpoints": checkpoints}
        write_json(a / "done.json", run | {"load_average_1m_start": 1.0, "load_average_1m_end": 1.5})


def test_report_judges_the_target_from_the_blocks_files(tmp_path):
    write_json(tmp_path / "plan.json", {"checkpoints": [30.0, 60.0]})
    rng = random.Random(5)
    rates = {"slca@30": 0.8, "slca@60": 0.95, "trl@30": 0.35, "trl@60": 0.45}
    for b in range(3):
        _write_block(tmp_path, b, rates, rng)
    plan = {"minutes": 60.0, "checkpoints": [30.0, 60.0], "probe_size": 64, "pack": "everyday", "group_size": 8}
    plan |= {"slca": {"recipe": "g4-lr1e-5"}, "trl": {"lr": 1e-6, "steps_per_generation": 1, "is_correction": True}}
    write_json(tmp_path / "plan.json", plan | {"eval_engine": "vllm", "eval_max_tokens": 256})
    results = write_report(tmp_path)
    assert results["target"]["label"] == MET and results["target"]["reach"]["blocks"] == 3
    assert results["comparisons"]["test"]["30"]["slca − trl"]["diff"] > 0.2
    md = (tmp_path / "results.md").read_text()
    assert md.splitlines()[2].startswith("**Verdict: target met (3 blocks)")
    assert "| b1 (x) | trl | launch | 30 |" in md
    alone = results["per_block"]
    assert [row["block"] for row in alone] == [0, 1, 2]
    assert all(row["train_probe"]["ends_higher"]["blocks"] == 1 for row in alone)
    assert all(row["train_probe"]["reach"]["ci95"][0] > 0 for row in alone)  # 0.8 vs 0.45 on 64 items: clear alone
    assert "## Each block alone" in md and "| b2 | test | +" in md
    assert json.loads((tmp_path / "results.json").read_text())["blocks"][0]["order"] == ["slca", "trl"]


def test_the_results_say_the_command_a_block_of_their_plan_runs():
    """The README's table quotes it: every flag the plan fixes, global `--set`s before `bench`, no machine path."""
    plan = {"minutes": 60.0, "checkpoints": [30.0, 60.0], "probe_size": 64, "pack": "everyday"}
    plan |= {"trl": {"lr": 1e-6}, "extra_settings": ["serve.engine=hf"]}
    assert command_line(plan, Path("bench/learning/vs-trl")) == (
        "slca --set serve.engine=hf bench learn-vs-trl --block N --minutes 60 --checkpoints 30 --probe-size 64 "
        "--pack everyday --trl-lr 1e-06 --out bench/learning/vs-trl"
    )
    assert command_line(plan, Path("/root/x/vs-trl")).endswith("--out <out>/vs-trl")


def _block(tmp_path: Path, items: list) -> block_main.Block:
    args = argparse.Namespace(block=0, keep_checkpoints=False)
    return block_main.Block(args, None, tmp_path / "warm", tmp_path / "b0", items, tmp_path / "t", [30.0, 60.0], None)


def test_an_arm_trains_once_judges_each_checkpoint_and_resumes(tmp_path, monkeypatch):
    from ops.experiments.learning import recipe

    trained, judged = [], []

    def fake_trainer(block, arm_dir):
        trained.append(arm_dir.name)
        (arm_dir / "checkpoints" / "60" / "v9").mkdir(parents=True)
        early = {"minutes": 30.0, "dir": None, "steps": 0}  # nothing published by minute 30: the warm start
        return {"train_seconds": 3600.0, "checkpoints": [early, {"minutes": 60.0, "dir": "checkpoints/60/v9"}]}

    def fake_evaluate(model_dir, items, args, log):
        judged.append(model_dir.relative_to(tmp_path).as_posix())
        return _records([True] * 2), 12.0

    monkeypatch.setitem(block_main.TRAINERS, "slca", fake_trainer)
    monkeypatch.setattr(recipe, "evaluate", fake_evaluate)
    warm = _records([False] * 2)
    done = block_main.run_arm("slca", _block(tmp_path, []), warm)
    arm_dir = tmp_path / "b0" / "arms" / "slca"
    assert trained == ["slca"] and judged == ["b0/arms/slca/checkpoints/60/v9"]
    assert [c["eval_seconds"] for c in done["checkpoints"]] == [0.0, 12.0]
    assert (arm_dir / "items-30.jsonl").read_text().count('"success": false') == 4  # the warm start's records
    assert not (arm_dir / "checkpoints").exists()  # judged weights are not kept
    assert block_main.run_arm("slca", _block(tmp_path, []), warm) == done and trained == ["slca"]


def test_a_later_block_with_another_plan_is_refused(tmp_path):
    block_main.fix_plan(tmp_path, {"minutes": 60.0, "trl": {"lr": 1e-6}})
    block_main.fix_plan(tmp_path, {"minutes": 60.0, "trl": {"lr": 1e-6}})
    with pytest.raises(CliError, match="trl differ"):
        block_main.fix_plan(tmp_path, {"minutes": 60.0, "trl": {"lr": 1e-5}})


def test_without_trl_the_command_refuses_before_anything_runs(tmp_path, monkeypatch):
    from slca.cli import build_parser

    monkeypatch.setattr(block_main, "trl_available", lambda: False)
    args = build_parser().parse_args(["bench", "learn-vs-trl", "--block", "0", "--out", str(tmp_path / "out")])
    assert args.checkpoints == [30.0, 60.0] and args.minutes == 60.0
    with pytest.raises(CliError, match="TRL is not installed"):
        block_main.run_block(args, None)
    assert not (tmp_path / "out").exists()


def test_trls_process_gets_the_learners_heap_measures(monkeypatch):
    """Alike on both sides: the mmap threshold, the oneDNN cache bound and a heap trim after every step (without
    them TRL's process was OOM-killed 42 minutes into block 0's arm on a 24 GiB machine)."""
    from learner.settings import LearnerSettings
    from ops.bench.rl import trl_side

    heap = trl_side.learner_heap(LearnerSettings())
    assert heap == {"heap_mmap_threshold_kib": 1024, "onednn_primitive_cache": 64, "heap_trim_after_step": True}
    trims = []
    monkeypatch.setattr("slca.heap.trim", lambda: trims.append(1) or True)
    (callback,) = trl_side.heap_callbacks(_spec(**heap))
    callback.on_step_end(None, None, None)
    callback.on_step_end(None, None, None)
    assert len(trims) == 2
    assert trl_side.heap_callbacks(_spec(heap_trim_after_step=False)) == []
