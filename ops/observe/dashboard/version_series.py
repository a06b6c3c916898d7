"""The dashboard's version charts (`charts.gate`, `charts.scored_success`), in the layout of `series.Series`.

- `gate`: one point per gate decision at its time: the promoted version's and the candidate's success on the gate
  set (the same items, paired), with the decision (outcome, difference and its 95% interval) in the legend.
- `scored_success`: the success of scored trajectories over time, split by whether the version that sampled each
  one was the promoted version then (callers' traffic, the guard's window) or not (the candidate: the feed's
  traffic, the canary). Which version was promoted when comes from the gate's decisions, the guard's rollbacks and
  the promotion record's last change; before the first of them, the version the first one names as promoted.
"""

from __future__ import annotations

import bisect
from typing import Any

from ops.observe.dashboard.series_layout import MOVING_WINDOW, Series, moving_mean
from ops.observe.version_view import VersionView

GATE_EXTRA = ("candidate", "promoted", "outcome", "diff", "ci_low", "ci_high", "n")
"""Legend-only columns of the gate chart: the decision at that time."""


def gate_series(decisions: list[dict[str, Any]]) -> Series:
    rows = sorted((d for d in decisions if d.get("at") is not None), key=lambda d: d["at"])
    return Series(
        [float(d["at"]) for d in rows],
        {
            "promoted success": [d.get("promoted_success") for d in rows],
            "candidate success": [d.get("candidate_success") for d in rows],
        },
        {k: [d.get(k) for d in rows] for k in GATE_EXTRA},
    )


def promotion_changes(view: VersionView) -> list[tuple[float, int, int]]:
    """(time, promoted before, promoted after) of every change the view knows, in time order."""
    changes = [(d["at"], d["promoted"], d["candidate"]) for d in view.decisions if d.get("outcome") == "promote"]
    changes += [(r["at"], r["version"], r["previous"]) for r in view.rollbacks if r.get("outcome") == "rollback"]
    record = view.record or {}
    if record.get("history") and record.get("at"):
        changes.append((record["at"], record["history"][-1], record["promoted"]))
    # every decision also says which version was promoted when it was taken (before its own change, at equal times)
    anchors = [(d["at"], d["promoted"], d["promoted"]) for d in view.decisions if d.get("at") is not None]
    marked = [(c, 0) for c in anchors] + [(c, 1) for c in changes]
    return [c for c, _ in sorted(marked, key=lambda m: (m[0][0], m[1]))]


def scored_success(rewards: list[dict[str, Any]], view: VersionView) -> Series:
    changes = promotion_changes(view)
    if not changes and view.promoted is None:
        return Series()  # no roles yet: every trajectory is the one served version's
    times = [c[0] for c in changes]

    def promoted_at(ts: float) -> int | None:
        i = bisect.bisect_right(times, ts) - 1
        return changes[i][2] if i >= 0 else (changes[0][1] if changes else view.promoted)

    rows = sorted((r for r in rewards if r.get("success") is not None and r.get("ts") is not None),
                  key=lambda r: r["ts"])  # fmt: skip
    roles = ["promoted" if r["policy_version"] == promoted_at(r["ts"]) else "candidate" for r in rows]
    ys: dict[str, list[float | None]] = {}
    for role in ("promoted", "candidate"):
        means = iter(moving_mean([r["success"] for r, rr in zip(rows, roles) if rr == role]))
        ys[f"{role} (mean of {MOVING_WINDOW})"] = [next(means) if rr == role else None for rr in roles]
    return Series([r["ts"] for r in rows], ys, {"version": [r["policy_version"] for r in rows]})
