"""`slca bench swap` arithmetic and output: swap latency per published version, failed requests, mixed-version
share; a table and a JSON file (no machine paths).

Swap latency of version v = (the earliest moment a response proves that a token of version ≥ v exists) − (the
moment v was announced). A response with policy version ≥ v that finished at t proves a token sampled by v (or a
later version, which is only loaded after v was announced: the server never goes back) existed by t; the
bench's canary requests (one token each, back to back) bound how late that proof can come."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from ops.bench.common import percentile


@dataclass
class Published:
    version: int
    announced_at: float
    """time.monotonic() right after `learner.publish.publish` returned (it announces, then prunes old versions)."""
    publish_s: float
    """Seconds `publish` took: write the weights, hash them, announce."""


@dataclass
class Response:
    kind: str
    """'agent' (a rollout of the steady load) or 'canary' (a one-token chat request)."""
    finished_at: float
    ok: bool
    version: int | None = None
    mixed: bool = False
    """Agent runs: the trajectory is flagged mixed-version (a swap landed while it was being sampled)."""
    error: str | None = None


@dataclass
class SwapSummary:
    versions: int
    swaps_seen: int
    latency_p50_s: float | None
    latency_p99_s: float | None
    latency_max_s: float | None
    latencies_s: list[float]
    requests: int
    failed: int
    trajectories: int
    mixed: int
    mixed_share: float | None
    publish_p50_s: float | None
    first_error: str | None = None


def swap_latencies(published: list[Published], responses: list[Response]) -> list[float | None]:
    """Per published version, its swap latency (None: no response ever showed it or a later version)."""
    served = sorted((r.finished_at, r.version) for r in responses if r.ok and r.version is not None)
    out: list[float | None] = []
    for p in published:
        proof = next((t for t, v in served if v >= p.version and t >= p.announced_at), None)
        out.append(proof - p.announced_at if proof is not None else None)
    return out


def summarise(published: list[Published], responses: list[Response]) -> SwapSummary:
    latencies = swap_latencies(published, responses)
    seen = [x for x in latencies if x is not None]
    trajectories = [r for r in responses if r.kind == "agent" and r.ok]
    mixed = sum(r.mixed for r in trajectories)
    errors = [r.error for r in responses if not r.ok]
    return SwapSummary(
        versions=len(published), swaps_seen=len(seen), latency_p50_s=percentile(seen, 50),
        latency_p99_s=percentile(seen, 99), latency_max_s=max(seen) if seen else None,
        latencies_s=[round(x, 4) for x in seen], requests=len(responses), failed=len(errors),
        trajectories=len(trajectories), mixed=mixed, mixed_share=mixed / len(trajectories) if trajectories else None,
        publish_p50_s=percentile([p.publish_s for p in published], 50), first_error=errors[0] if errors else None,
    )  # fmt: skip


def _s(v: float | None) -> str:
    return f"{v:.2f}" if v is not None else "—"


def table(s: SwapSummary) -> str:
    share = f"{s.mixed_share:.1%}" if s.mixed_share is not None else "—"
    return "\n".join([
        "| versions published | swaps seen | swap latency p50 s | p99 s | max s | requests | failed | trajectories "
        "| mixed-version | publish p50 s |",
        "|" + "---|" * 10,
        f"| {s.versions} | {s.swaps_seen} | {_s(s.latency_p50_s)} | {_s(s.latency_p99_s)} | {_s(s.latency_max_s)} | "
        f"{s.requests} | {s.failed} | {s.trajectories} | {s.mixed} ({share}) | {_s(s.publish_p50_s)} |",
    ])  # fmt: skip


def write(out: Path, summary: SwapSummary, header: dict, notes: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    lines = ["# slca bench swap", "", *(f"- {k}: {v}" for k, v in header.items()), "", table(summary), "",
             *(f"- {n}" for n in notes)]  # fmt: skip
    (out / "table.md").write_text("\n".join(lines) + "\n")
    (out / "results.json").write_text(json.dumps({**header, "notes": notes, **asdict(summary)}, indent=2) + "\n")
