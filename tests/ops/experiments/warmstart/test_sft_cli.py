"""`slca sft` and `slca bench sft` smoke runs on the tiny model (demonstrations from the sim, via
ops.experiments.warmstart)."""

from __future__ import annotations

import json

import pytest

from learner.sft_schedule import lr_at
from slca.cli import main


def test_sft_trains_on_grouped_batches_with_the_step_schedule(tmp_path, tiny_model_dir, capsys):
    out = tmp_path / "sft-out"
    rc = main(
        [
            "--set",
            "learner.precision=fp32",
            "sft",
            "--model",
            str(tiny_model_dir),
            "--steps",
            "3",
            "--batch-tokens",
            "1600",
            "--eval-tasks",
            "0",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    assert "sft precision: float32 (requested)" in capsys.readouterr().out
    summary = json.loads((out / "sft-summary.json").read_text())
    history = summary["history"]
    assert [h["lr"] for h in history] == pytest.approx([lr_at(k, k / 3, 5e-5) for k in range(3)])
    assert all(h["tokens"] <= 1600 or h["examples"] == 1 for h in history)  # real ≤ padded ≤ the budget
    assert all(h["padding"] < 0.1 for h in history) and summary["tokens_per_s"] > 0


def test_bench_sft_prints_and_writes_old_vs_new(tmp_path, tiny_model_dir, capsys, monkeypatch):
    # the method's floor (10 old-loop steps per window) is a user's guard; the plumbing needs 3, and 60 steps of
    # a real model cost a minute of the suite. The floor itself is checked below and in test_sft_bench.
    monkeypatch.setattr("ops.bench.sft.MIN_STEPS", 3)
    out = tmp_path / "bench" / "sft.json"
    assert main(["bench", "sft", "--model", str(tiny_model_dir), "--steps", "2", "--out", str(out)]) == 2
    assert "at least 3 old-loop steps" in capsys.readouterr().err and not out.exists()
    rc = main(
        [
            "--set",
            "learner.sft_batch=2",
            "bench",
            "sft",
            "--model",
            str(tiny_model_dir),
            "--steps",
            "3",
            "--pairs",
            "3",
            "--warmup",
            "0",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "sft precision:" in printed and "new ÷ old" in printed and "tokens/s" in printed
    report = json.loads(out.read_text())
    old, new = report["loops"]["old"], report["loops"]["new"]
    for loop in (old, new):
        assert loop["windows"] == 3 and loop["tokens_per_s"] > 0 and loop["s_per_step"] > 0
    assert old["steps"] == 9 and old["examples_per_step"] == 2 and old["real_tokens"] == new["real_tokens"]
    assert new["padding_share"] < old["padding_share"]
    assert report["ratio"]["tokens_per_s"] == report["ab"]["median_ratio"] and len(report["ab"]["windows"]) == 6
    assert report["model"] == tiny_model_dir.name and str(tmp_path) not in out.read_text()
    assert {"command", "precision", "threads", "batch_tokens", "steps_per_window"} <= report.keys()
    assert out.with_suffix(".md").is_file()


def test_sft_smoke_on_tiny(tmp_path, tiny_model_dir, capsys):
    out = tmp_path / "sft-out"
    rc = main(
        [
            "--set",
            "learner.sft_batch=2",
            "sft",
            "--model",
            str(tiny_model_dir),
            "--steps",
            "1",
            "--eval-tasks",
            "0",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    summary = json.loads((out / "sft-summary.json").read_text())
    assert summary["steps"] == 1 and summary["first_loss"] > 0
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()


def test_sft_with_gradient_checkpointing_recomputes_layers_and_learns_the_same(tmp_path, tiny_model_dir, monkeypatch):
    """`learner.sft_gradient_checkpointing`: the decoder layers run under torch's checkpoint (their activations are
    recomputed in the backward, not kept), and the steps' losses are those of the run without it."""
    import transformers.modeling_utils

    calls = []
    checkpoint = transformers.modeling_utils.checkpoint  # what `gradient_checkpointing_enable` binds

    def counted(*args, **kwargs):
        calls.append(1)
        return checkpoint(*args, **kwargs)

    monkeypatch.setattr(transformers.modeling_utils, "checkpoint", counted)
    losses, seen = {}, {}
    for on in (False, True):
        out = tmp_path / f"sft-{on}"
        calls.clear()
        settings = ["--set", "learner.precision=fp32", "--set", f"learner.sft_gradient_checkpointing={str(on).lower()}"]
        argv = [*settings, "sft", "--model", str(tiny_model_dir), "--steps", "2", "--batch-tokens", "800"]
        argv += ["--eval-tasks", "0"]
        assert main([*argv, "--out", str(out)]) == 0
        summary = json.loads((out / "sft-summary.json").read_text())
        losses[on] = [h["loss"] for h in summary["history"]]
        seen[on] = (summary["gradient_checkpointing"], len(calls) > 0)
        assert summary["peak_rss_mib"] > 100  # the process's own peak (VmHWM), for `slca bench sft-memory`
    assert seen == {False: (False, False), True: (True, True)}
    assert losses[True] == pytest.approx(losses[False], rel=1e-4)
