"""One supervised child process: its own process group, its own log file, restart with back-off."""

from __future__ import annotations

import enum
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from slca.config import is_secret_override
from slca.redaction import REDACTED, redact_url


class ProcessState(str, enum.Enum):
    RUNNING = "running"
    BACKOFF = "backoff"
    """Crashed; waiting for its restart delay."""
    EXITED = "exited"
    """Finished on its own with status 0 (a feed with a request budget): done, not restarted."""
    STOPPING = "stopping"
    STOPPED = "stopped"


@dataclass(frozen=True)
class ProcessSpec:
    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    """Added to the supervisor's environment."""
    url: str | None = None
    """Where the process can be reached (API or metrics), for the status table."""
    ready_url: str | None = None
    """Readiness probe (serve: /readyz); a process that stays unready is restarted (ops/supervisor/readiness.py)."""


@dataclass(frozen=True)
class Backoff:
    """Exponential restart delay: initial, doubling, capped; reset after a healthy run of `reset_after_s`."""

    initial_s: float = 1.0
    max_s: float = 60.0
    reset_after_s: float = 60.0

    def delay(self, consecutive_crashes: int) -> float:
        return min(self.max_s, self.initial_s * 2 ** max(0, consecutive_crashes - 1))


def open_private_log(path: Path):
    """`path` opened for appending, owner-only (0600) in an owner-only directory (0700): a child's log may
    hold whatever it prints, and other local users have no business reading it."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.parent.chmod(0o700)  # mkdir keeps an existing directory's mode
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)  # a log file from an earlier run may have been created world-readable
    return os.fdopen(fd, "ab")


def redact_argv(argv: list[str]) -> list[str]:
    """`argv` with secret `--set` values and URL passwords as `***` (what a log line may show)."""
    out = []
    for i, arg in enumerate(argv):
        arg = redact_url(arg)  # a URL keeps its host, loses its password
        if i > 0 and argv[i - 1] == "--set" and is_secret_override(arg):
            arg = arg.partition("=")[0] + "=" + REDACTED
        out.append(arg)
    return out


class ManagedProcess:
    """A child in its own session (so a terminal Ctrl-C reaches only the supervisor, which then stops the
    children in order) with stdout and stderr appended to one log file."""

    def __init__(self, spec: ProcessSpec, backoff: Backoff, clock=time.monotonic):
        self.spec = spec
        self.backoff = backoff
        self.clock = clock
        self.proc: subprocess.Popen | None = None
        self.state = ProcessState.STOPPED
        self.restarts = 0
        self.consecutive_crashes = 0
        self.started_at: float | None = None
        self.restart_at: float | None = None
        self.last_exit: int | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def uptime(self) -> float:
        return self.clock() - self.started_at if self.state == ProcessState.RUNNING and self.started_at else 0.0

    def start(self) -> None:
        with open_private_log(self.spec.log_path) as log:
            log.write(f"\n=== slca up: starting {self.spec.name}: {' '.join(redact_argv(self.spec.argv))}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.spec.argv, env={**os.environ, **self.spec.env}, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        self.state = ProcessState.RUNNING
        self.started_at = self.clock()
        self.restart_at = None

    def poll(self) -> bool:
        """Notice a crash and schedule the restart; returns True when the process just exited."""
        if self.state != ProcessState.RUNNING or self.proc is None or self.proc.poll() is None:
            return False
        self.last_exit = self.proc.returncode
        if self.last_exit == 0:
            self.state = ProcessState.EXITED
            return True
        if self.uptime_at_exit() >= self.backoff.reset_after_s:
            self.consecutive_crashes = 0
        self.consecutive_crashes += 1
        self.state = ProcessState.BACKOFF
        self.restart_at = self.clock() + self.backoff.delay(self.consecutive_crashes)
        return True

    def uptime_at_exit(self) -> float:
        return self.clock() - self.started_at if self.started_at else 0.0

    def due(self) -> bool:
        return self.state == ProcessState.BACKOFF and self.restart_at is not None and self.clock() >= self.restart_at

    def restart(self) -> None:
        self.restarts += 1
        self.start()

    def kill_unready(self, grace_s: float) -> None:
        """Stop a live but unready child (SIGTERM, then SIGKILL after `grace_s`) and schedule its restart like a
        crash's: the back-off applies, so a process that never becomes ready is not restarted in a tight loop."""
        if self.state != ProcessState.RUNNING or self.proc is None:
            return
        self.signal_group(signal.SIGTERM)
        self._reap(time.monotonic() + grace_s)
        self.consecutive_crashes += 1
        self.state = ProcessState.BACKOFF
        self.restart_at = self.clock() + self.backoff.delay(self.consecutive_crashes)

    def signal_group(self, sig: int) -> None:
        """Signal the child's whole process group (a Celery worker's prefork children, vLLM's engine core)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def begin_stop(self) -> None:
        if self.state == ProcessState.RUNNING:
            self.state = ProcessState.STOPPING
            self.signal_group(signal.SIGTERM)
        else:
            self.state = ProcessState.STOPPED

    def finish_stop(self, deadline: float) -> None:
        """Wait until `deadline` (monotonic) for the child, then SIGKILL its group."""
        if self.proc is not None:
            self._reap(deadline)
        self.state = ProcessState.STOPPED

    def _reap(self, deadline: float) -> None:
        """Wait until `deadline` (monotonic) for a signalled child, then SIGKILL its group; record the exit."""
        try:
            self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.signal_group(signal.SIGKILL)
            self.proc.wait()
        # the leader may be gone while group members linger (a worker's pool child): sweep them
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.last_exit = self.proc.returncode
