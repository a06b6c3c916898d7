"""The results of `slca bench learn-vs-trl` from every finished block: `results.json` and `results.md` (the verdict
first) under `--out`.

Per checkpoint and suite (the training probe, the test split): each arm's greedy success against the block's warm
start, and slca − TRL, paired item by item within blocks, averaged over the blocks then the items, with the recipe
sweep's 95% bootstrap interval (`recipe_pairs.paired`: items, and blocks when ≥ 3).

The rule, fixed in code before the first block (`rule`, `judge`), on the training probe — the tasks both arms
trained on: learning per hour is how fast a system turns minutes into success on what it trains on. E is the
largest checkpoint at most half the budget F (30 and 60 minutes by default):
- "reaches": slca at E − TRL at F has a point estimate ≥ 0 and its interval's lower end above −5 points (slca in
  half the minutes is at least as good as TRL at the end, within a margin the interval must clear);
- "ends higher": slca at F − TRL at F has its interval's lower end above 0;
- "target met" when both hold, "target not met" when either difference's interval lies below 0 (its upper end
  under 0), otherwise "not shown"; no verdict before 3 blocks have both arms (the issue's ≥ 3 alternated pairs).
The test split is reported beside it and decides nothing.
"""

from __future__ import annotations

from pathlib import Path

from ops.bench.ab import MIN_PAIRS
from ops.experiments.learning.files import read_json, write_atomic, write_json

JUDGED_ON = "train_probe"
SUITES = ("train_probe", "test")
MARGIN = 0.05
"""How far below TRL's end slca's half-time interval may reach and still count as reaching it: 5 points."""
MIN_BLOCKS = MIN_PAIRS
MET, NOT_MET, NOT_SHOWN, PENDING = "target met", "target not met", "not shown", "not judged yet"


def rule(early: float, full: float) -> str:
    return (
        f"Greedy success on the training probe (the tasks both arms trained on), paired item by item within blocks, "
        f"95% bootstrap interval over items (and blocks when ≥ 3). Target met when slca at {early:g} min − TRL at "
        f"{full:g} min has a point estimate ≥ 0 and a lower end above {-MARGIN * 100:+.0f} points (reaches TRL's "
        f"{full:g}-minute success in {early:g} minutes) AND slca at {full:g} min − TRL at {full:g} min has a lower "
        f"end above 0 (ends higher); not met when either interval lies wholly below 0; otherwise not shown. No "
        f"verdict before {MIN_BLOCKS} blocks (alternated pairs) have both arms. The test split is reported, not judged."
    )


RULE = rule(30, 60)
"""The rule at the default checkpoints (`--minutes 60 --checkpoints 30,60`)."""


def early_mark(marks: list[float]) -> float | None:
    """E: the largest checkpoint at most half the budget (the last mark); None when there is none."""
    half = [m for m in marks if m <= marks[-1] / 2]
    return max(half) if half else None


def judge(reach: dict | None, ends: dict | None, blocks: int) -> str:
    """`MET`, `NOT_MET`, `NOT_SHOWN` or `PENDING` from the two paired differences (`recipe_pairs.paired`)."""
    if reach is None or ends is None or blocks < MIN_BLOCKS:
        return PENDING
    reaches = reach["diff"] >= 0 and reach["ci95"][0] > -MARGIN
    if reaches and ends["ci95"][0] > 0:
        return MET
    if reach["ci95"][1] < 0 or ends["ci95"][1] < 0:
        return NOT_MET
    return NOT_SHOWN


def points(c: dict | None) -> str:
    if c is None:
        return "–"
    lo, hi = c["ci95"]
    return f"{c['diff'] * 100:+.1f} pts [{lo * 100:+.1f}, {hi * 100:+.1f}], {c['gained']} gained / {c['lost']} lost"


def verdict(reach: dict | None, ends: dict | None, early: float, full: float) -> str:
    blocks = min(reach["blocks"], ends["blocks"]) if reach and ends else 0
    outcome = judge(reach, ends, blocks)
    figures = f"slca@{early:g} − trl@{full:g}: {points(reach)}; slca@{full:g} − trl@{full:g}: {points(ends)}"
    if outcome == PENDING:
        return f"{PENDING}: {blocks} of {MIN_BLOCKS} blocks with both arms ({figures})"
    return f"{outcome} ({blocks} blocks): {figures}"


def label(arm: str, minutes: float) -> str:
    """A checkpoint's name in the pairing (`recipe_pairs` pairs named arms): `slca@30`, `trl@60`."""
    return f"{arm}@{minutes:g}"


def read_blocks(out: Path) -> list[dict]:
    """Every block under `<out>/blocks` with its warm start's outcomes and each finished arm's checkpoints' outcomes,
    named by `label` (`recipe_report.read_blocks`, read per arm by `checkpoints_of`)."""
    from ops.bench.learn_vs_trl.arms import BLOCKS
    from ops.experiments.learning.recipe_report import read_blocks as read_sweep_blocks

    return read_sweep_blocks(out, BLOCKS, checkpoints_of)


def checkpoints_of(arm_dir: Path) -> dict:
    """A finished arm's checkpoints: {`label`: {"outcomes": from `items-<minutes>.jsonl`, "run": its `done.json`}}."""
    from ops.experiments.eval.suite import read_jsonl
    from ops.experiments.learning.recipe_report import outcomes

    done = read_json(arm_dir / "done.json")
    if done is None:
        return {}
    return {
        label(done["arm"], c["minutes"]): {
            "outcomes": outcomes(read_jsonl(arm_dir / f"items-{c['minutes']:g}.jsonl")),
            "run": done,
        }
        for c in done["checkpoints"]
    }


def runs(block: dict) -> dict:
    """The block's finished arms' `done.json`, by arm."""
    return {entry["run"]["arm"]: entry["run"] for entry in block["arms"].values()}


def comparisons(blocks: list[dict], marks: list[float]) -> dict:
    """{suite: {minutes: {"slca − warm", "trl − warm", "slca − trl"}}}, each a paired difference or None."""
    from ops.experiments.learning.recipe_pairs import paired

    out: dict = {}
    for suite in SUITES:
        out[suite] = {}
        for m in marks:
            slca, trl = label("slca", m), label("trl", m)
            out[suite][f"{m:g}"] = {
                "slca − warm": paired(blocks, slca, None, suite),
                "trl − warm": paired(blocks, trl, None, suite),
                "slca − trl": paired(blocks, slca, trl, suite),
            }
    return out


def target(blocks: list[dict], marks: list[float]) -> dict:
    """The rule applied: both differences it judges, the verdict and its label."""
    from ops.experiments.learning.recipe_pairs import paired

    early, full = early_mark(marks), marks[-1]
    if early is None:
        return {"rule": None, "verdict": f"no checkpoint at ≤ {full / 2:g} min: the target is not judged"}
    reach = paired(blocks, label("slca", early), label("trl", full), JUDGED_ON)
    ends = paired(blocks, label("slca", full), label("trl", full), JUDGED_ON)
    blocks_both = min(reach["blocks"], ends["blocks"]) if reach and ends else 0
    return {
        "rule": rule(early, full),
        "early": early,
        "full": full,
        "reach": reach,
        "ends_higher": ends,
        "label": judge(reach, ends, blocks_both),
        "verdict": verdict(reach, ends, early, full),
    }


def per_block(blocks: list[dict], marks: list[float]) -> list[dict]:
    """The two differences the rule judges, within each block alone (its interval over items only): how far one
    block's figures could move by the luck of its items, so a block's point estimate is never quoted bare."""
    from ops.experiments.learning.recipe_pairs import paired

    early, full = early_mark(marks), marks[-1]
    if early is None:
        return []
    rows = []
    for block in blocks:
        one = [block]
        rows.append(
            {
                "block": block["meta"].get("block"),
                **{
                    suite: {
                        "reach": paired(one, label("slca", early), label("trl", full), suite),
                        "ends_higher": paired(one, label("slca", full), label("trl", full), suite),
                    }
                    for suite in SUITES
                },
            }
        )
    return rows


def write_report(out: Path) -> dict:
    plan = read_json(out / "plan.json")
    if plan is None:
        print(f"{out}: no block has started (no plan.json)")
        return {}
    blocks = read_blocks(out)
    marks = plan["checkpoints"]
    results = {
        "command": command_line(plan, out),
        "plan": plan,
        "target": target(blocks, marks),
        "comparisons": comparisons(blocks, marks),
        "per_block": per_block(blocks, marks),
        "blocks": [block_facts(b) for b in blocks],
    }
    write_json(out / "results.json", results)
    write_atomic(out / "results.md", markdown(results))
    print(results["target"]["verdict"])
    return results


def command_line(plan: dict, out: Path) -> str:
    """The command that runs a block of this plan (`--block N` for each block; the README's table quotes it)."""
    marks = plan["checkpoints"]
    where = out.as_posix() if not out.is_absolute() else f"<out>/{out.name}"
    extra = "".join(f" --set {item}" for item in plan.get("extra_settings", []))  # global flags: before `bench`
    return (
        f"slca{extra} bench learn-vs-trl --block N --minutes {plan['minutes']:g} --checkpoints "
        f"{','.join(f'{m:g}' for m in marks[:-1])} --probe-size {plan['probe_size']} --pack {plan['pack']} "
        f"--trl-lr {plan['trl']['lr']:g} --out {where}"
    )


def block_facts(block: dict) -> dict:
    """A block's machine, load and order, and per arm its clock, training seconds and each checkpoint's figures."""
    meta = block["meta"]
    keys = ("minutes", "elapsed_s", "version", "steps", "trajectories", "tokens", "eval_seconds")
    return {
        **{k: meta.get(k) for k in ("block", "machine", "order", "started", "finished", "load_average_1m_end")},
        "warm_start": meta.get("warm_start"),
        "arms": {
            name: {
                "clock": run.get("clock"),
                "train_seconds": run.get("train_seconds"),
                "load_average_1m": [run.get("load_average_1m_start"), run.get("load_average_1m_end")],
                "trl": {k: run[k] for k in ("generation", "side") if k in run},
                "checkpoints": [{k: c.get(k) for k in keys} for c in run["checkpoints"]],
            }
            for name, run in runs(block).items()
        },
    }


def markdown(results: dict) -> str:
    """The verdict, the rule, the plan, a table per suite (each checkpoint: both arms against the warm start, and
    slca − TRL), then each block's facts."""
    t = results["target"]
    lines = [
        "# slca vs TRL: learning per hour (`slca bench learn-vs-trl`)",
        "",
        f"**Verdict: {t['verdict']}**",
        "",
        f"Rule (fixed before the first block): {t['rule'] or '–'}",
        "",
        f"Plan: {plan_line(results['plan'])}",
    ]
    for suite, by_mark in results["comparisons"].items():
        lines += [
            "",
            f"## {suite}",
            "",
            "| minutes | slca − warm start | TRL − warm start | slca − TRL |",
            "|---|---|---|---|",
        ]
        for m, c in by_mark.items():
            lines.append(
                f"| {m} | {points(c['slca − warm'])} | {points(c['trl − warm'])} | {points(c['slca − trl'])} |"
            )
    early, full = results["target"].get("early"), results["target"].get("full")
    if results.get("per_block") and early is not None:
        lines += [
            "",
            "## Each block alone",
            "",
            f"| block | suite | slca@{early:g} − TRL@{full:g} | slca@{full:g} − TRL@{full:g} |",
            "|---|---|---|---|",
        ]
        for row in results["per_block"]:
            for suite in SUITES:
                c = row[suite]
                lines.append(f"| b{row['block']} | {suite} | {points(c['reach'])} | {points(c['ends_higher'])} |")
        lines.append("")
        lines.append("Within one block the interval is over its items only; the verdict above pools the blocks.")
    lines += [
        "",
        "## Blocks",
        "",
        "| block | arm | clock | checkpoint (min) | at (min) | steps | trajectories | tokens | load start → end |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for b in results["blocks"]:
        lines += block_rows(b)
    lines += [
        "",
        "Differences in points of greedy success, 95% interval, items gained/lost. Trajectories: slca's learner "
        "lines' `trajectories_trained`; TRL's completions of its updates after its cold first step. Per-item "
        "records under `blocks/b*/arms/*/items-<minutes>.jsonl`; machine, order and times in `results.json`.",
    ]
    return "\n".join(lines) + "\n"


def plan_line(plan: dict) -> str:
    trl = plan["trl"]
    return (
        f"{plan['minutes']:g} min per arm, checkpoints {', '.join(f'{m:g}' for m in plan['checkpoints'])}; "
        f"{plan['probe_size']} training-probe tasks of pack {plan['pack']}, groups of {plan['group_size']}; slca: "
        f"recipe {plan['slca']['recipe']}; TRL: lr {trl['lr']:g}, steps_per_generation {trl['steps_per_generation']}, "
        f"IS correction {'on' if trl['is_correction'] else 'off'}; judged greedily ({plan['eval_engine']}, "
        f"{plan['eval_max_tokens']} tokens a turn)"
    )


def block_rows(block: dict) -> list[str]:
    machine = block.get("machine") or {}
    rows = []
    for name in block.get("order") or []:
        run = block["arms"].get(name)
        if run is None:
            continue
        load = " → ".join(str(x) for x in run["load_average_1m"])
        for c in run["checkpoints"]:
            rows.append(
                f"| b{block['block']} ({machine.get('cpu', '?')}) | {name} | {run['clock']} | {c['minutes']:g} | "
                f"{c['elapsed_s'] / 60:.1f} | {c['steps']} | {c['trajectories']} | {c['tokens']} | {load} |"
            )
    return rows
