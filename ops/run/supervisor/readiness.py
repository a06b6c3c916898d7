"""Readiness supervision: a process that is alive but not ready for too long is restarted.

A crash is easy to see (the process exits); a server whose engine died while its HTTP loop lives on is not:
`/healthz` answers, `/readyz` says 503 forever. So a process with a readiness URL is probed every
`interval_s`; it gets `start_grace_s` to become ready after each start (model load, engine build), and once
it has been ready, `unready_grace_s` of consecutive failed probes before it is restarted.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from dataclasses import dataclass


@dataclass(frozen=True)
class ReadinessPolicy:
    interval_s: float = 5.0
    start_grace_s: float = 300.0
    unready_grace_s: float = 60.0


def probe(url: str, timeout_s: float = 2.0) -> bool:
    """True when `url` answers 2xx within the timeout."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return 200 <= resp.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


class ReadinessWatch:
    """Per-process probe state; `check()` says whether the process must be restarted."""

    def __init__(self, url: str, policy: ReadinessPolicy, clock=time.monotonic, probe_fn=probe):
        self.url = url
        self.policy = policy
        self.clock = clock
        self.probe_fn = probe_fn
        self.reset()

    def reset(self) -> None:
        """Call at every (re)start of the process."""
        self.started_at = self.clock()
        self.next_probe = self.started_at
        self.ever_ready = False
        self.ready = False
        self.unready_since: float | None = None

    def check(self) -> str | None:
        """Probe when due; the reason to restart, or None."""
        now = self.clock()
        if now < self.next_probe:
            return None
        self.next_probe = now + self.policy.interval_s
        self.ready = self.probe_fn(self.url)
        if self.ready:
            self.ever_ready, self.unready_since = True, None
            return None
        if not self.ever_ready:
            waited = now - self.started_at
            return f"not ready {waited:.0f}s after start" if waited > self.policy.start_grace_s else None
        self.unready_since = self.unready_since if self.unready_since is not None else now
        unready = now - self.unready_since
        return f"not ready for {unready:.0f}s" if unready > self.policy.unready_grace_s else None
