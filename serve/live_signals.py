"""The live-signal guard of the promoted version (docs/design.md#versions): its callers' latest requests, and
whether they degraded past the bounds set in `[serve]` (`rollback_*`): too many malformed tool calls or engine
errors. A verdict rolls the version back (serve/promotion.py), and a version rolled back is never promoted again
automatically."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Outcome:
    """One finished request of callers: did the engine fail it, how many tool calls, how many malformed."""

    engine_error: bool
    tool_calls: int
    malformed: int


@dataclass(frozen=True)
class Bound:
    """One signal and its bound: the share over the window past which the version is rolled back."""

    name: str
    share: Callable[[list[Outcome]], float | None]
    limit: Callable[[object], float]


def _engine_errors(window: list[Outcome]) -> float | None:
    return sum(o.engine_error for o in window) / len(window) if window else None


def _malformed(window: list[Outcome]) -> float | None:
    calls = sum(o.tool_calls for o in window)
    return sum(o.malformed for o in window) / calls if calls else None


BOUNDS: tuple[Bound, ...] = (
    Bound("engine errors", _engine_errors, lambda s: s.rollback_max_engine_errors),
    Bound("malformed tool calls", _malformed, lambda s: s.rollback_max_malformed),
)
"""Every signal the guard watches (add one here: a name, its share over the window, its bound in settings)."""


class LiveSignals:
    """Per version, the outcomes of its callers' latest `rollback_window` requests."""

    def __init__(self, settings) -> None:
        self.settings = settings
        self.windows: dict[int, deque[Outcome]] = {}

    def observe(self, version: int, outcome: Outcome) -> None:
        window = self.windows.setdefault(version, deque(maxlen=self.settings.rollback_window))
        window.append(outcome)
        for old in [v for v in self.windows if v != version][:-4]:  # a few versions' windows, not every one
            del self.windows[old]

    def shares(self, version: int) -> dict[str, float | None]:
        window = list(self.windows.get(version, ()))
        return {bound.name: bound.share(window) for bound in BOUNDS}

    def verdict(self, version: int) -> str | None:
        """Why `version` must be rolled back, or None (also None before `rollback_min_requests` requests)."""
        window = list(self.windows.get(version, ()))
        if len(window) < self.settings.rollback_min_requests:
            return None
        for bound in BOUNDS:
            share, limit = bound.share(window), bound.limit(self.settings)
            if share is not None and limit < 1.0 and share > limit:
                return f"{bound.name}: {share:.2f} of the last {len(window)} requests' > {limit:.2f}"
        return None
