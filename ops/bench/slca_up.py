"""`slca up` as the system a bench measures (`slca bench rl`'s pipeline side, `slca bench soak`): its command line and
the settings every bench gives it, its readiness, its processes' roles, its stop and its logs. It runs in a session of
its own, so that a stuck stop can kill the whole tree."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

LOG_TAIL_BYTES = 2_000_000
"""What `copy_logs` keeps of each process log (its end)."""
ROLES = ("serve", "worker", "assembler", "learn", "feed")
"""The processes `slca up` starts (besides Redis and the gate), by their command; each but serve has a metrics
port the benches turn off."""
UNPORTED_ROLES = ("gate",)
"""Processes `slca up` starts that have no metrics port."""
HELPER_ROLES = {"serve.engines.grammar_host": "grammar host (serve's)"}
"""Processes a role starts for itself, by their module (`python -m <module>`): named, not "other: python"."""


def bench_sets(data_dir: Path, port: int, warm_start: bool = False) -> list[str]:
    """The settings every bench gives its `slca up`: its own data directory and API port, no final probe round at
    the stop (`stop` waits 60 s; a bench measures the system, not learning), no metrics port for the other processes
    (two systems on one machine never clash), and no warm start unless `warm_start` (the soak's: with none cached,
    `slca up` then trains one beside serving, as `make run` does — on the base model every group had zero advantage
    and the learner never published, so a soak on a fresh machine never became steady, 2026-12-06)."""
    no_metrics_ports = json.dumps({name: 0 for name in ROLES if name != "serve"})
    return [
        f"common.data_dir={data_dir}",
        f"serve.port={port}",
        *([] if warm_start else ["ops.warm_start_minutes=0"]),
        "ops.probe_final_timeout_s=0",
        f"ops.metrics_ports={no_metrics_ports}",
    ]


def set_args(sets: list[str]) -> list[str]:
    """`--set a=b --set c=d …` of `section.field=value` settings, in order (a later one wins)."""
    return [arg for s in sets for arg in ("--set", s)]


def up_argv(before_up: list[str], duration_s: float) -> list[str]:
    """`python -m slca <before_up…> up --duration <duration_s>`: the global options and `--set`s come before `up`;
    the duration is a bound should the bench die (the bench stops it first)."""
    return [sys.executable, "-m", "slca", *before_up, "up", "--duration", str(duration_s)]


def ready(url: str) -> bool:
    """`/readyz` of the API at `url` answers 200."""
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=2.0) as resp:
            return resp.status == 200
    except OSError:
        return False


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to `slca up` (it stops its children in order), SIGKILL to its session if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def sigterm_as_interrupt():
    """While a bench holds a started `slca up`: SIGTERM raises KeyboardInterrupt in the main thread, so the bench's
    `finally` stops the system. Python's default for SIGTERM exits at once, without `finally`, which left a whole
    `slca up` (and its Redis) running after `kill <bench>`."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def role_of(cmdline: str) -> str:
    """The role of one of `slca up`'s processes from its command line (`python -m slca … <command>`, Celery pool
    children, redis-server)."""
    if "redis-server" in cmdline:
        return "redis"
    if "celery" in cmdline:
        return "worker"
    words = cmdline.split()
    for module, role in HELPER_ROLES.items():
        if module in words:
            return role
    for word in reversed(words):
        if word in ROLES or word in UNPORTED_ROLES or word == "up":
            return "supervisor (slca up)" if word == "up" else word
    return "other: " + (Path(words[0]).name if words else "?")


def copy_logs(src: Path, dst: Path) -> None:
    """The end of each process log of `slca up` (`<data_dir>/logs/*.log`) into `dst`, as `slca-<name>.log`."""
    if src.is_dir():
        for f in src.glob("*.log"):
            (dst / f"slca-{f.name}").write_bytes(f.read_bytes()[-LOG_TAIL_BYTES:])
