"""A `slca learn` process for tests, and what the sampler side of a learning test does with its versions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from slca.contracts import Streams, WeightManifest
from slca.contracts.wire import load_json
from tests.support.processes import REPO
from tests.support.wait import wait_for


MECHANICS = {"groups_per_step": 1, "screen_success_variance": False}
"""Learner settings of the tests of the loop's mechanics (steps, checkpoints, publishing, staleness, ranks), which
push one group at a time and count the steps they cause: one group per step, no success screening (the tiny model
never succeeds, so screening would leave every step without a gradient). The recipe's defaults (4 groups per step,
screening; learner/settings.py) are what `slca up`, `slca learn` and the recipe bench run; a test that is about them
overrides these."""


class LearnerProcess:
    """`python -m slca learn` as a real process (own session, so a kill takes all of it)."""

    def __init__(self, redis_url: str, data_dir: Path, model_dir: Path, settings: dict):
        self.redis_url = redis_url
        self.data_dir = data_dir
        self.model_dir = model_dir
        self.settings = settings
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self, max_steps: int | None = None) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "SLCA_REDIS_URL": self.redis_url,
            "SLCA_DATA_DIR": str(self.data_dir),
            "SLCA_MODEL": str(self.model_dir),
            "OMP_NUM_THREADS": "1",
            "SLCA_LOG_LEVEL": "INFO",
        }
        env.update(
            {
                f"SLCA_LEARNER__{k.upper()}": json.dumps(v) if not isinstance(v, str) else v
                for k, v in self.settings.items()
            }
        )
        cmd = [sys.executable, "-m", "slca", "learn"] + (["--max-steps", str(max_steps)] if max_steps else [])
        log = open(self.data_dir / f"learner-{self.starts}.log", "wb")
        self.starts += 1
        self.proc = subprocess.Popen(
            cmd, env=env, cwd=self.data_dir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def log_text(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(self.data_dir.glob("learner-*.log")))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def wait_for_version(
    client, streams: Streams, above: int, learner: LearnerProcess, timeout: float = 300
) -> WeightManifest:
    """The manifest `slca:weights:latest` names once its version is > `above` (the learner process may be slow;
    fails at once with its log when it exits)."""

    def newer() -> WeightManifest | None:
        raw = client.get(streams.weights_latest)
        manifest = load_json(WeightManifest, raw) if raw else None
        return manifest if manifest is not None and manifest.version > above else None

    return wait_for(newer, timeout, f"a weight version > {above}", alive=learner.alive, detail=learner.log_text)


def load_weights(model, manifest: WeightManifest) -> None:
    """Load a published version into the sampler's model (sha256 of every file checked first)."""
    from safetensors.torch import load_file

    assert manifest.verify() == [], "published files do not match their sha256"
    state = load_file(str(Path(manifest.path) / "model.safetensors"))
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all("lm_head" in m for m in missing), (missing, unexpected)
