"""A child's output → its log file, rotated by size.

A child writes to a pipe; one thread per child run (`LogPump`) reads the pipe and appends each chunk to a
`RotatingLog`. The thread does nothing else, so a busy supervisor loop never holds a child up, and it keeps
draining the pipe even when the disk write fails (the chunk is dropped and counted, the child is never blocked).
It reads until every holder of the pipe's write end has exited (a Celery worker's pool children included), so
nothing a child prints on its way out is lost.

`RotatingLog` renames `name.log` → `name.log.1` → … → `name.log.<backups>` once the next chunk would take the
file past `max_bytes` (the oldest is dropped), like `logging.handlers.RotatingFileHandler`, on raw bytes: the
file and its directory are owner-only (a child's log may hold whatever it prints).
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

CHUNK = 64 * 1024


class RotatingLog:
    def __init__(self, path: Path, max_bytes: int = 0, backups: int = 3):
        """`max_bytes` 0: never rotated. `backups`: rotated files kept (`path.1` newest … `path.<backups>`)."""
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.backups = backups
        self.lock = threading.Lock()
        self.fd: int | None = None
        self.size = 0
        self.dropped = 0
        """Bytes that could not be written (disk full, file system gone)."""

    def _open(self) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path.parent.chmod(0o700)  # mkdir keeps an existing directory's mode
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.fchmod(self.fd, 0o600)  # a log file from an earlier run may have been created world-readable
        self.size = os.fstat(self.fd).st_size

    def _rotate(self) -> None:
        os.close(self.fd)
        self.fd = None
        if self.backups > 0:
            for i in range(self.backups - 1, 0, -1):
                older = self.path.with_name(f"{self.path.name}.{i}")
                if older.exists():
                    os.replace(older, self.path.with_name(f"{self.path.name}.{i + 1}"))
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink(missing_ok=True)
        self._open()

    def write(self, data: bytes) -> None:
        if not data:
            return
        with self.lock:
            try:
                if self.fd is None:
                    self._open()
                if self.max_bytes and self.size and self.size + len(data) > self.max_bytes:
                    self._rotate()
                view = memoryview(data)
                while view:
                    n = os.write(self.fd, view)
                    view = view[n:]
                    self.size += n
            except OSError as exc:
                if not self.dropped:
                    print(f"slca up: cannot write {self.path}: {exc}; dropping output", file=sys.stderr, flush=True)
                self.dropped += len(data)
                if self.fd is not None:
                    try:
                        os.close(self.fd)
                    except OSError:
                        pass
                    self.fd = None  # reopened (and re-measured) with the next chunk

    def close(self) -> None:
        with self.lock:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None


class LogPump:
    """Reads `read_fd` (a pipe) until EOF into `log` on a daemon thread; `read_fd` is closed at EOF."""

    def __init__(self, read_fd: int, log: RotatingLog, name: str):
        self.read_fd = read_fd
        self.log = log
        self.thread = threading.Thread(target=self._run, name=f"log-{name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while True:
                try:
                    chunk = os.read(self.read_fd, CHUNK)
                except InterruptedError:
                    continue
                if not chunk:
                    return
                self.log.write(chunk)
        finally:
            os.close(self.read_fd)

    def join(self, timeout: float) -> bool:
        """True when the pipe reached EOF (every writer gone) within `timeout`."""
        self.thread.join(timeout)
        return not self.thread.is_alive()
