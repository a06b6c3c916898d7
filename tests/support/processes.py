"""What tests start as real processes against an owned Redis: the repository root they run from, and Celery
workers (`ServerProcess`: tests.support.serve; `LearnerProcess`: tests.support.learner)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class CeleryWorkers:
    """Starts real `celery worker` processes against an owned Redis; kills them at teardown."""

    def __init__(self, redis_url: str, log_dir: Path):
        self.redis_url = redis_url
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen] = []

    def start(
        self,
        app: str,
        queues: str | None = None,
        concurrency: int = 1,
        env: dict | None = None,
        timeout: float = 60.0,
        name: str | None = None,
    ) -> subprocess.Popen:
        name = name or f"w{len(self.procs)}"
        cmd = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            app,
            "worker",
            "--pool",
            "prefork",
            "-c",
            str(concurrency),
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "INFO",
            "-n",
            f"{name}@%h",
        ]
        if queues:
            cmd += ["-Q", queues]
        full_env = {**os.environ, "SLCA_REDIS_URL": self.redis_url, "PYTHONPATH": str(REPO), **(env or {})}
        log = open(self.log_dir / f"celery-{name}.log", "wb")
        proc = subprocess.Popen(cmd, env=full_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        self._wait_ready(proc, name, timeout)
        return proc

    def _wait_ready(self, proc, name: str, timeout: float) -> None:
        from celery import Celery

        probe = Celery(broker=self.redis_url, backend=self.redis_url)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise RuntimeError(f"celery worker {name} exited: see {self.log_dir}/celery-{name}.log")
                replies = probe.control.ping(timeout=0.5) or []
                if any(name in key for reply in replies for key in reply):
                    return
            raise TimeoutError(f"celery worker {name} not ready after {timeout}s")
        finally:
            probe.close()

    @staticmethod
    def kill(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
        """Kill the worker's whole process group (main process and its prefork children)."""
        if proc.poll() is None:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=30)

    def stop_all(self) -> None:
        for proc in self.procs:
            try:
                self.kill(proc, signal.SIGKILL)
            except ProcessLookupError:
                pass


def run_as_group(argv: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """`subprocess.run(argv, capture_output=True, text=True)` in a session of its own, and on timeout the whole
    process group killed, not only the direct child: a launcher's children (torchrun's ranks) would otherwise
    outlive the test and load the machine for the rest of the suite. Raises `subprocess.TimeoutExpired`."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **kwargs
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything the launcher left behind
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def catches_sigterm(pid: int) -> bool:
    """The process has installed a SIGTERM handler of its own (its stop path): bit 15 of /proc's SigCgt mask."""
    try:
        with open(f"/proc/{pid}/status") as f:
            caught = next((line.split()[1] for line in f if line.startswith("SigCgt:")), "0")
    except (FileNotFoundError, ProcessLookupError):
        return False
    return bool(int(caught, 16) >> (signal.SIGTERM - 1) & 1)
