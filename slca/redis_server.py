"""An owned `redis-server` process: a free port, its own data dir, killable and restartable.

Used by the test harness (every test owns its Redis, never the machine's shared one on 6379) and by
`slca up` when no Redis is configured (with a password and a memory bound: ops/run/supervisor/up.py).

The configuration goes to `redis-server -` on stdin, not on its command line: a password in argv would be
readable by every local user (`ps`).
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        appendonly: bool = True,
        appendfsync: str = "everysec",
        *,
        password: str | None = None,
        maxmemory: str | None = None,
        maxmemory_policy: str = "noeviction",
    ):
        """`password`: `requirepass` (None: no password). `maxmemory`: Redis's bound ("1gb"; None: unbounded),
        enforced with `maxmemory_policy` (see `OpsSettings.redis_maxmemory_policy` for why noeviction)."""
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server not found on PATH (Debian package redis-server)")
        for value in (password, maxmemory, maxmemory_policy):
            if value is not None and (not value or any(c.isspace() or c in "\"'" for c in value)):
                raise ValueError("redis-server settings must be non-empty, without spaces or quotes")
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.password = password
        self.maxmemory = maxmemory
        self.maxmemory_policy = maxmemory_policy
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """The URL clients connect with (it carries the password: never print it; `slca.redaction.redact_url`)."""
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def config_text(self) -> str:
        lines = [
            f"port {self.port}",
            "bind 127.0.0.1",
            f'dir "{self.data_dir}"',
            'save ""',
            f"appendonly {'yes' if self.appendonly else 'no'}",
            f"appendfsync {self.appendfsync}",
            "daemonize no",
            f'logfile "{self.data_dir / "redis.log"}"',
        ]
        if self.maxmemory:
            lines += [f"maxmemory {self.maxmemory}", f"maxmemory-policy {self.maxmemory_policy}"]
        if self.password:
            lines.append(f"requirepass {self.password}")
        return "\n".join(lines) + "\n"

    def alive(self) -> bool:
        """The redis-server process this object started is running."""
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 10.0) -> "RedisServer":
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        # its own session: a terminal's Ctrl-C (SIGINT to the foreground process group) must not reach it — Redis
        # would shut down at once, under its clients, while its owner (`slca up`) is still stopping them
        self.proc = subprocess.Popen(
            ["redis-server", "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.proc.stdin.write(self.config_text().encode())
        self.proc.stdin.close()
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
                self.kill()  # past the deadline it may still be running, holding the port: no half-started server
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
