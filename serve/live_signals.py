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
    share: Callable[[list[Outcome], object], float | None]
    """The share over a window, given the settings (None: nothing to judge yet)."""
    limit: Callable[[object], float]


def _engine_errors(window: list[Outcome]) -> float | None:
    return sum(o.engine_error for o in window) / len(window) if window else None


def _malformed(window: list[Outcome], min_calls: int = 1) -> float | None:
    calls = sum(o.tool_calls for o in window)
    return sum(o.malformed for o in window) / calls if calls >= max(1, min_calls) else None


BOUNDS: tuple[Bound, ...] = (
    Bound("engine errors", lambda w, s: _engine_errors(w), lambda s: s.rollback_max_engine_errors),
    Bound(
        "malformed tool calls",
        lambda w, s: _malformed(w, getattr(s, "rollback_min_tool_calls", 1)),
        lambda s: s.rollback_max_malformed,
    ),
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
        return {bound.name: bound.share(window, self.settings) for bound in BOUNDS}

    def verdict(self, version: int, before: int | None = None) -> str | None:
        """Why `version` must be rolled back, or None (also None before `rollback_min_requests` requests).

        `before`: the version a rollback would serve again. Where its callers' window is full too, a signal past its
        bound rolls back only if `before` did better on it: a weak model's sampled calls can be malformed more often
        than the bound allows with every version alike (a 5-step warm start served 100% malformed calls in the soak
        of 2026-12-06), and rolling back to a version no better only trades one for the other."""
        window = list(self.windows.get(version, ()))
        if len(window) < self.settings.rollback_min_requests:
            return None
        earlier = list(self.windows.get(before, ())) if before is not None else []
        compared = len(earlier) >= self.settings.rollback_min_requests
        for bound in BOUNDS:
            share, limit = bound.share(window, self.settings), bound.limit(self.settings)
            if share is None or limit >= 1.0 or share <= limit:
                continue
            was = bound.share(earlier, self.settings) if compared else None
            if was is not None and was >= share:
                continue
            than = f" (v{before}: {was:.2f})" if was is not None else ""
            return f"{bound.name}: {share:.2f} of the last {len(window)} requests' > {limit:.2f}{than}"
        return None
