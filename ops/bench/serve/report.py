"""Figures of one measurement, the table (ratios to vLLM's own server at the same concurrency) and the JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from ops.bench.common import percentile
from ops.bench.serve.load import Sample

BASELINE = "vllm-server"
"""The target every row is compared with: vLLM's own OpenAI server (its chat API)."""


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
    return Figures(target, api, clients, len(samples), len(errors), tokens, seconds,
                   tokens / seconds if seconds else 0.0, len(ok) / seconds if seconds else 0.0,
                   percentile(ttfts, 50), percentile(ttfts, 95), percentile(latencies, 50), percentile(latencies, 95),
                   errors[0] if errors else None)  # fmt: skip


def ratio(row: Figures, rows: list[Figures]) -> float | None:
    """tokens/s of `row` ÷ vLLM's own server's chat API at the same concurrency (None without a baseline)."""
    base = next((r for r in rows if r.target == BASELINE and r.clients == row.clients), None)
    return row.tokens_per_s / base.tokens_per_s if base and base.tokens_per_s else None


def _ms(v: float | None) -> str:
    return f"{v * 1000:.0f}" if v is not None else "—"


HEADER = ("| target | api | clients | requests | failed | tokens | tok/s | ÷ vLLM server | req/s | TTFT p50 ms | "
          "TTFT p95 ms | latency p50 ms | latency p95 ms |\n|" + "---|" * 13)  # fmt: skip


def table_row(row: Figures, rows: list[Figures]) -> str:
    r = ratio(row, rows)
    return (f"| {row.target} | {row.api} | {row.clients} | {row.requests} | {row.failed} | {row.tokens} | "
            f"{row.tokens_per_s:.1f} | {f'{r:.2f}×' if r is not None else '—'} | {row.requests_per_s:.2f} | "
            f"{_ms(row.ttft_p50_s)} | {_ms(row.ttft_p95_s)} | {_ms(row.latency_p50_s)} | {_ms(row.latency_p95_s)} |")  # fmt: skip


def write(out: Path, rows: list[Figures], header: dict, notes: list[str]) -> None:
    """`table.md` and `results.json` (no machine paths: the caller passes model names, not directories)."""
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"# slca bench serve\n", *(f"- {k}: {v}" for k, v in header.items()), "", HEADER,
             *(table_row(r, rows) for r in rows), "", *(f"- {n}" for n in notes)]  # fmt: skip
    (out / "table.md").write_text("\n".join(lines) + "\n")
    results = {**header, "notes": notes, "rows": [{**asdict(r), "ratio_to_vllm_server": ratio(r, rows)} for r in rows]}
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
