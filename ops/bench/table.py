"""The README's performance table, made by code from the committed bench results (`slca bench table`).

One row per side-by-side comparison in `bench/*/ab` (the results of `ops.bench.ab`'s method): the median ratio
B ÷ A over the pairs, its spread (min–max and the order-statistic interval with its coverage), the pairs, the
load average at start → end, the CPU flags and the command. `slca bench swap` is not a ratio: its row gives
its latencies and failures. A bench whose `ab` result is missing says so instead of quoting an older figure.

The block sits between two markers in README.md; `slca bench table --write` rewrites it, and a test fails when
the README's block differs from what the committed results give (a hand-edited or stale table)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

START = "<!-- bench-table: written by `slca bench table --write` from bench/*/ab; do not edit by hand -->"
END = "<!-- /bench-table -->"
HEADER = [
    "| bench | B ÷ A (figure) | median | min–max | interval (coverage) | pairs | load start → end | CPU flags |",
    "|---|---|---|---|---|---|---|---|",
]


@dataclass(frozen=True)
class Source:
    bench: str
    path: str
    """results.json, relative to the repository root."""
    rows: Callable[[dict], list[str]]
    note: str = ""
    """What a reader must know that the results file cannot say (appended to each row's description)."""


def _load(m: dict) -> str:
    return f"{m['load_average'][0]:g}" if m and m.get("load_average") else "—"


def _flags(m: dict) -> str:
    return ", ".join(m.get("cpu_flags") or []) or "—"


def _ab_row(bench: str, what: str, ab: dict) -> str:
    if ab.get("median_ratio") is None:
        return f"| {bench} | {what} | — | — | — | {ab.get('pairs', '—')} | — | — |"
    lo, hi = ab["interval"]
    return (
        f"| {bench} | {what} | **{ab['median_ratio']:.2f}×** | {ab['min_ratio']:.2f}–{ab['max_ratio']:.2f} | "
        f"{lo:.2f}–{hi:.2f} ({ab['interval_coverage']:.0%}) | {ab['pairs']} | "
        f"{_load(ab['machine_start'])} → {_load(ab['machine_end'])} | {_flags(ab['machine_start'])} |"
    )


def sft_rows(data: dict) -> list[str]:
    return [_ab_row("sft", "new warm-start loop ÷ old (real tokens/s)", data["ab"])]


def rl_rows(data: dict) -> list[str]:
    engine = data.get("serve_engine", "?")
    trl = {"vllm-colocate": "vLLM colocate", "hf": "HF generate"}.get(data.get("trl_generation", "hf"), "?")
    # settings beyond the engine (e.g. the hf prefix cache) belong in the row's name: they are what differs
    extra = [s for s in data.get("pipeline_sets", []) if not s.startswith("serve.engine=")]
    engine = ", ".join([f"{engine} engine", *extra])
    if data.get("as_shipped"):  # slca as `slca up` ships it: the memory target is judged in the same run
        engine += ", as shipped"
    what = f"slca ({engine}) ÷ TRL GRPOTrainer ({trl}) (trained tokens/hour)"
    if data.get("as_shipped"):
        what += f"; slca's peak RSS (all processes, summed) {slca_peak_gib(data):.2f} GiB"
        if pss := slca_peak_gib(data, "peak_pss_gib"):
            what += f", PSS (shared pages once) {pss:.2f} GiB"
    return [_ab_row("rl", what, data["ab"])]


def slca_peak_gib(data: dict, key: str = "peak_rss_gib") -> float:
    """slca's largest whole-pipeline peak (`key`: RSS, or PSS where recorded) over the pairs (or blocks) of an rl
    result; 0 where none was recorded."""
    windows = data.get("pairs") or data.get("blocks") or []
    return max((w["slca"].get(key) or 0.0 for w in windows if "slca" in w), default=0.0)


def ablation_rows(data: dict) -> list[str]:
    """`slca bench rl --arms`: the headline slca ÷ TRL of the parents' windows, then each ablation's gain over
    its parent in the same blocks (what that optimisation buys)."""
    rows = rl_rows(data)
    for name, a in data.get("ablations", {}).items():
        s = a.get("gain_spread") or {}  # an A/B summary's shape, so `_ab_row` writes it as every ratio row
        gain = {"median_ratio": s.get("median"), "min_ratio": s.get("min"), "max_ratio": s.get("max")}
        gain |= {"interval": s.get("interval"), "interval_coverage": s.get("interval_coverage")}
        gain |= {"pairs": len(a["gain"]), "machine_start": data["ab"]["machine_start"]}
        what = f"ablation {name}: gain of what it removes, {a['gain_is']} (trained tokens/hour) — {a['change']}"
        rows.append(_ab_row("rl-ablation", what, gain | {"machine_end": data["ab"]["machine_end"]}))
    return rows


def learning_rows(data: dict) -> list[str]:
    """`slca bench learn-vs-trl`: a difference in greedy success, not a ratio; the row gives the verdict of its
    rule with both judged differences and the blocks behind them."""
    t, blocks = data["target"], data.get("blocks", [])
    flags = _flags((blocks[0].get("machine") or {}) if blocks else {})
    both = min((t.get(k) or {}).get("blocks", 0) for k in ("reach", "ends_higher"))  # the rule's own count
    what = f"slca vs TRL GRPOTrainer, same minutes: {t['verdict']}"
    return [f"| learning | {what} | — | — | — | {both} | — | {flags} |"]


def serve_rows(data: dict) -> list[str]:
    return [
        _ab_row("serve", f"{row['target']} ÷ vLLM's server, {row['comparison']}, {row['clients']} clients", row)
        for row in data["rows"]
    ]


def memory_rows(bench: str, subject: str) -> Callable[[dict], list[str]]:
    """The rows of a settings A/B that records each side's peak RSS (`ops.bench.learner_memory.run_memory_ab`)."""

    def rows(data: dict) -> list[str]:
        peaks = data.get("peak_rss_mib", {})
        a, b = (max(peaks.get(data[side], [0])) for side in ("a", "b"))
        what = f"{subject}, {data['b']} ÷ {data['a']} (trained tokens/s); peak RSS {b:,.0f} vs {a:,.0f} MiB"
        return [_ab_row(bench, what, data)]

    return rows


def swap_rows(data: dict) -> list[str]:
    what = (
        f"hot swap under load, {data['versions']} versions: swap p50 {data['latency_p50_s']:.2f} s (max "
        f"{data['latency_max_s']:.2f}), publish → first token p50 {data['end_to_end_p50_s']:.2f} s (max "
        f"{data['end_to_end_max_s']:.2f}), {data['failed_swaps']} failed swaps, {data['failed']} of "
        f"{data['requests']} requests failed"
    )
    return [
        f"| swap | {what} | — | — | — | — | {_load(data['machine_start'])} → {_load(data['machine_end'])} | "
        f"{_flags(data['machine_start'])} |"
    ]


def shared_prefill_rows(data: dict) -> list[str]:
    what = f"hf engine, {data['b']} ÷ {data['a']} (generated tokens/s, groups of {data['group_size']} requests)"
    return [_ab_row("serve-hf", what, data)]


BEFORE_RECIPE = "measured before the 2026-12-05 learner recipe: 1 group a step, no difficulty screening"
"""The RL comparisons of 2026-12-03: slca's learner then trained every group of non-zero advantage, one a step."""

SOURCES = (
    Source("sft", "bench/sft/ab/results.json", sft_rows),
    Source("serve", "bench/serve/ab/results.json", serve_rows),  # AVX2 only: fp32 on both sides
    Source("serve", "bench/serve/ab-bf16/results.json", serve_rows),  # native bf16: bf16 on both sides
    Source("serve-hf", "bench/serve/shared-prefill/results.json", shared_prefill_rows),  # one engine, a setting
    Source("rl", "bench/rl/ab-hf/results.json", rl_rows, BEFORE_RECIPE),  # transformers generation on both sides
    Source("rl", "bench/rl/ab-vllm/results.json", rl_rows, BEFORE_RECIPE),  # vLLM on both sides (TRL's colocate mode)
    Source("rl", "bench/rl/ab-hf-prefix-cache/results.json", rl_rows, BEFORE_RECIPE),  # transformers, prefix cache
    Source("rl", "bench/rl/ab-hf-threads/results.json", rl_rows, BEFORE_RECIPE),  # transformers, 1 thread a process
    Source("rl", "bench/rl/as-shipped/results.json", rl_rows),  # slca as shipped: the 2× and the 6 GiB in one run
    Source("rl", "bench/rl/as-shipped-avx2/results.json", rl_rows),  # the same on a CPU without AVX-512
    Source("rl", "bench/rl/ablations-vllm/results.json", ablation_rows),  # which optimisation buys what
    Source("serve", "bench/serve/ab-tools/results.json", serve_rows),  # tool-calling prompts, 2-minute windows
    Source("learning", "bench/learning/vs-trl/results.json", learning_rows),  # greedy success after equal minutes
    Source("swap", "bench/swap/ab/results.json", swap_rows),
    Source("learner-memory", "bench/learner-memory/avx2/results.json", memory_rows("learner-memory", "learner step")),
    Source(
        "sft-memory", "bench/sft/checkpointing-avx2/results.json", memory_rows("sft-memory", "warm start (slca sft)")
    ),
)


def _with_note(row: str, note: str) -> str:
    """`row` with `note` at the end of its description (the second cell)."""
    if not note:
        return row
    cells = row.split(" | ")
    cells[1] += f" ({note})"
    return " | ".join(cells)


def render(root: Path) -> str:
    """The block (markers included) from the results under `root`."""
    rows, commands = [], []
    for source in SOURCES:
        path = root / source.path
        if not path.is_file():
            rows.append(
                f"| {source.bench} | not yet measured with the method (`{source.path}` missing) | — | — | — "
                "| — | — | — |"
            )
            continue
        data = json.loads(path.read_text())
        rows += [_with_note(row, source.note) for row in source.rows(data)]
        commands.append(f"- {source.bench}: `{data.get('command', '?')}` → `{Path(source.path).parent.as_posix()}/`")
    return "\n".join([START, *HEADER, *rows, "", "Commands:", "", *commands, END])


def _span(text: str) -> tuple[int, int]:
    """Where the block starts and where it ends (after its end marker); a text without the markers is refused."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README has no block between {START!r} and {END!r}")
    return start, end + len(END)


def replace_block(text: str, block: str) -> str:
    """`text` with its block between the markers replaced."""
    start, end = _span(text)
    return text[:start] + block + text[end:]


def current_block(text: str) -> str:
    start, end = _span(text)
    return text[start:end]


def run_table(args, root: Path) -> int:
    block = render(root)
    if args.write:
        readme = root / "README.md"
        readme.write_text(replace_block(readme.read_text(), block))
        print(f"README.md: performance table rewritten from {len(SOURCES)} bench results")
    else:
        print(block)
    return 0
