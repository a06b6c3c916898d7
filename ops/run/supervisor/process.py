"""One supervised child process: its own process group, its own log file, restart with back-off."""

from __future__ import annotations

import enum
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ops.run.supervisor.logpump import LogPump, RotatingLog
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
    HELD = "held"
    """Not started yet: waiting for the processes of its `ProcessSpec.after` to finish (the feed and the learner
    for the warm start beside serving)."""
    FAILED = "failed"
    """A one-shot process (`ProcessSpec.restart` False) that exited with a non-zero status: final, not restarted."""


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
    """Readiness probe (serve: /readyz); a process that stays unready is restarted (ops/run/supervisor/readiness.py)."""
    stop_group: bool = True
    """At stop, SIGTERM the whole process group. False: the leader only, which stops its own children — a Celery
    worker's warm shutdown lets its pool children finish their task; SIGTERM would kill them mid-task."""
    log_max_bytes: int = 50 * 2**20
    """The log rotates once it would grow past this (0: never); `ops.log_max_bytes`."""
    log_backups: int = 3
    """Rotated logs kept (`<name>.log.1` … `.<n>`); `ops.log_backups`."""
    after: tuple[str, ...] = ()
    """Held (not started) until every process named here has finished — exited, or failed for good (a one-shot
    process); then started with the spec the supervisor's `prepare` makes of this one."""
    restart: bool = True
    """False: a one-shot process (the warm start): an exit with any status is final, never restarted."""
    nice: int = 0
    """Started this much nicer than the supervisor (`nice -n`): training yields the cores to serving when both
    want them (`ops.training_nice`)."""
    stop_first_s: float = 0.0
    """At a stop, > 0: this process is signalled before the others, which keep running until it has exited or this
    many seconds have passed (the feed's final probe round needs the API; the learner stops with it so that no new
    version lands during that round)."""


@dataclass(frozen=True)
class Backoff:
    """Exponential restart delay: initial, doubling, capped; reset after a healthy run of `reset_after_s`."""

    initial_s: float = 1.0
    max_s: float = 60.0
    reset_after_s: float = 60.0

    def delay(self, consecutive_crashes: int) -> float:
        return min(self.max_s, self.initial_s * 2 ** max(0, consecutive_crashes - 1))


def live_group_members(pgid: int) -> list[int]:
    """Pids of the processes (zombies excepted) still in process group `pgid` (Linux /proc; elsewhere: the
    group itself when signal 0 reaches it)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:  # state, ppid, pgrp
            members.append(int(entry.name))
    return members


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
    children) with stdout and stderr piped into one size-rotated log file (ops/run/supervisor/logpump.py)."""

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
        self.killed = False
        """The last stop (or unready kill) had to SIGKILL something: the leader past its grace, or group members
        still alive after the leader exited."""
        self.stop_seconds: float | None = None
        """How long the last stop took, from SIGTERM to the exit of the whole group."""
        self.log = RotatingLog(spec.log_path, spec.log_max_bytes, spec.log_backups)
        self.pump: LogPump | None = None
        self._stop_started: float | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def uptime(self) -> float:
        return self.clock() - self.started_at if self.state == ProcessState.RUNNING and self.started_at else 0.0

    def start(self) -> None:
        self.log.write(f"\n=== slca up: starting {self.spec.name}: {' '.join(redact_argv(self.spec.argv))}\n".encode())
        read_fd, write_fd = os.pipe()
        try:
            self.proc = subprocess.Popen(
                self.argv(),
                env={**os.environ, **self.spec.env},
                stdout=write_fd,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)  # the child holds it now: EOF on read_fd once the child's whole group has exited
        self.pump = LogPump(read_fd, self.log, self.spec.name)
        self.killed, self.stop_seconds = False, None
        self.state = ProcessState.RUNNING
        self.started_at = self.clock()
        self.restart_at = None

    def argv(self) -> list[str]:
        """The command as started: under `nice`, which execs it (the pid is the command's), when `spec.nice` asks."""
        if self.spec.nice and (nice := shutil.which("nice")):
            return [nice, "-n", str(self.spec.nice), *self.spec.argv]
        return list(self.spec.argv)

    def poll(self) -> bool:
        """Notice a crash and schedule the restart; returns True when the process just exited."""
        if self.state != ProcessState.RUNNING or self.proc is None or self.proc.poll() is None:
            return False
        self.last_exit = self.proc.returncode
        if self.last_exit == 0:
            self.state = ProcessState.EXITED
            return True
        if not self.spec.restart:
            self.state = ProcessState.FAILED
            return True
        if self.uptime_at_exit() >= self.backoff.reset_after_s:
            self.consecutive_crashes = 0
        self.consecutive_crashes += 1
        self.state = ProcessState.BACKOFF
        self.restart_at = self.clock() + self.backoff.delay(self.consecutive_crashes)
        return True

    @property
    def finished(self) -> bool:
        """Exited for good: with status 0, or a one-shot process that failed."""
        return self.state in (ProcessState.EXITED, ProcessState.FAILED)

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
        self._terminate()
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

    def _terminate(self) -> None:
        """SIGTERM the group, or only its leader (`spec.stop_group` False)."""
        self._stop_started = time.monotonic()
        if not self.spec.stop_group:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            return
        self.signal_group(signal.SIGTERM)

    def begin_stop(self) -> None:
        if self.state == ProcessState.RUNNING:
            self.state = ProcessState.STOPPING
            self._terminate()
        else:
            self.state = ProcessState.STOPPED

    def finish_stop(self, deadline: float) -> None:
        """Wait until `deadline` (monotonic) for the child, then SIGKILL its group."""
        if self.proc is not None and self.state == ProcessState.STOPPING:
            self._reap(deadline)
        self.state = ProcessState.STOPPED

    def exited(self) -> bool:
        """True once a stopping leader has exited; records the stop's duration when first seen."""
        if self.proc is None or self.proc.poll() is None:
            return False
        if self.stop_seconds is None and self._stop_started is not None:
            self.stop_seconds = time.monotonic() - self._stop_started
        return True

    def _reap(self, deadline: float) -> None:
        """Wait until `deadline` (monotonic) for a signalled child, then SIGKILL its group; record the exit. Group
        members left after the leader's exit (a worker's pool child) get until the deadline too (at least 1 s),
        then SIGKILL."""
        try:
            self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.signal_group(signal.SIGKILL)
            self.killed = True
            self.proc.wait()
        pgid = self.proc.pid
        linger_until = max(deadline, time.monotonic() + 1.0)
        while live_group_members(pgid) and time.monotonic() < linger_until:
            time.sleep(0.05)
        if live_group_members(pgid):
            try:
                os.killpg(pgid, signal.SIGKILL)
                self.killed = True
            except (ProcessLookupError, PermissionError):
                pass
        self.last_exit = self.proc.returncode
        self.exited()
        if self.pump is not None:
            self.pump.join(2.0)  # every writer is gone: the pipe drains to EOF
