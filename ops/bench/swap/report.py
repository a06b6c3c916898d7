"""`slca bench swap` arithmetic and output: per published version its swap latency and its end-to-end latency
(publish started → first token of that version; the bench's own weight perturbation before it is timed apart),
failed swaps (versions never served; the server's own swap outcomes), failed requests, mixed-version runs per
swap; a table and a JSON file written by `ops.bench.ab.write` (which refuses machine paths).

Swap latency of version v = (the earliest moment a response proves that a token of version ≥ v exists) − (the
moment v was announced). A response with policy version ≥ v that finished at t proves a token sampled by v (or a
later version, which is only loaded after v was announced: the server never goes back) existed by t; the
bench's canary requests (one token each, back to back) bound how late that proof can come."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from ops.bench.common import percentile


@dataclass
class Published:
    version: int
    announced_at: float
    """time.monotonic() right after `slca.weights.publish` returned (it announces, then prunes old versions)."""
    publish_s: float
    """Seconds `publish` took: write the weights, hash them, announce."""
    started_at: float | None = None
    """time.monotonic() when the publish began, after the bench's weight perturbation (None: announced_at −
    publish_s)."""
    perturb_s: float | None = None
    """Seconds the bench spent perturbing the weights just before this publish (its stand-in for a training step,
    not part of the publish path; None: not measured)."""

    @property
    def began(self) -> float:
        return self.started_at if self.started_at is not None else self.announced_at - self.publish_s


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
    failed_swaps: int = 0
    """Published versions no response ever showed (nor a later one): the swap did not happen in the run."""
    end_to_end_p50_s: float | None = None
    end_to_end_p99_s: float | None = None
    end_to_end_max_s: float | None = None
    """Publish began → first response proving that version: what a learner's update waits to be served (the
    bench's weight perturbation before the publish is not in it)."""
    perturb_p50_s: float | None = None
    """The bench's weight perturbation before each publish (not the learner's work: outside end to end)."""
    perturb_to_token_p50_s: float | None = None
    perturb_to_token_max_s: float | None = None
    """Perturbation began → first response proving that version: end to end plus the perturbation (what runs
    before these fields existed reported as end to end)."""
    mixed_per_swap: list[int] | None = None
    """Per published version: agent runs flagged mixed-version that finished between its announcement and the
    next one's (the last: to the end of the run)."""
    mixed_per_swap_mean: float | None = None
    mixed_per_swap_max: int | None = None
    server_swaps: dict[str, int] | None = None
    """serve's own `slca_swaps_total` by outcome (ok, failed, refused) and rollbacks, read at the end."""
    serve_rss_mib: list[float] | None = None
    """serve's resident set (with its children) after the warm-up, then at the end of each version's interval:
    does serving through swaps hold memory that a swap-free soak does not?"""


def rss_growth(samples: list[float] | None) -> tuple[float, float] | None:
    """(last − first, max) of serve's resident-set samples in MiB; None without two samples."""
    if not samples or len(samples) < 2:
        return None
    return samples[-1] - samples[0], max(samples)


def swap_latencies(published: list[Published], responses: list[Response]) -> list[float | None]:
    """Per published version, its swap latency (None: no response ever showed it or a later version)."""
    served = sorted((r.finished_at, r.version) for r in responses if r.ok and r.version is not None)
    out: list[float | None] = []
    for p in published:
        proof = next((t for t, v in served if v >= p.version and t >= p.announced_at), None)
        out.append(proof - p.announced_at if proof is not None else None)
    return out


def mixed_per_swap(published: list[Published], responses: list[Response]) -> list[int]:
    """Mixed-version agent runs that finished in each version's interval [its announcement, the next one's)."""
    marks = [p.announced_at for p in published] + [float("inf")]
    mixed = [r.finished_at for r in responses if r.kind == "agent" and r.ok and r.mixed]
    return [sum(1 for t in mixed if marks[i] <= t < marks[i + 1]) for i in range(len(published))]


def server_swap_outcomes(metrics_text: str) -> dict[str, int]:
    """`slca_swaps_total{outcome=…}` and `slca_swap_rollbacks_total` from serve's /metrics page."""
    out: dict[str, int] = {}
    for line in metrics_text.splitlines():
        m = _SWAPS.match(line)
        if m:
            key = m.group(2) if m.group(1) == "swaps" else "rollbacks"
            out[key] = out.get(key, 0) + int(float(m.group(3)))
    return out


_SWAPS = re.compile(r'^slca_(swaps|swap_rollbacks)_total(?:\{outcome="(\w+)"\})?\s+([0-9.eE+-]+)$')


def summarise(
    published: list[Published],
    responses: list[Response],
    server_swaps: dict[str, int] | None = None,
    serve_rss_mib: list[float] | None = None,
) -> SwapSummary:
    latencies = swap_latencies(published, responses)
    seen = [x for x in latencies if x is not None]
    ends = [x + (p.announced_at - p.began) for p, x in zip(published, latencies) if x is not None]
    perturbs = [p.perturb_s for p in published if p.perturb_s is not None]
    with_perturb = [
        x + (p.announced_at - p.began) + p.perturb_s
        for p, x in zip(published, latencies)
        if x is not None and p.perturb_s is not None
    ]
    mixed_each = mixed_per_swap(published, responses)
    trajectories = [r for r in responses if r.kind == "agent" and r.ok]
    mixed = sum(r.mixed for r in trajectories)
    errors = [r.error for r in responses if not r.ok]
    return SwapSummary(
        versions=len(published),
        swaps_seen=len(seen),
        latency_p50_s=percentile(seen, 50),
        latency_p99_s=percentile(seen, 99),
        latency_max_s=max(seen) if seen else None,
        latencies_s=[round(x, 4) for x in seen],
        requests=len(responses),
        failed=len(errors),
        trajectories=len(trajectories),
        mixed=mixed,
        mixed_share=mixed / len(trajectories) if trajectories else None,
        publish_p50_s=percentile([p.publish_s for p in published], 50),
        first_error=errors[0] if errors else None,
        failed_swaps=len(published) - len(seen),
        end_to_end_p50_s=percentile(ends, 50),
        end_to_end_p99_s=percentile(ends, 99),
        end_to_end_max_s=max(ends) if ends else None,
        perturb_p50_s=percentile(perturbs, 50),
        perturb_to_token_p50_s=percentile(with_perturb, 50),
        perturb_to_token_max_s=max(with_perturb) if with_perturb else None,
        mixed_per_swap=mixed_each,
        mixed_per_swap_mean=sum(mixed_each) / len(mixed_each) if mixed_each else None,
        mixed_per_swap_max=max(mixed_each) if mixed_each else None,
        server_swaps=server_swaps,
        serve_rss_mib=[round(x, 1) for x in serve_rss_mib] if serve_rss_mib else None,
    )


def _s(v: float | None) -> str:
    return f"{v:.2f}" if v is not None else "—"


def table(s: SwapSummary) -> str:
    share = f"{s.mixed_share:.1%}" if s.mixed_share is not None else "—"
    per = f"{s.mixed_per_swap_mean:.2f} (max {s.mixed_per_swap_max})" if s.mixed_per_swap_mean is not None else "—"
    server = ", ".join(f"{k} {v}" for k, v in (s.server_swaps or {}).items()) or "—"
    growth = rss_growth(s.serve_rss_mib)
    rss = f"{s.serve_rss_mib[0]:.0f} → {s.serve_rss_mib[-1]:.0f} (max {growth[1]:.0f})" if growth else "—"
    return "\n".join(
        [
            "| versions published | swaps seen | failed swaps | swap latency p50 s | p99 s | max s "
            "| end to end p50 s | p99 s | bench's perturbation p50 s | perturbation → token p50 s | requests | failed "
            "| trajectories | mixed-version | mixed per swap | publish p50 s | serve's swaps | serve RSS MiB |",
            "|" + "---|" * 18,
            f"| {s.versions} | {s.swaps_seen} | {s.failed_swaps} | {_s(s.latency_p50_s)} | {_s(s.latency_p99_s)} | "
            f"{_s(s.latency_max_s)} | {_s(s.end_to_end_p50_s)} | {_s(s.end_to_end_p99_s)} | {_s(s.perturb_p50_s)} | "
            f"{_s(s.perturb_to_token_p50_s)} | {s.requests} | "
            f"{s.failed} | {s.trajectories} | {s.mixed} ({share}) | {per} | {_s(s.publish_p50_s)} | {server} | {rss} |",
        ]
    )


def write(out: Path, summary: SwapSummary, header: dict, notes: list[str]) -> None:
    """`table.md` and `results.json` in `out` (ops.bench.ab.write: no machine paths, or nothing is written)."""
    from ops.bench.ab import write as write_checked

    lines = [
        *(f"- {k}: {v}" for k, v in header.items() if k != "command"),
        "",
        table(summary),
        "",
        *(f"- {n}" for n in notes),
    ]
    write_checked(out, {**header, "notes": notes, **asdict(summary)}, lines, "slca bench swap")
