"""One progress line for the whole comparison: runs done / total, the current run's step, elapsed time and an
ETA from the measured durations of finished runs (the plan's estimate until one has finished)."""

from __future__ import annotations

import sys
import threading
import time
from statistics import fmean
from typing import TextIO


def fmt_minutes(seconds: float) -> str:
    seconds = max(0.0, seconds)
    return (
        f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"
        if seconds >= 3600
        else f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    )


class Progress:
    def __init__(self, total_runs: int, estimate_run_s: float | None, stream: TextIO | None = None):
        self.total = total_runs
        self.estimate_run_s = estimate_run_s
        self.durations: list[float] = []
        """Seconds of every finished run, this invocation's and earlier ones' (their done.json)."""
        self.skipped = 0
        self.started = time.monotonic()
        self.current: str | None = None
        self.current_started = self.started
        self.phase = ""
        self.stream = stream or sys.stderr
        self._lock = threading.Lock()  # cheap insurance: a caller may report from a watcher thread

    def finished(self, seconds: float, skipped: bool = False) -> None:
        with self._lock:
            self.durations.append(seconds)
            self.skipped += skipped
            self.current = None
        self.show()

    def start(self, name: str) -> None:
        with self._lock:
            self.current, self.current_started, self.phase = name, time.monotonic(), "starting"
        self.show()

    def set_phase(self, phase: str) -> None:
        with self._lock:
            self.phase = phase
        self.show()

    def eta_s(self) -> float | None:
        per_run = fmean(self.durations) if self.durations else self.estimate_run_s
        if per_run is None:
            return None
        left = self.total - len(self.durations)
        in_current = time.monotonic() - self.current_started if self.current else 0.0
        return max(0.0, left * per_run - min(in_current, per_run))

    def line(self) -> str:
        with self._lock:
            done = len(self.durations)
            parts = [
                f"bench learning: runs {done}/{self.total} done"
                + (f" ({self.skipped} from before)" if self.skipped else "")
            ]
            if self.current:
                parts.append(f"now {self.current}: {self.phase}")
            parts.append(f"elapsed {fmt_minutes(time.monotonic() - self.started)}")
            eta = self.eta_s()
            basis = f"from {len(self.durations)} measured runs" if self.durations else "from the plan"
            parts.append(f"ETA {fmt_minutes(eta)} ({basis})" if eta is not None else "ETA unknown")
        return " · ".join(parts)

    def show(self) -> None:
        print(self.line(), file=self.stream, flush=True)
