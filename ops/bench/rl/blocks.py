"""`slca bench rl --arms …`: every arm (`ops.bench.rl.arms`) once per block, `--pairs` blocks, the order alternating
block by block; resumable from `windows.jsonl` as the two-sided run is. The headline slca ÷ TRL is read from the
parents' windows as an `ops.bench.ab` result (the same verdict and table as without arms); each ablation is reported
against its parent in the same block (`arms.gains`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from ops.bench.ab import ABResult, ResumeLog, Window, machine_identity, machine_now, markdown, resume_path
from ops.bench.rl.arms import ARMS, block_orders, gain_lines, gains, slca_over_trl_arms
from ops.bench.rl.report import SideResult, ratio_spread, ratios, slca_peaks_gib, table, verdict, where_time_goes

WINDOWS_FILE = "windows.jsonl"
SPEC_KEYS = ("model", "pack", "group_size", "max_new_tokens", "minutes_per_window", "precision", "lr")


def run_blocks(
    args,
    arms: list[str],
    trl_spec,
    slca_spec: Callable,
    log_dir: Path,
    common: dict,
    run_trl: Callable,
    run_slca: Callable,
) -> tuple[list[str], dict]:
    """Measure the windows still missing (`args.pairs` blocks of `arms`), then the report: (lines, data).
    `slca_spec(trl_result)` gives the pipeline's spec for a block (TRL's measured wall time, when it ran first);
    `run_trl(spec, where)` and `run_slca(spec, where)` measure one window."""
    orders = block_orders(arms, args.pairs, args.order, args.seed)
    log = ResumeLog(
        resume_path(args.out, WINDOWS_FILE),
        {
            **{k: common[k] for k in SPEC_KEYS},
            "pipeline_sets": common["pipeline_sets"],
            "arms": arms,
            "machine": machine_identity(),
        },
    )
    results: dict[tuple[int, str], SideResult] = {
        (r["block"], r["arm"]): SideResult.from_dict(r["result"]) for r in log.load()
    }
    if results:
        print(f"resuming: {len(results)} window(s) already measured in {WINDOWS_FILE}", flush=True)
    machine_start = machine_now()
    for i, order in enumerate(orders):
        for position, name in enumerate(order):
            if (i, name) in results:
                continue
            arm = ARMS[name]
            where = log_dir / f"block{i + 1}-{name}"
            print(f"block {i + 1}: {name} window", flush=True)
            if arm.side == "trl":
                r = run_trl(replace(trl_spec, **arm.trl), where)
            else:
                spec = slca_spec(results.get((i, "trl")))
                r = run_slca(replace(spec, extra_sets=(*spec.extra_sets, *arm.slca_sets)), where)
            results[i, name] = replace(r, name=name)
            log.add({"block": i, "arm": name, "position": position, "result": results[i, name].to_dict()})
    return report(args, arms, orders, results, common, machine_start)


def headline(orders: list[list[str]], results: dict, machine_start: dict, order: str, seed: int) -> ABResult:
    """The parents' windows as an A/B result (A = TRL, B = slca; figure trained tokens/hour)."""
    windows, pair_orders = [], []
    for i, block in enumerate(orders):
        first = ["trl", "slca"] if block.index("trl") < block.index("slca") else ["slca", "trl"]
        pair_orders.append(["A", "B"] if first[0] == "trl" else ["B", "A"])
        for name in ("trl", "slca"):
            r = results[i, name]
            windows.append(
                Window(
                    i, first.index(name), name, r.trained_tokens_per_s * 3600, r.trained_tokens, r.seconds, r.steps, {}
                )
            )
    return ABResult(
        "trl", "slca", len(orders), order, seed if order == "random" else None, pair_orders, 0, windows,
        machine_start, machine_now(),
    )  # fmt: skip


def report(args, arms: list[str], orders, results, common: dict, machine_start: dict) -> tuple[list[str], dict]:
    blocks = len(orders)
    ab = headline(orders, results, machine_start, args.order, args.seed)
    summary = ab.summary()
    per_pair = [ratios(results[i, "slca"], results[i, "trl"]) for i in range(blocks)]
    by_ablation = gains(results, arms, blocks)
    versus = slca_over_trl_arms(results, arms, blocks)
    peak_gib, peak_pss_gib = slca_peaks_gib(results, blocks)
    lines = [
        f"method: {blocks} blocks of {common['minutes_per_window']:g}-minute windows, arms {', '.join(arms)} once "
        f"per block, order {args.order} (each block reversed after the one before with 'alternate'); each window "
        "after its arm's start-up and cold first step",
        *verdict(summary["median_ratio"], summary["interval"], summary["interval_coverage"], peak_gib, peak_pss_gib),
        *gain_lines(by_ablation, versus, blocks),
    ]
    for i, block in enumerate(orders):
        lines += [f"block {i + 1} ({' → '.join(block)}):", *table([results[i, "trl"], results[i, "slca"]])]
        lines += [
            f"  {n}: trained tokens/s {results[i, n].trained_tokens_per_s:,.1f}"
            for n in block
            if n not in ("trl", "slca")
        ]
    lines += where_time_goes(results[0, "slca"])
    for note in dict.fromkeys(f"  note ({s.name}): {n}" for s in results.values() for n in s.notes):
        lines.append(note)
    data = {
        **common,
        "arms": {n: {k: v for k, v in asdict(ARMS[n]).items() if k != "name"} for n in arms},
        "method": f"{blocks} blocks, every arm once per block, order {args.order}; figure trained tokens/hour; "
        "ab: the parents' windows (B = slca over A = TRL); ablations: each against its parent in the same block",
        "ab": ab.to_dict(),
        "ratios_slca_over_trl": ratio_spread(per_pair),
        "ablations": by_ablation,
        "slca_over_trl_arms": versus,
        "blocks": [
            {"block": i + 1, "order": block, **{n: results[i, n].to_dict() for n in block}}
            for i, block in enumerate(orders)
        ],
    }
    return lines + ["", *markdown(ab, "trained tokens/hour")], data
