"""The arms of `slca bench rl --arms` (issue 40): the two parents — TRL's `GRPOTrainer` as its defaults and slca's
pipeline as configured — and ablations, each one change away from its parent, measured in the same blocks as the
parents (every arm once per block, the order alternating block by block), so that the report can say which
optimisation buys what: each ablation's trained tokens per hour against its parent's in the same block.

An ablation either takes an optimisation away from slca (its gain is parent ÷ ablation: what the optimisation buys
slca) or gives TRL what it lacks (its gain is ablation ÷ parent: what TRL would win with it); the report states
which, with the spread over the blocks.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field

from ops.bench.ab import ORDERS, median_interval
from ops.bench.rl.report import GIB, SideResult

PARENTS = ("trl", "slca")


@dataclass(frozen=True)
class Arm:
    name: str
    side: str
    """'trl' or 'slca': which runner measures it."""
    parent: str | None
    """The arm it differs from by one change (None: a parent)."""
    change: str
    """The change, in words (for the report)."""
    gain: str = "parent/arm"
    """'parent/arm': the parent has the optimisation (slca's), 'arm/parent': the arm adds one to TRL."""
    trl: dict = field(default_factory=dict)
    """`TrlSpec` fields the arm sets."""
    slca_sets: tuple[str, ...] = ()
    """`--set section.field=value` the arm adds to the pipeline's."""


ARMS: dict[str, Arm] = {
    a.name: a
    for a in (
        Arm("trl", "trl", None, "TRL's GRPOTrainer, its defaults but for what both sides share"),
        Arm("slca", "slca", None, "slca's pipeline as configured"),
        Arm(
            "slca-share-prefix-off",
            "slca",
            "slca",
            "learner.share_prefix=false: every member of a group runs the group's prompt in the learner, as TRL's "
            "rows do",
            slca_sets=("learner.share_prefix=false",),
        ),
        Arm(
            "trl-is-off",
            "trl",
            "trl",
            "vllm_importance_sampling_correction=False: no no-grad forward per step for the vLLM logprob correction "
            "(slca's learner has none)",
            gain="arm/parent",
            trl={"is_correction": False},
        ),
        Arm(
            "trl-spg4",
            "trl",
            "trl",
            "steps_per_generation=4: one generation batch of 4 groups feeds 4 optimizer steps (TRL's default 1 "
            "generates 8, trains, generates again)",
            gain="arm/parent",
            trl={"steps_per_generation": 4},
        ),
    )
}
ABLATIONS = tuple(n for n, a in ARMS.items() if a.parent is not None)


def parse_arms(text: str | None, trl_generation: str) -> list[str]:
    """The arms to run: both parents, then the ablations named (comma-separated; 'all': every one), in the order
    named. An ablation that changes nothing on this generation engine is refused."""
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    if names == ["all"]:
        names = list(ABLATIONS)
    unknown = [n for n in names if n not in ARMS]
    if unknown:
        raise ValueError(f"--arms {', '.join(unknown)}: known ablations are {', '.join(ABLATIONS)} (or 'all')")
    if "trl-is-off" in names and trl_generation != "vllm-colocate":
        raise ValueError(
            "--arms trl-is-off: TRL's importance-sampling correction acts only with its vLLM generation "
            f"(--trl-generation vllm-colocate), not {trl_generation}: the arm would equal its parent"
        )
    return [*PARENTS, *dict.fromkeys(n for n in names if n not in PARENTS)]


def block_orders(arms: list[str], blocks: int, order: str = "alternate", seed: int = 0) -> list[list[str]]:
    """Each block's order of the arms: as given, then reversed, and so on ('alternate': a drift of the machine
    over a block lands on every arm alike over two blocks), or shuffled per block by `random.Random(seed)`."""
    if order not in ORDERS:
        raise ValueError(f"order {order!r}: one of {', '.join(ORDERS)}")
    if order == "alternate":
        return [list(arms) if i % 2 == 0 else list(reversed(arms)) for i in range(blocks)]
    rng = random.Random(seed)
    return [rng.sample(list(arms), len(arms)) for _ in range(blocks)]


def spread(values: list[float | None]) -> dict | None:
    """Median, min, max and the order-statistic interval of the median (`ops.bench.ab.median_interval`) of the
    values that exist; None without any."""
    xs = [v for v in values if v is not None]
    if not xs:
        return None
    low, high, coverage = median_interval(xs)
    return {
        "median": statistics.median(xs),
        "min": min(xs),
        "max": max(xs),
        "interval": [low, high],
        "interval_coverage": round(coverage, 4),
    }


def _rate(result: SideResult) -> float:
    return result.trained_tokens_per_s


def block_ratios(results: dict[tuple[int, str], SideResult], blocks: int, num: str, den: str) -> list[float | None]:
    """`num` ÷ `den` trained tokens per hour in each block (None where `den` trained nothing)."""
    out: list[float | None] = []
    for i in range(blocks):
        d = _rate(results[i, den])
        out.append(_rate(results[i, num]) / d if d else None)
    return out


def gains(results: dict[tuple[int, str], SideResult], arms: list[str], blocks: int) -> dict[str, dict]:
    """Per ablation: its ratio to its parent per block, the gain (see `Arm.gain`) with its spread, and what its
    forward passes ran: all tokens and prompt tokens per trained token, and its peak RSS, per block."""
    out = {}
    for name in arms:
        arm = ARMS[name]
        if arm.parent is None:
            continue
        ratio = block_ratios(results, blocks, name, arm.parent)
        gain = ratio if arm.gain == "arm/parent" else [1 / r if r else None for r in ratio]
        out[name] = {
            "parent": arm.parent,
            "change": arm.change,
            "gain_is": "ablation ÷ parent" if arm.gain == "arm/parent" else "parent ÷ ablation",
            "ratio_over_parent": ratio,
            "gain": gain,
            "gain_spread": spread(gain),
            "tokens_run_per_trained_token": {
                n: [_per_trained(results[i, n], "model_tokens_trained") for i in range(blocks)]
                for n in (arm.parent, name)
            },
            "prompt_tokens_per_trained_token": {
                n: [_per_trained(results[i, n], "prompt_tokens_trained") for i in range(blocks)]
                for n in (arm.parent, name)
            },
            "peak_rss_gib": {
                n: [round(results[i, n].peak_rss_bytes / GIB, 3) for i in range(blocks)] for n in (arm.parent, name)
            },
        }
    return out


def _per_trained(result: SideResult, key: str) -> float | None:
    return round(getattr(result, key) / result.trained_tokens, 3) if result.trained_tokens else None


def slca_over_trl_arms(results: dict[tuple[int, str], SideResult], arms: list[str], blocks: int) -> dict[str, dict]:
    """slca ÷ each TRL arm per block with its spread: the headline against TRL as configured by each ablation."""
    out = {}
    for name in arms:
        if ARMS[name].side == "trl":
            ratio = block_ratios(results, blocks, "slca", name)
            out[name] = {"per_block": ratio, "spread": spread(ratio)}
    return out


def _x(s: dict | None) -> str:
    if s is None:
        return "— (no block has the ratio)"
    return (
        f"{s['median']:.2f}× (min–max {s['min']:.2f}–{s['max']:.2f}; {s['interval_coverage']:.0%} interval "
        f"{s['interval'][0]:.2f}–{s['interval'][1]:.2f})"
    )


def gain_lines(by_ablation: dict[str, dict], versus: dict[str, dict], blocks: int) -> list[str]:
    """Which optimisation buys what, one line per ablation (median over the blocks, its range and interval), and
    slca ÷ each TRL arm."""
    lines = [f"  which optimisation buys what (trained tokens/hour, {blocks} blocks, each arm once per block):"]
    for name, g in by_ablation.items():
        runs = g["tokens_run_per_trained_token"]
        median_runs = {n: _median(v) for n, v in runs.items()}
        lines.append(f"    {name} ({g['gain_is']}) = {_x(g['gain_spread'])}")
        lines.append(f"      change: {g['change']}")
        lines.append(
            "      tokens run per trained token (median): "
            + ", ".join(f"{n} {_num(v)}" for n, v in median_runs.items())
        )
    lines.append("  slca ÷ each TRL arm (trained tokens/hour):")
    lines += [f"    slca ÷ {name} = {_x(v['spread'])}" for name, v in versus.items()]
    return lines


def _median(values: list[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return statistics.median(xs) if xs else None


def _num(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}"
