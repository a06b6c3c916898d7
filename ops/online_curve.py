"""The curve that says whether the system learns: rewards of the trajectories each served version produced.

Every scored trajectory adds a row to the `stats:rewards` stream (exec, pref, tool turns, the policy version
that sampled it, time). Grouped by version, the mean execution reward per version is the learning curve of
`slca up`: if online RL works, it rises with the version. Used by `slca status` (a short table) and by
`slca bench online` (JSON + Markdown + PNG under bench/online/<run>/).

Beside it, the feed's held-out probe (ops/feed/probe.py): the same test tasks with the same seeds every few
versions, so its rounds differ by the weights rather than by which tasks the feed happened to draw.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


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
        out.append(VersionStats(version, len(rs), mean, sem, _mean([r["pref"] for r in rs if r.get("pref") is not None]),
                                _mean([r["tool_turns"] for r in rs if r.get("tool_turns") is not None]),
                                min((r.get("ts") or t0) for r in rs) - t0))  # fmt: skip
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
            out.append({"versions": f"v{cur[0].version}–v{cur[-1].version}", "n": n,
                        "exec_mean": sum(c.exec_mean * c.n for c in cur) / n,
                        "tool_turns_mean": _mean([c.tool_turns_mean for c in cur if c.tool_turns_mean is not None])})  # fmt: skip
            cur = []
    return out


def status_lines(stats: list[VersionStats], last: int = 6) -> str:
    if not stats:
        return "exec reward by served version: no scored trajectory yet"
    cells = [f"v{s.version} {s.exec_mean:.3f} (n={s.n})" for s in stats[-last:]]
    return "exec reward by served version: " + " | ".join(cells)


def probe_lines(rounds: list[dict[str, Any]], last: int = 6) -> str:
    if not rounds:
        return "held-out probe: no round yet"
    cells = [f"v{r['version']} {r['exec_mean']:.3f} (success {r['success']:.2f})" for r in rounds[-last:]]
    return "held-out probe, exec reward by version: " + " | ".join(cells)


def trend(xs: list[float], ys: list[float]) -> dict[str, float] | None:
    """Least-squares slope of ys on xs with its standard error (None below 3 points): a rise is a slope more
    than two standard errors above 0."""
    n = len(xs)
    if n < 3:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    resid = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(xs, ys))
    se = math.sqrt(resid / (n - 2) / sxx)
    return {"slope_per_100_versions": 100 * slope, "se_per_100_versions": 100 * se, "points": n}


def write_curve(stats: list[VersionStats], out: Path, command: str, extra: dict[str, Any],
                probe: list[dict[str, Any]] | None = None) -> dict[str, Any]:  # fmt: skip
    """results.json, results.md and curve.png under `out` (relative paths only in what is written)."""
    out.mkdir(parents=True, exist_ok=True)
    pooled = binned(stats)
    probe = probe or []
    trends = {"feed": trend([s.version for s in stats for _ in range(s.n)],
                            [s.exec_mean for s in stats for _ in range(s.n)]),
              "probe": trend([r["version"] for r in probe], [r["exec_mean"] for r in probe])}  # fmt: skip
    result = {"command": command, **extra, "trend_exec": trends, "versions": [asdict(s) for s in stats],
              "binned": pooled, "probe": probe}  # fmt: skip
    (out / "results.json").write_text(json.dumps(result, indent=1))
    lines = [f"# Online learning curve\n", f"Command: `{command}`\n"]
    lines += [f"- {k}: {v}" for k, v in extra.items()] + [""]
    lines += ["| versions | trajectories | mean exec reward | tool turns / episode |", "|---|---|---|---|"]
    lines += [f"| {b['versions']} | {b['n']} | {b['exec_mean']:.3f} | "
              f"{'-' if b['tool_turns_mean'] is None else format(b['tool_turns_mean'], '.2f')} |" for b in pooled]  # fmt: skip
    if probe:
        lines += ["", "Held-out probe (same test tasks and seeds every round, not trained on):", "",
                  "| version (median) | versions | trajectories | exec reward | success | tool turns |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        lines += [f"| v{r['version']} | v{r['version_min']}–v{r['version_max']} | {r['trajectories']} | "
                  f"{r['exec_mean']:.3f} | {r['success']:.2f} | {r['tool_turns_mean']:.2f} |" for r in probe]  # fmt: skip
    lines += ["", "Trend of exec reward (least squares on version, per 100 versions, ± 1 standard error):"]
    for name, t in trends.items():
        lines.append(f"- {name}: " + ("too few points" if t is None else
                     f"{t['slope_per_100_versions']:+.3f} ± {t['se_per_100_versions']:.3f} ({t['points']} points)"))  # fmt: skip
    (out / "results.md").write_text("\n".join(lines) + "\n")
    _plot(stats, out / "curve.png", probe)
    return result


def _plot(stats: list[VersionStats], path: Path, probe: list[dict[str, Any]]) -> None:
    import matplotlib

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
    if probe:
        pv = [r["version"] for r in probe]
        ax3.plot(pv, [r["exec_mean"] for r in probe], "o-", ms=3, label="exec reward")
        ax3.plot(pv, [r["success"] for r in probe], "s--", ms=3, label="success (exec = 1)")
        ax3.legend(loc="lower right")
    ax3.set_xlabel("served policy version (round median)")
    ax3.set_title("held-out probe: same tasks, same seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
