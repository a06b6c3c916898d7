"""TRL's arm of `slca bench learn-vs-trl` for real on the tiny model: trained on a tasks file, saved at its marks as
version directories the evaluation loads, stopped after the last (≈ a minute, plus TRL's start-up)."""

from __future__ import annotations

import time

import pytest

from ops.bench.learn_vs_trl.capture import complete
from ops.bench.rl.main import run_trl_side, trl_available
from ops.bench.rl.trl_side import TrlSpec
from ops.experiments.learning.files import read_json

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not trl_available(), reason="TRL is the optional [bench] extra (`make install-bench`)"),
]


def test_trl_saves_at_its_marks_and_stops_after_the_last(tiny_model_dir, tmp_path):
    from sim.tasks import write_jsonl
    from sim.tasks.probe import training_probe

    tasks = tmp_path / "tasks.jsonl"
    write_jsonl(training_probe("everyday", 8), tasks)
    spec = TrlSpec(
        model=str(tiny_model_dir),
        pack="everyday",
        group_size=2,
        max_new_tokens=8,
        seconds=600.0,
        lr=1e-6,
        bf16=False,
        tasks_file=str(tasks),
        save_minutes=[0.01, 0.5],
        save_dir=str(tmp_path / "checkpoints"),
        clock_start=time.time(),
    )
    run_trl_side(spec, tmp_path, timeout_s=900)
    saved = read_json(tmp_path / "trl-counts.json")["checkpoints"]
    assert [c["minutes"] for c in saved] == [0.01, 0.5]
    assert saved[0]["step"] <= saved[1]["step"] and 30 <= saved[1]["elapsed_s"] < 600
    for c in saved:
        version = tmp_path / "checkpoints" / f"{c['minutes']:g}" / f"v{c['step']}"
        assert complete(version) and (version / "model.safetensors").is_file()
