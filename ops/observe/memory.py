"""The whole system's memory while `slca up` runs: each supervised process with everything below it (a Celery
worker's pool children, vLLM's engine core) and the owned Redis, read from /proc on every tick of the supervisor
(once a second). Kept: the current resident set of each, each one's peak, and the peak of their *sum* at one
instant — what the machine must hold — with each process's share at that instant. It goes into the state file,
so that `slca status` and `slca bench online` can print it; 6 GiB is the target for the whole system on the
embedded model (docs/cpu-facts.md)."""

from __future__ import annotations

from ops.observe.procs import proc_table, tree_rss

GIB = 1024**3
TARGET_GIB = 6.0
"""The whole system (serve + workers + assembler + learner + feed + Redis) on the embedded model."""


class SystemMemory:
    def __init__(self) -> None:
        self.now: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.peak_total = 0
        self.at_peak: dict[str, int] = {}

    def sample(self, roots: dict[str, int]) -> None:
        """`roots`: name → pid of each process to count (with its descendants)."""
        table = proc_table()
        self.now = {name: tree_rss(pid, table) for name, pid in roots.items()}
        for name, rss in self.now.items():
            self.peak[name] = max(rss, self.peak.get(name, 0))
        total = sum(self.now.values())
        if total > self.peak_total:
            self.peak_total, self.at_peak = total, dict(self.now)

    def to_dict(self) -> dict:
        return {
            "rss_bytes": self.now,
            "peak_rss_bytes": self.peak,
            "peak_total_bytes": self.peak_total,
            "at_peak_bytes": self.at_peak,
            "target_gib": TARGET_GIB,
        }


def memory_lines(memory: dict | None, running: bool = True) -> str:
    """`slca status`'s memory lines from the state file's `memory` (a `SystemMemory.to_dict()`). `running`: False
    once the system has stopped (`slca bench online` after the run), when the last sample is of processes on their
    way out ("0.01 GiB now" said nothing): then the peaks only."""
    if not memory or not memory.get("peak_total_bytes"):
        return "memory: not sampled yet"
    now, own_peak = memory["rss_bytes"], memory.get("peak_rss_bytes", {})
    at_peak = memory["at_peak_bytes"]
    total, peak = sum(now.values()) / GIB, memory["peak_total_bytes"] / GIB
    target = memory.get("target_gib", TARGET_GIB)
    verdict = "within" if peak <= target else "OVER"
    if not running:
        return "\n".join(
            [
                f"memory: the system has stopped; its peak was {peak:.2f} GiB ({verdict} the {target:g} GiB target); "
                "each process with its children (its own peak; its share of the system's peak):",
                "  "
                + "  ".join(
                    f"{name} ({own_peak.get(name, 0) / GIB:.2f}; {at_peak.get(name, 0) / GIB:.2f})"
                    for name in dict.fromkeys([*own_peak, *at_peak])
                ),
            ]
        )
    return "\n".join(
        [
            f"memory: {total:.2f} GiB now, peak {peak:.2f} GiB for the whole system ({verdict} the {target:g} GiB "
            "target); each process with its children, now (its own peak; its share of the system's peak):",
            # Its own peak, not its share at the system's peak, is what "peak" means beside "now": the share
            # alone once read "serve 3.16 (peak 2.91)", a process above its peak.
            "  "
            + "  ".join(
                f"{name} {rss / GIB:.2f} ({max(rss, own_peak.get(name, rss)) / GIB:.2f}; "
                f"{at_peak.get(name, 0) / GIB:.2f})"
                for name, rss in now.items()
            ),
        ]
    )
