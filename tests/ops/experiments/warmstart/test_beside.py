"""`slca sft --publish` beside serving (ops/experiments/warmstart/beside.py): every stage between the end of training
and the version served is on the record as it begins, in order, each timed; by default no held-out check runs
(`ops.warm_start_eval_tasks` 0: the checks were minutes of greedy generation before the swap), and the published
version shares the saved weights' file instead of copying it. Training and serve are faked; Redis is real."""

from __future__ import annotations

import shutil
from argparse import Namespace

from ops.experiments.warmstart import beside
from ops.experiments.warmstart.handover import MODEL_FILES, publish_model_dir
from ops.experiments.warmstart.progress import ProgressBoard, read_record
from ops.settings import OpsSettings
from slca.config import load_config
from slca.contracts import Streams
from tests.ops.experiments.warmstart.test_handover import KEY, FakeServe


class WatchedBoard(ProgressBoard):
    """The board, remembering each phase as it is written."""

    def __init__(self, *args, **kwargs) -> None:
        self.phases: list[str] = []
        super().__init__(*args, **kwargs)

    def update(self, **changes):
        record = super().update(**changes)
        if not self.phases or self.phases[-1] != record.phase:
            self.phases.append(record.phase)
        return record


def test_every_stage_after_training_is_on_the_record_in_order_and_timed(tmp_path, tiny_model_dir, redis_client,
                                                                         redis_url, monkeypatch):  # fmt: skip
    out = tmp_path / "models" / "warm"
    streams = Streams("slca")
    serve = FakeServe(redis_client, streams)
    monkeypatch.setattr("ops.experiments.warmstart.handover.ServeAdminClient", lambda url, token: serve)
    config = load_config(None, [f"common.redis_url={redis_url}", f"common.data_dir={tmp_path / 'var'}",
                                "ops.warm_start_swap_timeout_s=5"])  # fmt: skip

    def train(on_step, on_phase) -> int:  # what `learner.sft.run_sft` reports, in its order, without a check
        for step in (1, 2):
            on_step(step, 0.5, step / 2, 0.0)
        on_phase("saving")
        shutil.copytree(tiny_model_dir, out)
        return 0

    board = WatchedBoard(tmp_path / "var", redis_client, "slca")
    args = Namespace(out=str(out), minutes=0.1, steps=0, serve_url="http://serve")
    assert beside.run_beside(args, config, train, board) == 0
    assert board.phases == ["loading", "training", "saving", "publishing", "swapping", "served"]
    record = read_record(tmp_path / "var")
    assert record.version == 1 and record.on_version
    assert record.trained_at <= record.saved_at <= record.published_at <= record.served_at
    assert serve.calls == ["promote v1 (before the announcement)"]
    assert "checked and saved in" in beside.after_training(record)
    assert config.get(OpsSettings).warm_start_eval_tasks == 0  # `slca up` asks for no held-out check by default


def test_the_published_version_shares_the_saved_weights_file(tmp_path, tiny_model_dir):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    manifest = publish_model_dir(model, tmp_path / "var", KEY)
    version = tmp_path / "var" / "weights" / f"v{manifest.version}"
    for name in MODEL_FILES:  # one inode: the 0.5 GiB of the real model is written once, by the save
        assert (version / name).stat().st_ino == (model / name).stat().st_ino
    shutil.rmtree(model)  # a later warm start replaces its directory: the version keeps what it hashed
    assert (version / "model.safetensors").is_file()


def test_each_phase_reads_as_one_line():
    from ops.experiments.warmstart.progress import WarmStartRecord

    assert WarmStartRecord(phase="checking", started_at=100.0).line(130.0) == (
        "checking the base model on held-out tasks (0:30)"  # the before-check: training has not ended
    )
    after = {"started_at": 100.0, "trained_at": 200.0, "version": 3}
    lines = [WarmStartRecord(phase=p, **after).line(215.0) for p in ("checking", "saving", "publishing", "swapping")]
    assert lines == [
        "checking the trained model on held-out tasks (0:15 after training)",
        "saving the model (0:15 after training)",
        "publishing the model as the next weight version (0:15 after training)",
        "v3 published; serve is to promote and swap it in (0:15 after training)",
    ]
