"""`slca bench swap-compare`: serve's memory through hot swaps, two settings side by side, from runs of `slca bench
swap` made in alternation (A B B A …, one machine, one run at a time) — each run's own `results.json` kept beside.

Per run: serve's resident set after the warm-up and after the last version, the growth per swap over the whole
run, and over its second half only (the first swaps also fill caches that do not grow again: the steady growth is
what a long `make run` accumulates). Per side: the mean and the range of the runs. Runs are grouped by a key of
their results (`--by`, e.g. `serve_heap_trim_after_swap`)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from ops.bench.ab import write


def slope(values: list[float]) -> float:
    """Least-squares slope per step of `values` (MiB per swap)."""
    n = len(values)
    if n < 2:
        return 0.0
    mx, my = (n - 1) / 2, statistics.fmean(values)
    return sum((i - mx) * (v - my) for i, v in enumerate(values)) / sum((i - mx) ** 2 for i in range(n))


def run_row(run: Path, by: str) -> dict:
    result = json.loads((run / "results.json").read_text())
    rss = [float(v) for v in result["serve_rss_mib"]]
    half = rss[len(rss) // 2 :]
    return {
        "run": run.name,
        "arm": str(result.get(by)),
        "versions": result["versions"],
        "rss_start_mib": rss[0],
        "rss_end_mib": rss[-1],
        "growth_per_swap_mib": (rss[-1] - rss[0]) / max(1, len(rss) - 1),
        "second_half_slope_mib": slope(half),
        "swap_p50_s": result["latency_p50_s"],
        "failed": result["failed"],
        "failed_swaps": result["failed_swaps"],
        "cpu": result.get("cpu"),
    }


def summarise(rows: list[dict]) -> dict:
    arms: dict[str, list[dict]] = {}
    for row in rows:
        arms.setdefault(row["arm"], []).append(row)
    out = {}
    for arm, runs in arms.items():
        out[arm] = {
            key: {
                "mean": statistics.fmean(r[key] for r in runs),
                "min": min(r[key] for r in runs),
                "max": max(r[key] for r in runs),
            }  # fmt: skip
            for key in ("growth_per_swap_mib", "second_half_slope_mib", "rss_end_mib", "swap_p50_s")
        }
        out[arm]["runs"] = len(runs)
    return out


def run_compare(args) -> int:
    rows = [run_row(Path(r), args.by) for r in args.runs]
    summary = summarise(rows)
    lines = [
        f"Runs grouped by `{args.by}`; growth per swap = (RSS after the last version − after the warm-up) / versions; "
        "second-half slope = least-squares MiB per swap over the second half of the samples.",
        "",
        "| run | arm | RSS start → end (MiB) | growth/swap (MiB) | 2nd-half slope (MiB/swap) | swap p50 (s) | failed |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['run']} | {r['arm']} | {r['rss_start_mib']:,.0f} → {r['rss_end_mib']:,.0f} | "
            f"{r['growth_per_swap_mib']:.1f} | {r['second_half_slope_mib']:.1f} | {r['swap_p50_s']:.2f} | "
            f"{r['failed']} requests, {r['failed_swaps']} swaps |"
        )
    lines += ["", "| arm | runs | growth/swap mean (min–max) | 2nd-half slope mean (min–max) |", "|---|---|---|---|"]
    for arm, s in summary.items():
        g, h = s["growth_per_swap_mib"], s["second_half_slope_mib"]
        lines.append(
            f"| {arm} | {s['runs']} | {g['mean']:.1f} ({g['min']:.1f}–{g['max']:.1f}) | "
            f"{h['mean']:.1f} ({h['min']:.1f}–{h['max']:.1f}) |"
        )
    result = {"command": " ".join(["slca bench swap-compare", "--by", args.by, *map(str, args.runs)]),
              "by": args.by, "runs": rows, "arms": summary}  # fmt: skip
    write(args.out, result, lines, f"serve's memory through hot swaps, by {args.by}")
    print("\n".join(lines))
    return 0
