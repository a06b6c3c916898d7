"""Fixtures of the serve tests: a real `slca serve` process on the tiny model (hf engine) with a real Redis."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import redis

from ops.bench.hostile import WEATHER
from slca.redis_server import RedisServer, free_port

REPO = Path(__file__).resolve().parents[2]
ADMIN_TOKEN = "test-admin-token"


class ServerProcess:
    """`python -m slca serve` in its own process group; killed by pid at teardown."""

    def __init__(self, redis_url: str, model_dir: Path, log_path: Path, *overrides: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        sets = ["common.model=" + str(model_dir), f"common.redis_url={redis_url}", "serve.engine=hf",
                f"serve.port={self.port}", "serve.torch_threads=1", f"common.admin_token={ADMIN_TOKEN}", "serve.max_model_len=1024",
                *overrides]  # fmt: skip
        cmd = [sys.executable, "-m", "slca"] + [a for s in sets for a in ("--set", s)] + ["serve"]
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = 120.0) -> "ServerProcess":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.3)
        raise TimeoutError(f"server not ready: {self.log_path.read_text()[-3000:]}")

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


@pytest.fixture(scope="session")
def serve_redis(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("serve-redis"), appendonly=False).start()
    yield server
    server.kill()


@pytest.fixture(scope="session")
def hf_server(serve_redis, tiny_model_dir, tmp_path_factory):
    """One shared server for the read-mostly tests (its weight version never changes)."""
    server = ServerProcess(serve_redis.url, tiny_model_dir, tmp_path_factory.mktemp("serve") / "server.log",
                           "serve.subscribe_weights=false")  # fmt: skip
    try:
        yield server.wait_ready()
    finally:
        server.stop()


@pytest.fixture
def rclient(serve_redis):
    client = redis.Redis.from_url(serve_redis.url)
    yield client
    client.close()


async def run_in_app(tiny_model_dir, redis_url, scenario, settings=None, subapps=None, **common):
    """Run `scenario(client, app)` against an in-process app (hf engine on the tiny model)."""
    from aiohttp.test_utils import TestClient, TestServer

    from serve.app import create_app
    from serve.settings import ServeSettings
    from slca.config import CommonSettings

    settings = settings or ServeSettings(engine="hf", max_model_len=512, subscribe_weights=False, torch_threads=1)
    app = create_app(settings, CommonSettings(model=str(tiny_model_dir), redis_url=redis_url, **common), subapps=subapps)
    async with TestClient(TestServer(app)) as client:
        return await scenario(client, app)


# the hostile cases' forced tool (ops/bench/hostile.py), with a declared response schema for the simulator
WEATHER_TOOL = {**WEATHER, "function": {
    **WEATHER["function"],
    "x-response-schema": {"type": "object", "properties": {"temp": {"type": "number"}, "sky": {"type": "string"}},
                          "required": ["temp", "sky"]},
}}  # fmt: skip
