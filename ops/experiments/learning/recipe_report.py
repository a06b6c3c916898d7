"""The recipe sweep's results from every finished block: `results.json`, `results.md` (the rule and the verdict
first), `recipe.png` (success against minutes per arm); then the estimator comparison from the estimator arm set's
blocks (`recipe_estimators`: its own rule, its section of both files, `estimators.png`), and training on SGLS
against the real tools from the tool-source arm set's blocks (`recipe_tools`: sgls − real, its own rule and verdict,
its section of both files, `tools.png`).

The rule, fixed before the first block (`RULE`): per arm and suite, the paired difference of greedy success
against the same block's warm start, item by item, averaged over items and blocks; its 95% interval by a
bootstrap that draws items (the same draw for every block, so the pairing holds) and, with 3 or more blocks, the
blocks too. The winner is the arm with the highest training-probe difference among the arms whose test-split
interval stays above −5 points; it is called a winner only if its training-probe interval is above 0.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from statistics import fmean

from ops.experiments.learning.files import read_json, write_atomic, write_json
from ops.experiments.learning.recipe_pairs import paired

NON_INFERIORITY = -0.05
RULE = (
    "Paired greedy success of each arm's last version against the same block's warm start, item by item, on the "
    "training probe (the tasks it trained on) and the test split; 95% bootstrap interval over items (and blocks "
    "when ≥ 3). Winner: the highest training-probe difference among arms whose test-split interval is above "
    f"{NON_INFERIORITY * 100:+.0f} points, and only if its training-probe interval is above 0."
)


def read_blocks(out: Path, folder: str = "blocks", arms_of: Callable[[Path], dict] | None = None) -> list[dict]:
    """Every block under `<out>/<folder>` with its warm start's outcomes and its finished arms' outcomes: what
    `arms_of` reads from each arm's folder ({name: entry with "outcomes"}; default `sweep_arm`, one entry per arm)."""
    from ops.experiments.eval.suite import read_jsonl

    arms_of = arms_of or sweep_arm
    blocks = []
    for block_dir in sorted((out / folder).glob("b*")):
        meta = read_json(block_dir / "block.json")
        warm_path = block_dir / "warm_start.items.jsonl"
        if meta is None or not warm_path.is_file():
            continue
        arms = {}
        for arm_dir in sorted((block_dir / "arms").glob("*")):
            arms.update(arms_of(arm_dir))
        blocks.append({"meta": meta, "warm": outcomes(read_jsonl(warm_path)), "arms": arms})
    return blocks


def sweep_arm(arm_dir: Path) -> dict:
    """A finished arm of the sweep: its `done.json`, the outcomes of its last version (`items.jsonl`) and its
    per-step learner lines; nothing while it is unfinished."""
    from ops.experiments.eval.suite import read_jsonl

    done = read_json(arm_dir / "done.json")
    if done is None:
        return {}
    entry = done | {"outcomes": outcomes(read_jsonl(arm_dir / "items.jsonl"))}
    entry["steps_log"] = _steps(arm_dir / "train.jsonl")
    return {done["arm"]: entry}


def _steps(path: Path) -> list[dict]:
    from ops.experiments.learning.diagnostics import read_jsonl

    return read_jsonl(path) if path.is_file() else []


def outcomes(records) -> dict[str, float]:
    return {f"{r.suite}/{r.item_id}": float(bool(r.success)) for r in records}


def arm_summary(blocks: list[dict], arm: str) -> dict:
    runs = [b["arms"][arm] for b in blocks if arm in b["arms"]]
    steps = [line for r in runs for line in r["steps_log"]]
    return {
        "blocks": len(runs),
        "settings": runs[0]["settings"] if runs else {},
        "steps": [r["steps"] for r in runs],
        "trajectories": [r["trajectories"] for r in runs],
        "train_seconds": [r["train_seconds"] for r in runs],
        "trajectories_per_hour": [round(3600 * r["trajectories"] / r["train_seconds"]) for r in runs],
        "screened_share": _mean_of(steps, "groups_screened", "groups_in"),
        "grad_norm": _mean(steps, "grad_norm"),
        "train_success": _mean(steps, "success_mean"),
    }


def _mean(lines: list[dict], key: str) -> float | None:
    values = [float(line[key]) for line in lines if line.get(key) is not None]
    return round(fmean(values), 4) if values else None


def _mean_of(lines: list[dict], num: str, den: str) -> float | None:
    n = sum(float(line.get(num) or 0) for line in lines)
    d = sum(float(line.get(den) or 0) for line in lines)
    return round(n / d, 4) if d else None


def verdict(comparisons: dict) -> str:
    eligible = []
    for arm, c in comparisons.items():
        test, probe = c["vs_warm"].get("test"), c["vs_warm"].get("train_probe")
        if test and probe and test["ci95"][0] > NON_INFERIORITY:
            eligible.append((probe["diff"], arm, probe))
    if not eligible:
        return "no arm is eligible (none has a test-split interval above the margin, or no block has finished)"
    diff, arm, probe = max(eligible)
    lo, hi = probe["ci95"]
    if lo > 0:
        return f"winner: {arm} (training probe {diff * 100:+.1f} points [{lo * 100:+.1f}, {hi * 100:+.1f}])"
    return (
        f"no winner: the best eligible arm, {arm}, moves the training probe {diff * 100:+.1f} points "
        f"[{lo * 100:+.1f}, {hi * 100:+.1f}], an interval that includes 0"
    )


def target_verdict(target: dict, comparisons: dict) -> str:
    """A target fixed before the run (`--target-points`, kept in `<out>/target.json`): the training probe's
    paired difference against the warm start at least `points`, its 95% interval above 0 — per arm."""
    parts = []
    for arm, c in comparisons.items():
        probe = c["vs_warm"].get("train_probe")
        if not probe:
            continue
        lo, hi = probe["ci95"]
        met = probe["diff"] * 100 >= target["points"] and lo > 0
        parts.append(
            f"{arm} {'met' if met else 'missed'}: training probe {probe['diff'] * 100:+.1f} points "
            f"[{lo * 100:+.1f}, {hi * 100:+.1f}]"
        )
    head = f"target ≥ {target['points']:+g} points on the training probe, interval above 0"
    return f"{head}: " + ("; ".join(parts) if parts else "no arm has finished")


def write_report(out: Path) -> dict:
    from ops.experiments.learning.recipe_arms import ARM_SETS, BASELINE, ESTIMATORS, RECIPE_ARMS, TOOL_SOURCES
    from ops.experiments.learning.recipe_estimators import compare_estimators
    from ops.experiments.learning.recipe_tools import compare_tools

    blocks = read_blocks(out)
    names = [a for a in RECIPE_ARMS if any(a in b["arms"] for b in blocks)]
    comparisons = {}
    for arm in names:
        comparisons[arm] = {
            "summary": arm_summary(blocks, arm),
            "vs_warm": {s: paired(blocks, arm, None, s) for s in ("train_probe", "test")},
            "vs_baseline": {s: paired(blocks, arm, BASELINE, s) for s in ("train_probe", "test")}
            if arm != BASELINE
            else {},
        }
    results = {
        "rule": RULE,
        "verdict": verdict(comparisons),
        "blocks": [b["meta"] for b in blocks],
        "arms": comparisons,
    }
    target = read_json(out / "target.json")
    if target is not None:
        results["target"] = target | {"verdict": target_verdict(target, comparisons)}
    estimator_blocks = read_blocks(out, ARM_SETS["estimators"].blocks)
    results["estimators"] = compare_estimators(estimator_blocks)
    tool_blocks = read_blocks(out, ARM_SETS["tools"].blocks)
    results["tools"] = compare_tools(tool_blocks)
    write_json(out / "results.json", results)
    write_atomic(out / "results.md", markdown(results))
    if names:
        plot(blocks, names, out / "recipe.png")
    estimators = [a for a in ESTIMATORS if any(a in b["arms"] for b in estimator_blocks)]
    if estimators:
        plot(estimator_blocks, estimators, out / "estimators.png")
    tool_arms = [a for a in TOOL_SOURCES if any(a in b["arms"] for b in tool_blocks)]
    if tool_arms:
        plot(tool_blocks, tool_arms, out / "tools.png")
    print(results["target"]["verdict"] if "target" in results else results["verdict"])
    if tool_blocks:
        print(results["tools"]["verdict"])
    return results


def _fmt(c: dict | None) -> str:
    if c is None:
        return "–"
    lo, hi = c["ci95"]
    return f"{c['diff'] * 100:+.1f} [{lo * 100:+.1f}, {hi * 100:+.1f}] (+{c['gained']}/−{c['lost']})"


def markdown(results: dict) -> str:
    lines = [f"**Target: {results['target']['verdict']}**", ""] if "target" in results else []
    lines += [
        f"**Verdict: {results['verdict']}**",
        "",
        f"Rule (fixed before the first block): {results['rule']}",
        "",
        f"Blocks: {len(results['blocks'])} — "
        + "; ".join(
            f"b{b['block']} {b['machine']['cpu']} ({' '.join(b['machine']['cpu_flags'])}), load "
            f"{b['machine']['load_average_1m']} at start, {_budget(b)} per arm, order {' → '.join(b['order'])}"
            for b in results["blocks"]
        ),
        "",
        "| arm | train probe: success | Δ vs warm start | test: success | Δ vs warm start | Δ train probe vs today "
        "| trajectories/h | steps | screened |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, c in results["arms"].items():
        probe, test = c["vs_warm"]["train_probe"], c["vs_warm"]["test"]
        s = c["summary"]
        lines.append(
            f"| {arm} | {probe['a']:.3f} (warm {probe['b']:.3f}) | {_fmt(probe)} | "
            f"{test['a']:.3f} (warm {test['b']:.3f}) | {_fmt(test)} | {_fmt(c['vs_baseline'].get('train_probe'))} | "
            f"{', '.join(map(str, s['trajectories_per_hour']))} | {', '.join(map(str, s['steps']))} | "
            f"{s['screened_share'] if s['screened_share'] is not None else '–'} |"
            if probe and test
            else f"| {arm} | – | – | – | – | – | – | – | – |"
        )
    lines += [
        "",
        "Δ in points, 95% interval, (+items gained/−items lost). Written by `slca bench recipe`; per-item records "
        "under `blocks/b*/`.",
    ]
    if "estimators" in results:
        from ops.experiments.learning.recipe_estimators import markdown as estimators_markdown

        lines += ["", *estimators_markdown(results["estimators"])]
    if "tools" in results:
        from ops.experiments.learning.recipe_tools import markdown as tools_markdown

        tools = tools_markdown(results["tools"])
        # a folder of tool-source blocks alone: their verdict first, not the empty sweep's
        lines = [*tools, "", *lines] if results["tools"]["blocks"] and not results["blocks"] else [*lines, "", *tools]
    return "\n".join(lines) + "\n"


def _budget(block: dict) -> str:
    if block.get("trajectories"):
        return f"{block['trajectories']} trajectories"
    return f"{block.get('minutes', 0):g} min"


def plot(blocks: list[dict], names: list[str], path: Path) -> None:
    """Left: greedy success on the training probe at 0 minutes (the warm start) and at the arm's budget, per block
    and the mean. Right: the training groups' sampled success per step against minutes (a rolling mean)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for i, arm in enumerate(names):
        color = f"C{i}"
        ends = []
        for block in blocks:
            run = block["arms"].get(arm)
            if run is None:
                continue
            keys = [k for k in run["outcomes"] if k.startswith("train_probe/")]
            warm = fmean(block["warm"][k] for k in keys)
            final = fmean(run["outcomes"][k] for k in keys)
            minutes = run["train_seconds"] / 60
            left.plot([0, minutes], [warm, final], color=color, alpha=0.35, marker="o")
            ends.append((minutes, warm, final))
            lines = run["steps_log"]
            if lines and "success_mean" in lines[0]:
                t, y = _rolling(lines)
                right.plot(t, y, color=color, alpha=0.6, label=arm if len(ends) == 1 else None)
        if ends:
            left.plot(
                [0, fmean(e[0] for e in ends)],
                [fmean(e[1] for e in ends), fmean(e[2] for e in ends)],
                color=color,
                lw=2.5,
                label=arm,
            )
    left.set(xlabel="minutes of training", ylabel="greedy success, training probe", title="last version vs warm start")
    right.set(xlabel="minutes of training", ylabel="sampled success (rolling mean of 5 steps)", title="training groups")
    left.legend(fontsize=8)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _rolling(lines: list[dict], window: int = 5) -> tuple[list[float], list[float]]:
    elapsed, t, y = 0.0, [], []
    values = []
    for line in lines:
        elapsed += sum(float(line.get(k) or 0) for k in ("generate_s", "step_s", "publish_s", "swap_s"))
        values.append(float(line["success_mean"]))
        t.append(elapsed / 60)
        y.append(fmean(values[-window:]))
    return t, y
