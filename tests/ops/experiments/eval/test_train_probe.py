"""The training-task probe as a split of the evaluation: `train_probe` is planned from `sim.tasks.probe`, is in the
default plan beside test and novel, is summarised with its own Wilson interval (never pooled into held_out) and is
compared item by item by `slca eval compare`."""

import argparse

import pytest

from ops.experiments.eval.cli import add_eval_arguments
from ops.experiments.eval.main import format_compare, format_summary, plan_of
from ops.experiments.eval.stats import HELD_OUT, TRAIN_PROBE, compare, summarize, wilson
from ops.experiments.eval.suite import EvalPlan, ItemRecord, plan_items
from sim.tasks.probe import training_probe


def test_train_probe_items_are_the_fixed_training_sample():
    items = plan_items(EvalPlan(splits=(TRAIN_PROBE,), bfcl_categories=(), train_probe_size=16))
    assert [i.item_id for i in items] == [t.task_id for t in training_probe("everyday", 16)]
    assert all(i.suite == TRAIN_PROBE and i.task is not None for i in items)


def test_default_plan_asks_train_probe_beside_test_and_novel():
    assert EvalPlan().splits == ("test", "novel", TRAIN_PROBE) and EvalPlan().train_probe_size == 64
    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    plan = plan_of(parser.parse_args(["--model", "tiny", "--train-probe-size", "8", "--bfcl-categories", ""]))
    assert plan.splits == ("test", "novel", TRAIN_PROBE) and plan.train_probe_size == 8


def _records(suite: str, solved: list[int]) -> list[ItemRecord]:
    return [ItemRecord(suite, f"{suite}-{i}", bool(ok), exec=float(ok), pref=0.5) for i, ok in enumerate(solved)]


def test_train_probe_has_its_own_row_and_is_not_held_out():
    records = _records("test", [1, 0, 0, 0]) + _records(TRAIN_PROBE, [1, 1, 1, 0, 0, 0])
    rows = summarize(records)
    assert rows[HELD_OUT]["n"] == 4 and rows[HELD_OUT]["success"] == pytest.approx(0.25)
    assert rows[TRAIN_PROBE]["n"] == 6 and rows[TRAIN_PROBE]["success"] == pytest.approx(0.5)
    assert (rows[TRAIN_PROBE]["ci_low"], rows[TRAIN_PROBE]["ci_high"]) == pytest.approx(wilson(3, 6))
    text = format_summary({"model": "m", "engine": "e", "plan": {"mode": "greedy"}, "items": 10, "seconds": 1.0,
                           "items_per_s": 10.0, "summary": rows})  # fmt: skip
    assert "train_probe" in text


def test_compare_pairs_train_probe_items():
    a = _records("test", [0, 0]) + _records(TRAIN_PROBE, [0, 0, 1, 0])
    b = _records("test", [0, 1]) + _records(TRAIN_PROBE, [1, 1, 1, 0])
    result = compare(a, b)
    assert result[TRAIN_PROBE]["n"] == 4 and result[TRAIN_PROBE]["diff"] == pytest.approx(0.5)
    assert result[TRAIN_PROBE]["b_only"] == 2 and result[HELD_OUT]["n"] == 2
    assert "train_probe" in format_compare(result, "a", "b")
