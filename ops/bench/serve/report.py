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


def write(out: Path, rows: list[Comparison], header: dict, notes: list[str]) -> None:
    """`table.md` and `results.json` (refused, nothing written, if any machine path is in them)."""
    lines = [
        *(f"- {k}: {v}" for k, v in header.items() if k != "command"),
        "",
        HEADER,
        *(table_row(r) for r in rows),
        "",
        *(f"- {n}" for n in notes),
    ]
    write_checked(out, {**header, "notes": notes, "rows": [r.to_dict() for r in rows]}, lines, "slca bench serve")
