"""Serving under test: a real `slca serve` process, an in-process app, and the tool and token they share."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from ops.bench.hostile import WEATHER
from slca.redis_server import free_port
from tests.support.processes import REPO
from tests.support.weights import NO_FOLLOW
from tests.support.wait import wait_for

ADMIN_TOKEN = "test-admin-token"


def agent_run_body(task_id: str, **extra) -> dict:
    """A small recorded agent run (two rollouts of ≤ 4 tokens, seeded) for `POST /v1/agent/runs`."""
    return {
        "messages": [{"role": "user", "content": "hi"}],
        "task_id": task_id,
        "n": 2,
        "max_tokens": 4,
        "seed": 3,
        "record": True,
        **extra,
    }


# the hostile cases' forced tool (ops/bench/hostile.py), with a declared response schema for the simulator
WEATHER_TOOL = {
    **WEATHER,
    "function": {
        **WEATHER["function"],
        "x-response-schema": {
            "type": "object",
            "properties": {"temp": {"type": "number"}, "sky": {"type": "string"}},
            "required": ["temp", "sky"],
        },
    },
}


class ServerProcess:
    """`python -m slca serve` (hf engine) in its own process group; killed by pid at teardown."""

    def __init__(self, redis_url: str, model_dir: Path, log_path: Path, *overrides: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        sets = [
            "common.model=" + str(model_dir),
            f"common.redis_url={redis_url}",
            "serve.engine=hf",
            f"serve.port={self.port}",
            "serve.torch_threads=1",
            f"common.admin_token={ADMIN_TOKEN}",
            "serve.max_model_len=1024",
            *overrides,
        ]
        cmd = [sys.executable, "-m", "slca"] + [a for s in sets for a in ("--set", s)] + ["serve"]
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/readyz", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def wait_ready(self, timeout: float = 120.0) -> "ServerProcess":
        wait_for(
            self._ready,
            timeout,
            "the server's /readyz",
            interval=0.3,
            alive=lambda: self.proc.poll() is None,
            detail=lambda: self.log_path.read_text()[-3000:],
        )
        return self

    def get_json(self, path: str):
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            return json.loads(r.read())

    def metrics(self) -> str:
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as r:
            return r.read().decode()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=15)
        self.log.close()


def raw_post(url: str, data: bytes) -> tuple[int, dict, dict]:
    """POST raw bytes as JSON; (status, decoded body, headers), error statuses included."""
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read()), dict(r.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), dict(exc.headers)


async def run_in_app(
    tiny_model_dir, redis_url, scenario, settings=None, subapps=None, weights=None, wait_ready=True, **common
):
    """Run `scenario(client, app)` against an in-process app (hf engine on the tiny model). `weights`: its
    `[weights]` section; None: `NO_FOLLOW` (the app loads no announced version). `wait_ready`: first wait, as a
    caller polling /readyz would, for the grammar host's first start (ready includes forced calls)."""
    from aiohttp.test_utils import TestClient, TestServer

    from serve.app import create_app
    from serve.keys import GRAMMARS
    from serve.settings import ServeSettings
    from slca.config import CommonSettings

    settings = settings or ServeSettings(engine="hf", max_model_len=512, torch_threads=1)
    common_settings = CommonSettings(model=str(tiny_model_dir), redis_url=redis_url, **common)
    app = create_app(settings, common_settings, weights=weights or NO_FOLLOW, subapps=subapps)
    async with TestClient(TestServer(app)) as client:
        if wait_ready:
            await asyncio.wait_for(app[GRAMMARS].first_start(), 120.0)
        return await scenario(client, app)
