"""The curve that says whether the system learns: rewards of the trajectories each served version produced.

Every scored trajectory adds a row to the `stats:rewards` stream (exec, pref, tool turns, the policy version
that sampled it, time). Grouped by version, the mean execution reward per version is the learning curve of
`slca up`: if online RL works, it rises with the version. Used by `slca status` (a short table) and by
`slca bench online` (JSON + Markdown + PNG under bench/online/<run>/).

Beside it, the feed's held-out probe (ops/run/feed/probe.py, shown by ops/observe/probe_report.py): the evaluation's
same held-out items every few versions, so its rounds differ by the weights rather than by which tasks the feed drew.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from slca.contracts.stats import STATS_READ_MAX

REWARD_HISTORY = STATS_READ_MAX
"""Rows of the rewards stats stream read for the per-version curve: all the workers keep (`slca.contracts.stats`)."""


@dataclass
class VersionStats:
    version: int
    n: int
    exec_mean: float
    exec_sem: float
    """Standard error of the mean execution reward (0 with one trajectory)."""
    pref_mean: float | None
    tool_turns_mean: float | None
    first_s: float
    """Seconds since the first scored trajectory of the run when this version's first trajectory was scored."""


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def by_version(rows: list[dict[str, Any]]) -> list[VersionStats]:
    """Rows of `stats:rewards` (exec, pref, tool_turns, policy_version, ts) → one entry per version, in order."""
    rows = [r for r in rows if r.get("exec") is not None and r.get("policy_version") is not None]
    if not rows:
        return []
    t0 = min(r.get("ts") or 0.0 for r in rows)
    groups: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(int(r["policy_version"]), []).append(r)
    out = []
    for version in sorted(groups):
        rs = groups[version]
        ex = [r["exec"] for r in rs]
        mean = sum(ex) / len(ex)
        sem = math.sqrt(sum((x - mean) ** 2 for x in ex) / (len(ex) - 1) / len(ex)) if len(ex) > 1 else 0.0
        out.append(
            VersionStats(
                version,
                len(rs),
                mean,
                sem,
                _mean([r["pref"] for r in rs if r.get("pref") is not None]),
                _mean([r["tool_turns"] for r in rs if r.get("tool_turns") is not None]),
                min((r.get("ts") or t0) for r in rs) - t0,
            )
        )
    return out


def binned(stats: list[VersionStats], bins: int = 6) -> list[dict[str, Any]]:
    """Consecutive versions pooled into about `bins` bins of similar trajectory counts (single versions have few
    trajectories each; pooled, the trend is readable)."""
    total = sum(s.n for s in stats)
    if not total:
        return []
    per_bin, out, cur = total / bins, [], []
    for s in stats:
        cur.append(s)
        if sum(c.n for c in cur) >= per_bin or s is stats[-1]:
            n = sum(c.n for c in cur)
            out.append(
                {
                    "versions": f"v{cur[0].version}–v{cur[-1].version}",
                    "n": n,
                    "exec_mean": sum(c.exec_mean * c.n for c in cur) / n,
                    "tool_turns_mean": _mean([c.tool_turns_mean for c in cur if c.tool_turns_mean is not None]),
                }
            )
            cur = []
    return out


def status_lines(stats: list[VersionStats], last: int = 6) -> str:
    if not stats:
        return "exec reward by served version: no scored trajectory yet"
    cells = [f"v{s.version} {s.exec_mean:.3f} (n={s.n})" for s in stats[-last:]]
    return "exec reward by served version: " + " | ".join(cells)


def trend(stats: list[VersionStats]) -> dict[str, float] | None:
    """Least-squares slope of the trajectories' exec reward on their policy version, with its standard error
    clustered by version (None below 3 versions). Trajectories of one version share its weights and the tasks the
    feed drew meanwhile, so they are not independent: an error that counts each as its own observation is too small.
    The cluster-robust (sandwich, CR1) error sums the score over each version first; within a version x is one
    value, so the per-version means and counts hold all it needs: Var(b) = G/(G−1)·(N−1)/(N−2) · Σ_g (n_g (x_g −
    x̄) (ȳ_g − a − b x_g))² / Sxx². A rise is a slope more than two (clustered) standard errors above 0."""
    g, n = len(stats), sum(s.n for s in stats)
    if g < 3 or n < 3:
        return None
    mx = sum(s.version * s.n for s in stats) / n
    my = sum(s.exec_mean * s.n for s in stats) / n
    sxx = sum(s.n * (s.version - mx) ** 2 for s in stats)
    if sxx == 0:
        return None
    slope = sum(s.n * (s.version - mx) * (s.exec_mean - my) for s in stats) / sxx
    scores = [s.n * (s.version - mx) * (s.exec_mean - my - slope * (s.version - mx)) for s in stats]
    correction = g / (g - 1) * (n - 1) / max(n - 2, 1)
    se = math.sqrt(correction * sum(u * u for u in scores)) / sxx
    return {"slope_per_100_versions": 100 * slope, "se_per_100_versions": 100 * se, "points": n, "versions": g}


def write_curve(
    stats: list[VersionStats],
    out: Path,
    command: str,
    extra: dict[str, Any],
    probe: list[dict[str, Any]] | None = None,
    data_dir: Path | None = None,
    last_served: int | None = None,
    gate: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """results.json, results.md and curve.png under `out` (relative paths only in what is written); with probe
    rounds, also the per-item files of v0 and the latest round (under `out/probe/`, copied from `data_dir`) and
    the paired v0 → latest result per suite (`probe_summary.json`)."""
    from ops.observe import probe_report

    out.mkdir(parents=True, exist_ok=True)
    pooled = binned(stats)
    rounds = probe_report.rounds_of(probe or [])
    summary = probe_report.paired_summary(rounds, data_dir, out, last_served)
    trends = {"feed": trend(stats)}
    verdict = probe_report.verdict(summary)
    result = {
        "command": command,
        "verdict": verdict,
        **extra,
        "trend_exec": trends,
        "versions": [asdict(s) for s in stats],
        "binned": pooled,
        "probe": [r.to_json() for r in rounds],
        "probe_paired": summary,
        "probe_cost": probe_report.probe_cost(rounds),
    }
    if gate is not None:  # the promotion gate's decisions (ops/observe/gate_report.py)
        result["gate"] = gate
    (out / "results.json").write_text(json.dumps(result, indent=1))
    lines = [
        "# Online learning curve\n",
        f"**Verdict** (paired held-out probe, rule in `ops/observe/probe_report.py`): {verdict}\n",
        f"Command: `{command}`\n",
    ]
    lines += [f"- {k}: {v}" for k, v in extra.items()] + [""]
    lines += ["| versions | trajectories | mean exec reward | tool turns / episode |", "|---|---|---|---|"]
    lines += [
        f"| {b['versions']} | {b['n']} | {b['exec_mean']:.3f} | "
        f"{'-' if b['tool_turns_mean'] is None else format(b['tool_turns_mean'], '.2f')} |"
        for b in pooled
    ]
    lines += probe_report.markdown(rounds, summary)
    if gate is not None:
        from ops.observe.gate_report import gate_markdown

        lines += gate_markdown(gate)
    lines += [
        "",
        "Trend of the feed's exec reward (least squares on version, per 100 versions, ± 1 standard error clustered by "
        "version):",
    ]
    for name, t in trends.items():
        lines.append(
            f"- {name}: "
            + (
                "too few points"
                if t is None
                else f"{t['slope_per_100_versions']:+.3f} ± {t['se_per_100_versions']:.3f} "
                f"({t['points']} trajectories in {t['versions']} versions)"
            )
        )
    (out / "results.md").write_text("\n".join(lines) + "\n")
    _plot(stats, out / "curve.png", rounds)
    return result


def _plot(stats: list[VersionStats], path: Path, rounds: list) -> None:
    import matplotlib

    from ops.observe import probe_report

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(14, 3.6))
    v = [s.version for s in stats]
    ax1.errorbar(v, [s.exec_mean for s in stats], yerr=[s.exec_sem for s in stats], fmt="o-", ms=3, capsize=2)
    ax1.set_xlabel("served policy version")
    ax1.set_ylabel("mean execution reward")
    ax1.set_title("r_exec of the trajectories each version sampled")
    ax2.plot(v, [s.tool_turns_mean or 0 for s in stats], "o-", ms=3, color="tab:orange")
    ax2.set_xlabel("served policy version")
    ax2.set_ylabel("tool turns per episode")
    probe_report.plot(ax3, rounds)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
