"""The servers a bench run compares, each in its own process (one at a time: they share the CPU):

- vLLM's own OpenAI server (`vllm.entrypoints.openai.api_server`), the baseline;
- `slca serve` with a given engine setup, as it is deployed (its own process, its own event loop), so that the
  bench's clients never share a GIL with the server they measure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from slca.redis_server import free_port

BENCH_MODEL = "bench"
"""The model name both servers are asked for (vLLM's server needs one)."""

START_TIMEOUT_S = 420.0


class ServerFailed(RuntimeError):
    """A server did not become ready; the message carries the end of its log."""


class Ready(float):
    """What `running` yields: the seconds the server took to become ready, and (`.pid`) its process, the leader
    of its process group — for a bench that samples its memory."""

    pid: int


@contextmanager
def running(cmd: list[str], ready_url: str, log_path: Path, env: dict | None = None) -> Iterator[Ready]:
    """Run `cmd` in its own process group until the block ends; yields the seconds it took to become ready
    (`Ready`, a float that also carries the pid)."""
    t0 = time.perf_counter()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, env={**os.environ, **(env or {})}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            if not _wait_http(ready_url, proc, START_TIMEOUT_S):
                tail = log_path.read_text(errors="replace")[-2000:]
                raise ServerFailed(f"{cmd[2:4]} not ready within {START_TIMEOUT_S:.0f}s:\n{tail}")
            ready = Ready(time.perf_counter() - t0)
            ready.pid = proc.pid
            yield ready
        finally:
            _stop(proc)


def vllm_server_cmd(port: int, engine_kwargs: dict) -> list[str]:
    """vLLM's own OpenAI server configured exactly as slca's engine is: every keyword argument of
    `serve.engines.vllm_common.engine_kwargs` (dtype, eager mode, max_model_len, max_num_seqs, no chunked
    prefill with the same max_num_batched_tokens and KV cache reservation on CPU, seed …) becomes its command-line
    flag."""
    return [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        *engine_flags(engine_kwargs),
        "--port",
        str(port),
        "--served-model-name",
        BENCH_MODEL,
    ]


def engine_flags(engine_kwargs: dict) -> list[str]:
    """`EngineArgs` keywords as vLLM's CLI flags: `a_b=x` → `--a-b x`; True → `--a-b`; False → `--no-a-b`."""
    out: list[str] = []
    for key, value in engine_kwargs.items():
        flag = "--" + key.replace("_", "-")
        if value is None:
            continue
        if isinstance(value, bool):
            out.append(flag if value else "--no-" + flag[2:])
        else:
            out += [flag, str(value)]
    return out


def project_engine_kwargs(model_dir: Path, settings) -> dict:
    """slca's vLLM engine arguments for these settings, without leaving `engine_kwargs`' environment variables
    set in this process."""
    from serve.engines.vllm_common import ENGINE_ENV, engine_kwargs

    saved = {name: os.environ.get(name) for name in ENGINE_ENV}
    try:
        kwargs, _ = engine_kwargs(str(model_dir), settings)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return kwargs


def slca_serve_cmd(model_dir: Path, redis_url: str, port: int, overrides: dict[str, object]) -> list[str]:
    sets = {
        "common.model": model_dir,
        "common.redis_url": redis_url,
        "serve.port": port,
        "serve.host": "127.0.0.1",
        "weights.follow": "false",
        "serve.served_model_name": BENCH_MODEL,
        **overrides,
    }
    return [sys.executable, "-m", "slca", *(a for k, v in sets.items() for a in ("--set", f"{k}={v}")), "serve"]


def port() -> int:
    return free_port()


def _wait_http(url: str, proc: subprocess.Popen, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return True
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    return False


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
