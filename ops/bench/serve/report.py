"""Figures of one side's windows, one alternated comparison (ops/bench/ab.py) per row, the table and the JSON
(written by `ops.bench.ab.write`: no machine paths)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from ops.bench.ab import ABResult
from ops.bench.ab import write as write_checked
from ops.bench.common import percentile
from ops.bench.serve.load import Sample

BASELINE = "vllm-server"
"""The default baseline every target is compared with: vLLM's own OpenAI server (its chat API)."""
COMPARISONS = ("chat-stream", "chat-whole", "agent")


@dataclass
class Figures:
    target: str
    api: str
    clients: int
    requests: int
    failed: int
    tokens: int
    seconds: float
    tokens_per_s: float
    requests_per_s: float
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    latency_p50_s: float | None
    latency_p95_s: float | None
    first_error: str | None = None
    prompt_tokens_p50: float | None = None
    """The median (first) prompt's tokens as the server counted them: both sides' prompts are the same size."""


def summarise(target: str, api: str, clients: int, samples: list[Sample], seconds: float) -> Figures:
    ok = [s for s in samples if s.error is None]
    ttfts = [s.ttft_s for s in ok if s.ttft_s is not None]
    latencies = [s.latency_s for s in ok]
    tokens = sum(s.tokens for s in ok)
    errors = [s.error for s in samples if s.error is not None]
    return Figures(
        target,
        api,
        clients,
        len(samples),
        len(errors),
        tokens,
        seconds,
        tokens / seconds if seconds else 0.0,
        len(ok) / seconds if seconds else 0.0,
        percentile(ttfts, 50),
        percentile(ttfts, 95),
        percentile(latencies, 50),
        percentile(latencies, 95),
        errors[0] if errors else None,
        percentile([s.prompt_tokens for s in ok if s.prompt_tokens is not None], 50),
    )


@dataclass
class Comparison:
    """One target against the baseline, one comparison, one concurrency: alternated windows."""

    target: str
    comparison: str
    clients: int
    a: Figures
    """The baseline's figures over all its measured windows."""
    b: Figures
    result: ABResult

    @classmethod
    def from_dict(cls, data: dict) -> "Comparison":
        """The inverse of `to_dict`: a row read back when the bench resumes."""
        return cls(
            data["target"],
            data["comparison"],
            data["clients"],
            Figures(**data["baseline"]),
            Figures(**data["measured"]),
            ABResult.from_dict(data),
        )

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.target, self.comparison, self.clients)

    def to_dict(self) -> dict:
        return {
            "target": self.target,
            "comparison": self.comparison,
            "clients": self.clients,
            "baseline": asdict(self.a),
            "measured": asdict(self.b),
            **self.result.to_dict(),
        }


def _ms(v: float | None) -> str:
    return f"{v * 1000:.0f}" if v is not None else "—"


def _x(v: float | None) -> str:
    return f"{v:.2f}×" if v is not None else "—"


HEADER = (
    "| target | comparison | clients | pairs | baseline tok/s | target tok/s | ÷ baseline (median) | interval "
    "| min–max | failed | TTFT p50 ms base / target | latency p50 ms base / target |\n|" + "---|" * 12
)


def table_row(row: Comparison) -> str:
    s = row.result.summary()
    interval = f"{s['interval'][0]:.2f}–{s['interval'][1]:.2f} ({s['interval_coverage']:.0%})" if s["interval"] else "—"
    spread = f"{s['min_ratio']:.2f}–{s['max_ratio']:.2f}" if s["min_ratio"] is not None else "—"
    return (
        f"| {row.target} | {row.comparison} | {row.clients} | {row.result.pairs} | {s['median_a']:.1f} | "
        f"{s['median_b']:.1f} | {_x(s['median_ratio'])} | {interval} | {spread} | {row.a.failed} / {row.b.failed} | "
        f"{_ms(row.a.ttft_p50_s)} / {_ms(row.b.ttft_p50_s)} | {_ms(row.a.latency_p50_s)} / "
        f"{_ms(row.b.latency_p50_s)} |"
    )


def claim(row: Comparison) -> str:
    """What the row supports, read from its lowest pair, not its median: every pair's ratio is at least that one,
    so 'faster' is claimed only where the lowest pair is above 1."""
    s = row.result.summary()
    where = f"{row.target} {row.comparison}, {row.clients} client(s)"
    low = s["min_ratio"]
    if low is None:
        return f"{where}: no claim (no pair has a ratio)"
    if low > 1:
        verdict = f"faster than the baseline in every pair, by ≥ {100 * (low - 1):.1f}%"
    elif low == 1:
        verdict = "as fast as the baseline at least, not faster in every pair"
    else:
        verdict = f"NOT faster in every pair: the lowest pair is {100 * (1 - low):.1f}% slower"
    return f"{where}: ≥ {low:.3f}× the baseline's tokens/s in all {len(s['ratio_b_over_a'])} pairs ({verdict})"


def write(out: Path, rows: list[Comparison], header: dict, notes: list[str]) -> None:
    """`table.md` and `results.json` (refused, nothing written, if any machine path is in them)."""
    lines = [
        *(f"- {k}: {v}" for k, v in header.items() if k != "command"),
        "",
        HEADER,
        *(table_row(r) for r in rows),
        "",
        "What the lowest pair supports (the only claim these rows make):",
        "",
        *(f"- {claim(r)}" for r in rows),
        "",
        *(f"- {n}" for n in notes),
    ]
    data = {**header, "notes": notes, "rows": [{**r.to_dict(), "claim": claim(r)} for r in rows]}
    write_checked(out, data, lines, "slca bench serve")
