"""One run of a comparison: a finished run (done.json) is read back, not redone; an unfinished one is deleted and
redone from the warm start; only the versions the curve and the final evaluation need are kept; every curve point
is on the same items, the final one read off the final evaluation; the per-item records are kept; every
`slca train` gets the same pinned budget, and an arm adds only its estimator and advantage knobs.

`train` and the evaluations are replaced by small hand-written fakes (the real ones run in the slow smoke test
of `tests/ops/experiments/learning/test_learning_bench.py`)."""

import json
from pathlib import Path

import pytest

import ops.experiments.learning.runner as runner
from ops.experiments.learning.files import write_json
from ops.experiments.learning.plan import Plan, RunKey
from ops.experiments.eval.suite import ItemRecord, read_jsonl
from ops.experiments.learning.runner import TrainContext, TrainOutcome, prune, run_one, train_argv
from slca.config import load_config

PLAN = Plan(
    model="warm",
    arms=("slca", "grpo", "slca_decision"),
    seeds=(0, 1),
    steps=4,
    group_size=2,
    temperature=1.0,
    max_tokens=16,
    lr=1e-6,
    lr_schedule="constant",
    pack="everyday",
    eval_items=0,
    eval_max_tokens=16,
    eval_engine="hf",
    curve="eval",
    curve_every=2,
    curve_items=2,
)
KEYS = {"test/a", "novel/b"}  # the curve items


class FakeTrainer:
    """Writes what `slca train` leaves behind (complete version folders, per-step lines) and counts calls."""

    def __init__(self):
        self.calls: list[tuple[str, int]] = []

    def __call__(self, ctx, key, steps, run_dir, keep, on_step=lambda s: None):
        self.calls.append((key.name, steps))
        weights = run_dir / "work" / f"train-{key.arm}-{key.seed}" / "weights"
        for v in range(1, steps + 1):
            (weights / f"v{v}").mkdir(parents=True)
            (weights / f"v{v}" / "manifest.json").write_text("{}")
            on_step(v)
        lines = [
            {
                "step": s,
                "exec_mean": 0.1 * s,
                "tool_turns_mean": 1.0,
                "all/tokens": 10,
                "all/adv_abs_mean": 0.5,
                "tool_call/adv_abs_mean": 0.7,
                "summary/adv_abs_mean": 0.3,
                "omission_rate": 0.0,
            }
            for s in range(1, steps + 1)
        ]
        return TrainOutcome(1.0, lines, weights)


@pytest.fixture
def fakes(monkeypatch):
    trainer, evaluated = FakeTrainer(), []

    def run_eval(config, model_dir: Path, spec, keys=None):
        """Version v<k> solves the first k − 1 of four items (a, b in the curve subset; c, d not)."""
        evaluated.append(("final" if keys is None else "curve", model_dir.name))
        ids = [("test", "a"), ("novel", "b"), ("test", "c"), ("novel", "d")]
        k = int(model_dir.name[1:])
        records = [
            ItemRecord(suite, i, success=n < k - 1, exec=1.0, pref=0.5, calls=[{"name": "f"}] if i == "d" else [])
            for n, (suite, i) in enumerate(ids)
            if keys is None or f"{suite}/{i}" in keys
        ]
        return records, 0.2

    monkeypatch.setattr(runner, "train", trainer)
    monkeypatch.setattr(runner, "run_eval", run_eval)
    monkeypatch.setattr(runner, "curve_keys", lambda spec: KEYS)
    monkeypatch.setattr(runner, "no_tool_keys", lambda spec: {"novel/d", "test/c"})
    monkeypatch.setattr(runner, "train_no_tool", lambda pack: set())
    return trainer, evaluated


def ctx(tmp_path) -> TrainContext:
    return TrainContext(load_config(), ("--set", "common.log_level=INFO"), tmp_path / "model", PLAN)


def test_a_finished_run_is_read_back_not_redone(tmp_path, fakes):
    trainer, evaluated = fakes
    done = {"arm": "slca", "estimator": "slca", "seed": 0, "seconds": 12.0, "metrics": {"held_out/success": 1.0}}
    write_json(tmp_path / "runs" / "slca-s0" / "done.json", done)
    assert run_one(ctx(tmp_path), RunKey("slca", 0), tmp_path) == done
    assert trainer.calls == [] and evaluated == []


def test_an_unfinished_run_is_deleted_and_redone(tmp_path, fakes):
    trainer, evaluated = fakes
    stale = tmp_path / "runs" / "grpo-s1"
    (stale / "work" / "train-grpo-1" / "weights" / "v7").mkdir(parents=True)  # a half-finished earlier attempt
    (stale / "train.jsonl").write_text('{"step": 1}\n')
    record = run_one(ctx(tmp_path), RunKey("grpo", 1), tmp_path)
    assert trainer.calls == [("grpo-s1", 4)]
    # the final model is v<steps>; its curve point is read off its final evaluation, on the curve items
    assert evaluated == [("curve", "v2"), ("final", "v4")]
    assert record["curve"] == [[2, 0.5], [4, 1.0]] and record["metrics"]["held_out/success"] == 0.75
    assert record["metrics"]["held_out/spurious_call_rate"] == 0.5  # d called a tool, c did not
    assert (record["arm"], record["estimator"]) == ("grpo", "grpo")
    assert [(r.item_id, r.success) for r in read_jsonl(stale / "items.jsonl")] == [
        ("a", True),
        ("b", True),
        ("c", True),
        ("d", False),
    ]
    assert record["diagnostics"]["diag/adv_abs_tool_call"] == pytest.approx(0.7)
    assert record["tool_turns"] == [[s, 1.0] for s in range(1, 5)]
    assert not (stale / "work").exists() and not (stale / "train.jsonl").exists()  # weights deleted, stale log gone
    assert json.loads((stale / "done.json").read_text()) == record
    run_one(ctx(tmp_path), RunKey("grpo", 1), tmp_path)
    assert len(trainer.calls) == 1  # and now it is done


def test_prune_keeps_the_newest_and_the_needed_versions(tmp_path):
    for v in range(1, 7):
        (tmp_path / f"v{v}").mkdir()
        if v != 6:
            (tmp_path / f"v{v}" / "manifest.json").write_text("{}")  # v6 is still being written: no manifest
    prune(tmp_path, keep={2, 4})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v2", "v4", "v5", "v6"]


def test_every_train_gets_the_pinned_budget(tmp_path):
    argv = train_argv(ctx(tmp_path), RunKey("toolpo", 2), 4, tmp_path / "work", tmp_path / "train.jsonl")
    joined = " ".join(argv)
    for pinned in (
        "learner.train_group_size=2",
        "learner.train_temperature=1.0",
        "learner.train_max_tokens=16",
        "learner.lr=1e-06",
        "weights.keep_versions=0",
        f"learner.init_model={tmp_path / 'model'}",
    ):
        assert f"--set {pinned}" in joined
    assert argv[argv.index("train") :][:9] == [
        "train",
        "--estimator",
        "toolpo",
        "--seed",
        "2",
        "--steps",
        "4",
        "--pack",
        "everyday",
    ]
    assert argv.index("common.log_level=INFO") < argv.index("train")  # the bench's own --set reach every run
    assert "decision_token" not in joined


def test_the_slca_decision_arm_trains_slca_with_the_decision_token(tmp_path):
    argv = train_argv(ctx(tmp_path), RunKey("slca_decision", 0), 4, tmp_path / "work", tmp_path / "train.jsonl")
    assert argv[argv.index("train") :][:3] == ["train", "--estimator", "slca"]
    assert " ".join(argv).count("--set learner.advantage.decision_token=true") == 1
