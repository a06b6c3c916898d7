"""An owned `redis-server` process: a free port, its own data dir, killable and restartable.

Used by the test harness (every test owns its Redis, never the machine's shared one on 6379) and by
`slca up` when no Redis is configured.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self, data_dir: Path, port: int | None = None, appendonly: bool = True, appendfsync: str = "everysec"):
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server not found on PATH (Debian package redis-server)")
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> "RedisServer":
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.data_dir),
            "--appendonly", "yes" if self.appendonly else "no", "--appendfsync", self.appendfsync,
            "--save", "", "--daemonize", "no", "--logfile", str(self.data_dir / "redis.log"),
        ]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if client.ping():
                    # AOF loading answers LOADING errors, not ping failures; wait until it is done
                    if client.info("persistence").get("loading", 0) == 0:
                        break
            except redis.exceptions.RedisError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on port {self.port} did not start; see {self.data_dir}/redis.log")
            time.sleep(0.02)
        client.close()
        return self

    def kill(self) -> None:
        """SIGKILL: no shutdown save, as in a crash."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self) -> "RedisServer":
        self.kill()
        return self.start()

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
