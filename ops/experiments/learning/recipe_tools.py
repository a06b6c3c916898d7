"""Training on SGLS instead of the real tools (issue 38, "Use it"): the tool-source arms of the recipe sweep
(`--arm-set tools`: `real` and `sgls`, one recipe, every setting identical) in blocks of their own
(`<out>/tools-blocks/b<N>`), `sgls` compared with `real` item by item within its blocks. Both arms' last versions are
judged on the real tools (`recipe`: the evaluation never takes an arm's tool source), so the simulator does not judge
itself.

The rule, fixed in code before the first tools block (`RULE`, `MARGIN`, `JUDGED_ON`): the paired success difference
sgls − real per suite (the training probe, the test split), item by item within each block, averaged over the blocks
then the items, with the sweep's 95% bootstrap interval (`recipe_pairs.paired`: items, and blocks when ≥ 3). Verdict
on the test split alone: "SGLS not worse than real" when the interval's lower end is above −5 points; "SGLS worse
than real" when its upper end is below −5 points; otherwise "not shown" (the interval holds −5 points). The training
probe is reported beside it and decides nothing.
"""

from __future__ import annotations

from ops.experiments.learning.recipe_arms import TOOL_SOURCES

REFERENCE, SIMULATED = TOOL_SOURCES
"""`real` (the reference) and `sgls` (the arm judged against it)."""
MARGIN = 0.05
"""Non-inferiority margin: 5 points of success on the test split."""
JUDGED_ON = "test"
SUITES = ("train_probe", "test")
NOT_WORSE = "SGLS not worse than real"
WORSE = "SGLS worse than real"
NOT_SHOWN = "not shown"
RULE = (
    f"{SIMULATED} − {REFERENCE}: the same recipe trained from the same warm start on the same tasks and seeds, its "
    "rollouts' tool calls answered by SGLS or by the real tools, both last versions judged greedily on the real tools; "
    "paired item by item within blocks, 95% bootstrap interval over items (and blocks when ≥ 3). Verdict on the test "
    f'split: "{NOT_WORSE}" when the interval\'s lower end is above {-MARGIN * 100:+.0f} points, "{WORSE}" when its '
    f'upper end is below {-MARGIN * 100:+.0f} points, else "{NOT_SHOWN}". The training probe is reported, not judged.'
)


def compare_tools(blocks: list[dict], seed: int = 0) -> dict:
    """{"rule", "blocks", "comparisons": {suite: paired sgls − real or None}, "verdict"}."""
    from ops.experiments.learning.recipe_pairs import paired

    comparisons = {suite: paired(blocks, SIMULATED, REFERENCE, suite, seed) for suite in SUITES}
    return {
        "rule": RULE,
        "comparison": f"{SIMULATED} − {REFERENCE}",
        "blocks": len(blocks),
        "block_facts": [_facts(b["meta"]) for b in blocks],
        "comparisons": comparisons,
        "verdict": verdict(comparisons.get(JUDGED_ON)),
    }


def _facts(meta: dict) -> str:
    budget = f"{meta['trajectories']} trajectories" if meta.get("trajectories") else f"{meta.get('minutes', 0):g} min"
    machine = meta.get("machine", {})
    return (
        f"b{meta['block']} recipe {meta.get('recipe')}, world seed {meta.get('world_seed') or 'none'}, {budget} per "
        f"arm, order {' → '.join(meta.get('order', []))}, {machine.get('cpu', '?')} load "
        f"{machine.get('load_average_1m', '?')} at start"
    )


def verdict(test: dict | None) -> str:
    if test is None:
        return f"no tools block has both arms yet ({SIMULATED} − {REFERENCE} on the {JUDGED_ON} split)"
    lo, hi = test["ci95"]
    figures = f"{SIMULATED} − {REFERENCE} on the {JUDGED_ON} split {_points(test)}"
    if lo > -MARGIN:
        return f"{NOT_WORSE} (margin {MARGIN * 100:.0f} points): {figures}"
    if hi < -MARGIN:
        return f"{WORSE} by more than {MARGIN * 100:.0f} points: {figures}"
    return f"{NOT_SHOWN}: the interval holds {-MARGIN * 100:+.0f} points: {figures}"


def _points(c: dict) -> str:
    lo, hi = c["ci95"]
    return f"{c['diff'] * 100:+.1f} points [{lo * 100:+.1f}, {hi * 100:+.1f}] (+{c['gained']}/−{c['lost']} items)"


def markdown(result: dict) -> list[str]:
    """The report's section: the verdict, the rule, then one row per suite."""
    lines = [
        "## Training on SGLS instead of the real tools (tools-blocks)",
        "",
        f"**Verdict: {result['verdict']}**",
        "",
        f"Rule (fixed before the first tools block): {result['rule']}",
        "",
        f"Blocks: {result['blocks']}" + "".join(f"; {f}" for f in result.get("block_facts", [])),
        "",
        f"| suite | success {SIMULATED} ({REFERENCE}) | Δ {result['comparison']} [95%] |",
        "|---|---|---|",
    ]
    for suite, c in result["comparisons"].items():
        lines.append(
            f"| {suite} | – | no block yet |"
            if c is None
            else f"| {suite} | {c['a']:.3f} ({c['b']:.3f}) | {_points(c)} |"
        )
    return lines
