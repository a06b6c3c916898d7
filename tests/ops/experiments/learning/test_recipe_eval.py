"""The recipe sweep's evaluations run in a child process (the parent serves nothing, so no engine thread outlives
an evaluation in it), on exactly the items it was given, and the warm start's evaluation is still cached by the
model's checksum and the scorer and copied into each block."""

import threading
from argparse import Namespace
from pathlib import Path

import pytest

import ops.experiments.eval.server as eval_server_module
from ops.experiments.eval.suite import ItemRecord, read_jsonl
from ops.experiments.learning import recipe
from slca.cli import CliError


@pytest.fixture(scope="module")
def items():
    everything = recipe.eval_items("everyday", 4)
    probe = next(i for i in everything if i.suite == "train_probe")
    test = next(i for i in everything if i.suite == "test")
    return [test, probe]  # not the plan's order: the records must follow the request's


def _args(**kw) -> Namespace:
    return Namespace(eval_max_tokens=8, eval_engine="hf", config=None, set=["serve.torch_threads=1"], **kw)


def test_evaluation_serves_the_model_in_a_child_not_in_the_parent(tiny_model_dir, tmp_path, items, monkeypatch):
    def served_here(*args, **kwargs):
        raise AssertionError("the model was served in the parent process")

    monkeypatch.setattr(eval_server_module, "eval_server", served_here)
    threads = threading.active_count()
    records, seconds = recipe.evaluate(tiny_model_dir, items, _args(), tmp_path / "eval.log")
    assert [(r.suite, r.item_id) for r in records] == [(i.suite, i.item_id) for i in items]
    assert all(isinstance(r, ItemRecord) and r.error is None for r in records)
    assert seconds > 0 and threading.active_count() == threads
    assert (tmp_path / "eval.log").is_file()


def test_a_failed_child_is_a_cli_error_with_its_log(tmp_path, items):
    with pytest.raises(CliError, match="evaluation of no-such-model failed"):
        recipe.evaluate(tmp_path / "no-such-model", items, _args(), tmp_path / "eval.log")


def test_the_warm_start_is_evaluated_once_per_checksum_and_copied_into_each_block(tmp_path, items, monkeypatch):
    model = tmp_path / "warm"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    calls = []

    def fake_evaluate(model_dir: Path, asked: list, args, log: Path):
        calls.append(log)
        return [ItemRecord(i.suite, i.item_id, True, 1.0, 1.0) for i in asked], 12.3

    monkeypatch.setattr(recipe, "evaluate", fake_evaluate)
    cache = tmp_path / "cache"
    for b in (0, 1):
        (tmp_path / f"b{b}").mkdir()
        warm = recipe.warm_start_records(model, items, _args(), tmp_path / f"b{b}", cache)
        assert [r.item_id for r in read_jsonl(tmp_path / f"b{b}" / "warm_start.items.jsonl")] == [
            i.item_id for i in items
        ]
        assert warm["eval_seconds"] == 12.3 and warm["checksum"] == recipe.model_checksum(model)
    assert len(calls) == 1 and calls[0].parent == cache
    (model / "model.safetensors").write_bytes(b"other weights")  # another model: evaluated again
    (tmp_path / "b2").mkdir()
    recipe.warm_start_records(model, items, _args(), tmp_path / "b2", cache)
    assert len(calls) == 2
