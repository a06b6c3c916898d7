"""The supervision loop: start every process (those held for others once those have finished), restart crashed ones
after their back-off, stop in reverse order."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from ops.run.supervisor.process import Backoff, ManagedProcess, ProcessSpec, ProcessState
from ops.run.supervisor.readiness import ReadinessPolicy, ReadinessWatch

log = logging.getLogger("slca.up")


class Supervisor:
    def __init__(
        self,
        specs: Sequence[ProcessSpec],
        backoff: Backoff,
        grace_s: float = 20.0,
        poll_interval_s: float = 0.2,
        readiness: ReadinessPolicy | None = None,
        prepare: Callable[[ProcessSpec], ProcessSpec] | None = None,
    ):
        self.processes = [ManagedProcess(spec, backoff) for spec in specs]
        self.prepare = prepare
        """Makes the spec a held process starts with, once what it waited for has finished (the warm start's
        model and version: ops/run/supervisor/warm_stage.py); None: its own."""
        policy = readiness or ReadinessPolicy()
        self.watches = {
            p.spec.name: ReadinessWatch(p.spec.ready_url, policy) for p in self.processes if p.spec.ready_url
        }
        self.grace_s = grace_s
        self.poll_interval_s = poll_interval_s
        self.stop_event = threading.Event()

    def get(self, name: str) -> ManagedProcess:
        return next(p for p in self.processes if p.spec.name == name)

    def start_all(self) -> None:
        for proc in self.processes:
            if proc.spec.after:
                proc.state = ProcessState.HELD
                log.info("%s is held until %s has finished", proc.spec.name, " and ".join(proc.spec.after))
                continue
            self._start(proc)

    def _start(self, proc: ManagedProcess) -> None:
        proc.start()
        self._reset_watch(proc)
        log.info("started %s (pid %s), log %s", proc.spec.name, proc.pid, proc.spec.log_path)

    def _release_held(self) -> None:
        """Start each held process whose `after` processes have all finished (a name not in the plan is no wait)."""
        names = {p.spec.name: p for p in self.processes}
        for proc in self.processes:
            if proc.state != ProcessState.HELD:
                continue
            if any(name in names and not names[name].finished for name in proc.spec.after):
                continue
            if self.prepare is not None:
                proc.spec = self.prepare(proc.spec)
            self._start(proc)

    def tick(self) -> None:
        """One supervision step: notice exits, restart those whose delay has passed."""
        for proc in self.processes:
            if proc.poll():
                if proc.state == ProcessState.EXITED:
                    log.info("%s finished (exit 0); not restarted", proc.spec.name)
                elif proc.state == ProcessState.FAILED:
                    log.warning(
                        "%s failed (exit %s); a one-shot process, not restarted (see %s)",
                        proc.spec.name,
                        proc.last_exit,
                        proc.spec.log_path,
                    )
                else:
                    log.warning(
                        "%s exited with status %s; restarting in %.1fs (see %s)",
                        proc.spec.name,
                        proc.last_exit,
                        proc.restart_at - proc.clock(),
                        proc.spec.log_path,
                    )
            self._check_ready(proc)
            if proc.due():
                proc.restart()
                self._reset_watch(proc)
                log.info("restarted %s (pid %s, restart #%d)", proc.spec.name, proc.pid, proc.restarts)
        self._release_held()

    def _reset_watch(self, proc: ManagedProcess) -> None:
        if proc.spec.name in self.watches:
            self.watches[proc.spec.name].reset()

    def _check_ready(self, proc: ManagedProcess) -> None:
        watch = self.watches.get(proc.spec.name)
        if watch is None or proc.state != ProcessState.RUNNING:
            return
        reason = watch.check()
        if reason:
            log.warning("%s is alive but %s (%s); restarting it", proc.spec.name, reason, watch.url)
            proc.kill_unready(self.grace_s)

    def is_ready(self, name: str) -> bool | None:
        """Last readiness probe of a process with a readiness URL (None: not probed)."""
        watch = self.watches.get(name)
        return watch.ready if watch else None

    def run(self, on_tick: Callable[["Supervisor"], None] | None = None, tick_every_s: float = 1.0) -> None:
        """Supervise until `stop_event` is set (by a signal handler), then stop everything."""
        self.start_all()
        last_report = 0.0
        try:
            while not self.stop_event.wait(self.poll_interval_s):
                self.tick()
                if on_tick and time.monotonic() - last_report >= tick_every_s:
                    last_report = time.monotonic()
                    on_tick(self)
        finally:
            self.stop_all()

    def stop_all(self) -> None:
        """SIGTERM every group at once (feed first, API last, so that producers stop before consumers), wait up to
        `grace_s` for all of them together, SIGKILL what is left. Each process's exit is logged and recorded.
        Processes with a `stop_first_s` are stopped before the rest, which keep running meanwhile (at most that
        long: the feed's final probe round against the still-running API)."""
        ordered = list(reversed(self.processes))
        first = [p for p in ordered if p.spec.stop_first_s > 0 and p.state == ProcessState.RUNNING]
        if first:
            wait_s = max(p.spec.stop_first_s for p in first)
            names = ", ".join(p.spec.name for p in first)
            log.info("stopping %s first (up to %.0f s: the probe's final round), then the rest", names, wait_s)
            self._stop_group_of(first, wait_s)
        self._stop_group_of([p for p in ordered if p not in first], self.grace_s)

    def _stop_group_of(self, procs: list[ManagedProcess], wait_s: float) -> None:
        """SIGTERM `procs` at once, wait up to `wait_s` for all of them, SIGKILL what is left; log each exit."""
        for proc in procs:
            proc.begin_stop()
        deadline = time.monotonic() + wait_s
        waiting = [p for p in procs if p.state == ProcessState.STOPPING]
        while waiting and time.monotonic() < deadline:  # all at once: each exit is timed when it happens
            waiting = [p for p in waiting if not p.exited()]
            time.sleep(0.02)
        for proc in procs:
            was_stopping = proc.state == ProcessState.STOPPING
            proc.finish_stop(deadline)
            if was_stopping:
                level = logging.WARNING if proc.killed or proc.last_exit else logging.INFO
                log.log(
                    level,
                    "stopped %s (exit %s, %.1fs%s)",
                    proc.spec.name,
                    proc.last_exit,
                    proc.stop_seconds or 0.0,
                    ", SIGKILLed" if proc.killed else "",
                )
            proc.log.close()

    def clean_stop(self) -> bool:
        """Every process stopped with status 0 (or finished with 0 before), nothing SIGKILLed."""
        return all(not p.killed and p.last_exit in (0, None) for p in self.processes)
