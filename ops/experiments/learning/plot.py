"""learning.png: the primary metric's learning curve per arm (mean over seeds, min–max band; every point on the
same fixed items, the warm start's at step 0), tool turns per training episode (same layout), and the
comparisons' effects with their 95% intervals (the verdicts' numbers)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from statistics import fmean


def band(curves: list[list[list[float]]]) -> tuple[list[float], list[float], list[float], list[float]]:
    """(steps, mean, min, max) over seeds at every step some seed has."""
    by_step: dict[float, list[float]] = defaultdict(list)
    for curve in curves:
        for step, value in curve:
            by_step[step].append(value)
    steps = sorted(by_step)
    return (
        steps,
        [fmean(by_step[s]) for s in steps],
        [min(by_step[s]) for s in steps],
        [max(by_step[s]) for s in steps],
    )


def plot_curves(curves: dict, path: Path, title: str) -> None:
    """`curves`: the `curves.json` content. With curve evaluations every run's curve starts from the warm
    start's point at step 0; with the reward as the curve, the per-step training execution reward is drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    evaluated = curves["source"].startswith("eval")
    warm = curves.get("warm_start")
    series: dict[str, dict[str, list]] = defaultdict(lambda: {"primary": [], "tool_turns": []})
    for run in curves["runs"]:
        primary = (
            ([[0, warm], *run["curve"]] if warm is not None else run["curve"]) if evaluated else run["exec_reward"]
        )
        series[run["arm"]]["primary"].append(primary)
        series[run["arm"]]["tool_turns"].append(run["tool_turns"])
    fig, axes = plt.subplots(1, 3, figsize=(18, 4.8))
    panels = [
        ("primary", f"{curves['metric']} ({'fixed held-out items' if evaluated else 'training exec reward'})"),
        ("tool_turns", "tool turns per training episode"),
    ]
    effects_panel(axes[2], curves.get("comparisons", []))
    for ax, (key, label) in zip(axes, panels):
        for estimator, data in series.items():
            steps, mean, lo, hi = band(data[key])
            if not steps:
                continue
            (line,) = ax.plot(steps, mean, marker="o", markersize=3, label=f"{estimator} (n={len(data[key])})")
            ax.fill_between(steps, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
        if evaluated and key == "primary" and warm is not None:
            ax.axhline(warm, color="grey", linestyle=":", linewidth=1, label="warm start")
        ax.set_title(label)
        ax.set_xlabel("step (rollout groups)")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(title + " — line: mean over seeds, band: min–max; right: effects, 95% intervals")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def effects_panel(ax, comparisons: list[dict]) -> None:
    """One row per comparison: the effect (points) and its 95% interval; filled marker where a difference was
    detected (Holm-adjusted), hollow where not."""
    if not comparisons:
        ax.text(0.5, 0.5, "no comparison", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    ys = list(range(len(comparisons)))[::-1]
    for y, c in zip(ys, comparisons):
        detected = not c["verdict"].startswith("no difference")
        ax.errorbar(
            [c["effect"]],
            [y],
            xerr=[[c["effect"] - c["ci_low"]], [c["ci_high"] - c["effect"]]],
            fmt="o",
            color="tab:red" if detected else "tab:blue",
            mfc=None if detected else "white",
            capsize=3,
        )
    ax.axvline(0, color="grey", linestyle=":", linewidth=1)
    ax.set_yticks(ys, [f"{c['a']} vs {c['b']}" for c in comparisons], fontsize=8)
    ax.set_xlabel("effect A − B, points of success (95% interval)")
    ax.set_title("comparisons (filled: difference detected)")
    ax.grid(alpha=0.3, axis="x")
