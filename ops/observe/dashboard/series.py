"""The dashboard's charts as data: a `Snapshot` of Redis → columnar series the page hands to uPlot as they are.

Computed here rather than in the page so that what the charts mean (which version a reward belongs to, what
staleness is, how a moving mean is taken) is Python, tested without a browser. Every series is uPlot's layout:
one x column (seconds since the epoch on time charts, so the axes read as wall-clock times) and one column per
named line, `None` where a line has no value at that x (a gap, not a zero).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ops.observe.dashboard.series_layout import MOVING_WINDOW, Series, moving_mean
from ops.observe.dashboard.version_series import gate_series, scored_success
from ops.observe.probe_rounds import HEADLINE, PAIRED_SUITES
from ops.observe.reward_curve import by_version
from ops.observe.probe_report import rounds_of
from ops.observe.redis_view import Snapshot
from ops.observe.version_view import VersionView


@dataclass
class Charts:
    reward_by_version: Series
    """x = served policy version; mean execution and preference reward of the trajectories it sampled."""
    probe: Series
    """x = a held-out probe round's version (median served version); held-out success with its 95% interval, BFCL
    success, exec and pref, and in `meta["vs_v0"]` the latest round's paired difference from v0 per suite."""
    tool_turns: Series
    """x = scoring time; tool turns of each episode and their moving mean."""
    zero_variance: Series
    """x = learner step time; per estimator channel, the share of the step's groups with zero reward variance."""
    staleness: Series
    """x = scoring time; published version then − the version that sampled the trajectory, and its moving mean."""
    versions: Series
    """x = time; the version each scored trajectory was sampled by, and the learner's version after each step."""
    throughput: Series
    """x = minute; trajectories scored in that minute."""
    learner: Series
    """x = learner step time; loss and KL."""
    gate: Series = field(default_factory=Series)
    """x = gate decision time; the promoted version's and the candidate's success on the gate set
    (`version_series.gate_series`)."""
    scored_success: Series = field(default_factory=Series)
    """x = scoring time; success of scored trajectories of the promoted version then and of the others (the
    candidate), moving means (`version_series.scored_success`)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _timed(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Rows with both a time and `key`, in time order (uPlot needs ascending x)."""
    return sorted((r for r in rows if r.get("ts") is not None and r.get(key) is not None), key=lambda r: r["ts"])


def reward_by_version(rewards: list[dict[str, Any]]) -> Series:
    stats = by_version(rewards)
    return Series(
        [float(s.version) for s in stats],
        {"execution": [s.exec_mean for s in stats], "preference": [s.pref_mean for s in stats]},
        {"n": [s.n for s in stats], "tool_turns": [s.tool_turns_mean for s in stats]},
    )


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


PROBE_LINES = {
    "held-out success": ("held_out", "success"),
    "95% high": ("held_out", "ci_high"),
    "95% low": ("held_out", "ci_low"),
    "train-probe success": ("train_probe", "success"),
    "BFCL success": ("bfcl", "success"),
    "exec": ("held_out", "exec"),
    "pref": ("held_out", "pref"),
}
"""Probe chart line label → (suite, field) of `ProbeRound.suites`; the page fills the band between the two
interval lines."""
PROBE_EXTRA = ("n", "version_min", "version_max", "diff", "diff_low", "diff_high", "mcnemar_p")
"""Legend-only columns of the probe chart: the held-out size, the versions the round spanned, and its paired
difference from v0 (bootstrap 95% interval, McNemar p)."""


def probe(entries: list[dict[str, Any]]) -> Series:
    """Held-out probe rounds (the evaluation's same items every round) by version: success with its Wilson 95%
    interval, BFCL success, exec and pref; in `meta`, the latest round's paired difference from v0 per suite (the
    caption's headline). Entries that are not rounds of this probe are left out; rounds sharing a version (the
    probe restarted) keep their time order."""
    rounds = sorted(rounds_of(entries), key=lambda r: r.version)  # stable: equal versions stay oldest first
    xs = [float(r.version) for r in rounds]
    ys = {
        label: [_value(r.suites.get(suite, {}).get(key)) for r in rounds] for label, (suite, key) in PROBE_LINES.items()
    }
    paired = [r.vs_v0.get(HEADLINE, {}) for r in rounds]
    extra = {
        "n": [r.headline.get("n") for r in rounds],
        "version_min": [r.version_min for r in rounds],
        "version_max": [r.version_max for r in rounds],
        "diff": [d.get("diff") for d in paired],
        "diff_low": [d.get("ci_low") for d in paired],
        "diff_high": [d.get("ci_high") for d in paired],
        "mcnemar_p": [d.get("mcnemar_p") for d in paired],
    }
    meta: dict[str, Any] = {}
    if rounds:
        last = rounds[-1]
        paired_v0 = {name: last.vs_v0[name] for name in PAIRED_SUITES if name in last.vs_v0}
        meta = {
            "version": last.version,
            "baseline_version": last.baseline_version,
            "mode": last.mode,
            "items": last.items,
            "vs_v0": paired_v0,
        }
    return Series(xs, ys, extra, meta)


def _value(v: Any) -> float | None:
    return float(v) if _finite(v) else None


def tool_turns(rewards: list[dict[str, Any]]) -> Series:
    rows = _timed(rewards, "tool_turns")
    turns = [r["tool_turns"] for r in rows]
    return Series([r["ts"] for r in rows], {"per episode": turns, f"mean of {MOVING_WINDOW}": moving_mean(turns)})


def zero_variance(learner: list[dict[str, Any]]) -> Series:
    rows = [r for r in _timed(learner, "step") if r.get("zero_var")]
    channels = sorted({c for r in rows for c in r["zero_var"]})
    return Series([r["ts"] for r in rows], {c: [r["zero_var"].get(c) for r in rows] for c in channels})


def staleness(rewards: list[dict[str, Any]], learner: list[dict[str, Any]]) -> Series:
    """Served-behind staleness of each scored trajectory: the learner's version when it was scored minus the
    version that sampled it (the gap the learner's `max_staleness` bounds). A trajectory scored before the
    oldest learner row in view has no known published version then, so it has no point."""
    steps = _timed(learner, "version")
    times = [r["ts"] for r in steps]
    xs, ys = [], []
    for r in _timed(rewards, "policy_version"):
        i = bisect.bisect_right(times, r["ts"]) - 1
        if i < 0:
            continue
        xs.append(r["ts"])
        ys.append(max(0.0, steps[i]["version"] - r["policy_version"]))  # a newer sampler than learner row: lag 0
    return Series(xs, {"staleness": ys, f"mean of {MOVING_WINDOW}": moving_mean(ys)})


def versions(rewards: list[dict[str, Any]], learner: list[dict[str, Any]]) -> Series:
    """Both lines on one time column: each row fills its own line and leaves a gap in the other."""
    points = [(r["ts"], 0, r["policy_version"]) for r in _timed(rewards, "policy_version")]
    points += [(r["ts"], 1, r["version"]) for r in _timed(learner, "version")]
    points.sort(key=lambda p: p[0])
    served: list[float | None] = [v if line == 0 else None for _, line, v in points]
    learned: list[float | None] = [v if line == 1 else None for _, line, v in points]
    return Series([p[0] for p in points], {"served (sampled by)": served, "learner": learned})


def throughput(rewards: list[dict[str, Any]]) -> Series:
    minutes: dict[float, int] = {}
    for r in rewards:
        if r.get("ts") is not None:
            m = float(int(r["ts"] // 60) * 60)
            minutes[m] = minutes.get(m, 0) + 1
    xs = sorted(minutes)
    return Series(xs, {"scored / min": [float(minutes[m]) for m in xs]})


def learner_series(learner: list[dict[str, Any]]) -> Series:
    rows = _timed(learner, "step")
    return Series([r["ts"] for r in rows], {"loss": [r.get("loss") for r in rows], "kl": [r.get("kl") for r in rows]})


def build_charts(snapshot: Snapshot, view: VersionView | None = None) -> Charts:
    rewards, learner = snapshot.rewards, snapshot.learner
    view = view or VersionView()
    return Charts(
        reward_by_version(rewards),
        probe(snapshot.probe),
        tool_turns(rewards),
        zero_variance(learner),
        staleness(rewards, learner),
        versions(rewards, learner),
        throughput(rewards),
        learner_series(learner),
        gate_series(view.decisions),
        scored_success(rewards, view),
    )
