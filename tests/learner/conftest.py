"""Fixtures of the learner tests: a `slca learn` subprocess against an owned Redis."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis as redis_lib
import torch

from slca.contracts import Streams, WeightManifest
from slca.contracts.wire import load_json

REPO = Path(__file__).resolve().parents[2]


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
        env = {**os.environ, "PYTHONPATH": str(REPO), "SLCA_REDIS_URL": self.redis_url, "SLCA_DATA_DIR": str(self.data_dir),
               "SLCA_MODEL": str(self.model_dir), "OMP_NUM_THREADS": "1", "SLCA_LOG_LEVEL": "INFO"}  # fmt: skip
        env.update({f"SLCA_LEARNER__{k.upper()}": json.dumps(v) if not isinstance(v, str) else v for k, v in self.settings.items()})
        cmd = [sys.executable, "-m", "slca", "learn"] + (["--max-steps", str(max_steps)] if max_steps else [])
        log = open(self.data_dir / f"learner-{self.starts}.log", "wb")
        self.starts += 1
        self.proc = subprocess.Popen(cmd, env=env, cwd=self.data_dir, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)  # fmt: skip

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def log_text(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(self.data_dir.glob("learner-*.log")))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def wait_for_version(client, streams: Streams, above: int, learner: LearnerProcess, timeout: float = 300) -> WeightManifest:
    """Block until `slca:weights:latest` names a version > `above` (polls; the learner process may be slow)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        raw = client.get(streams.weights_latest)
        if raw:
            manifest = load_json(WeightManifest, raw)
            if manifest.version > above:
                return manifest
        if not learner.alive():
            raise AssertionError(f"learner exited: {learner.log_text()}")
        time.sleep(0.05)
    raise AssertionError(f"no version > {above} after {timeout}s: {learner.log_text()}")


def load_weights(model, manifest: WeightManifest) -> None:
    from safetensors.torch import load_file

    assert manifest.verify() == [], "published files do not match their sha256"
    state = load_file(str(Path(manifest.path) / "model.safetensors"))
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all("lm_head" in m for m in missing), (missing, unexpected)


@pytest.fixture
def learner_process(redis_url, tmp_path, tiny_model_dir):
    procs = []

    def make(**settings) -> LearnerProcess:
        p = LearnerProcess(redis_url, tmp_path, tiny_model_dir, {"precision": "fp32", "block_ms": 100, **settings})
        procs.append(p)
        return p

    yield make
    for p in procs:
        p.kill()


@pytest.fixture
def rollout_model(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    torch.set_num_threads(1)  # the CI machine has 2 shared cores: one thread each for sampler and learner
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32)
    model.eval()
    return model, AutoTokenizer.from_pretrained(str(tiny_model_dir))


@pytest.fixture
def streams():
    return Streams("slca")


@pytest.fixture
def sync_client(redis_url):
    client = redis_lib.Redis.from_url(redis_url)
    yield client
    client.close()
