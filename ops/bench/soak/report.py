"""`slca bench soak` arithmetic and output: memory growth, /healthz percentiles, status counts, the verdict; a table,
results.json and results.md (verdict line first, no machine paths).

Growth of a memory series = median of its samples in the measured window's last minute − median in its first
minute (medians: one learner step or one cache fill is not a trend). With the learner training in the window the
whole system's RSS is judged on its troughs instead: the lowest sample of the first and of the last
`TROUGH_WINDOW_S` — its step cycle (a step's activations and gradients, ≈ 0.5–0.8 GB, every 45–120 s on 2 cores) put
a minute's median anywhere between trough and peak (the fresh-clone soak of 2026-12-05 read per-minute medians from
6,048 to 6,993 MiB while its per-minute minima stayed within 5,967–6,768), and what a leak adds stays through
the troughs. "Flat" = growth within the larger of an
absolute and a relative allowance (below). Times are seconds since the measured window began (warm-up < 0).

The measured window begins once the system is in its steady state (`steady_state`): the learner has published a
version since the soak began and serve serves it. Before that the system is still starting — the learner loads its
model, and its optimizer state appears at its first step that changes a weight (the fresh-clone soak's learner grew
by 0.5 GB at its first step and by 1.1 GB more at its third; its four steps published two versions) — which is not a
leak. Growth after it still fails the memory criterion, and a system that does not get there within the cap fails
on that (`WindowStart.steady`).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from ops.bench.common import percentile
from ops.bench.soak.case_report import CaseResult, CaseRow, case_rows, case_table, cases_held, cases_line

MIB = 1024 * 1024
WINDOW_S = 60.0
"""The first and last windows whose medians are compared (shorter runs: a third of the window each)."""
TROUGH_WINDOW_S = 180.0
"""The first and last windows whose lowest samples are compared while the learner trains: each spans two or more of
its step cycles, so each holds a sample between two steps (shorter runs: a third of the window each)."""
RSS_FLAT_MIB, RSS_FLAT_SHARE = 64.0, 0.05
"""Whole-system RSS is flat when it grew by at most max(64 MiB, 5 % of the first minute's median)."""
REDIS_FLAT_MIB, REDIS_FLAT_SHARE = 16.0, 0.10
"""Redis `used_memory` is flat when it grew by at most max(16 MiB, 10 % of the first minute's median)."""
HEALTHZ_P99_S = 0.100
"""/healthz p99 must stay under this (README "Request limits")."""
ERROR_KEYS = {"message", "type", "param", "code"}


@dataclass
class MemorySample:
    t_s: float
    rss_bytes: int | None
    """Resident set of the whole process tree (None: no tree to sample, e.g. attached without a state file)."""
    redis_bytes: int | None
    """Redis `INFO memory` `used_memory` (None: Redis could not be read)."""
    rss_by_role: dict[str, int] = field(default_factory=dict)
    learner_step: int | None = None
    """The learner's newest step on `stats:learner` (0: none yet; None: not read). The soak is of a system that
    trains: its memory, latency and answers are measured while the learner steps and publishes, not beside an idle
    one."""
    learner_version: int | None = None
    """The policy version after that step."""
    served_version: int | None = None
    """The version serve serves (its /readyz `policy_version`; None: not read)."""


@dataclass(frozen=True)
class WindowStart:
    """When the measured window began, and why."""

    warmup_s: float
    """Seconds of load before it."""
    steady: bool
    """The system had reached its steady state (`steady_state`); False: the warm-up's cap was reached first."""
    cap_s: float
    """The longest the warm-up could last."""
    learner_step: int | None = None
    learner_version: int | None = None
    served_version: int | None = None
    """What the sample that began the window read."""
    baseline_version: int | None = None
    """The learner's version when the soak first read it (None: never read)."""


def steady_state(sample: MemorySample, baseline_version: int | None) -> bool:
    """Whether `sample` finds the system steady: serve serves a version the learner published since the soak first
    read it at `baseline_version`. Such a version comes from a step that changed weights, so the learner has its
    model and its optimizer state, and serve has swapped to the learner's weights at least once."""
    if baseline_version is None or sample.learner_version is None or sample.served_version is None:
        return False
    return sample.served_version > baseline_version and sample.learner_version > baseline_version


@dataclass
class LegalResult:
    kind: str
    """'chat' or 'agent'."""
    answered: bool
    """A 200 within the deadline (after any 429s, each retried after its Retry-After)."""
    statuses: list[int]
    seconds: float
    error: str | None = None


@dataclass
class HostileResult:
    name: str
    status: int | None
    acceptable: bool
    seconds: float
    slow: bool
    """Answered later than the case's `max_seconds` (reported, not a criterion: the host is loaded)."""
    error: str | None = None


@dataclass
class Growth:
    first_bytes: float | None
    last_bytes: float | None
    growth_bytes: float | None
    growth_share: float | None
    allowed_bytes: float | None
    flat: bool | None
    """None: not measured (no samples in one of the windows)."""


@dataclass
class SoakSummary:
    seconds: float
    rss: Growth
    redis: Growth
    rss_by_role_mib: dict[str, list[float | None]]
    """Role → [first-minute median, last-minute median] MiB."""
    status_counts: dict[str, int]
    five_xx: int
    pings: int
    ping_failures: int
    healthz_p50_ms: float | None
    healthz_p99_ms: float | None
    healthz_max_ms: float | None
    healthz_p99_ms_by_minute: list[float | None]
    legal_sent: int
    legal_answered: int
    legal_by_kind: dict[str, list[int]]
    """Kind → [answered, sent]."""
    retries_429: int
    legal_p50_s: float | None
    legal_p99_s: float | None
    hostile_sent: int
    hostile_violations: int
    hostile_slow: int
    violations: dict[str, str]
    """First few violations: case name → what came back."""
    first_legal_error: str | None = None
    learner_steps: int | None = None
    """Learner steps taken in the measured window (None: not read)."""
    learner_versions: int | None = None
    """Versions the learner published in the measured window."""
    cases: list[CaseRow] | None = None
    """The hostile cases of ops/bench/soak/cases.py, a row each (None: not run, `--cases-every-minutes 0`)."""
    window: WindowStart | None = None
    """When and why the measured window began (None: not told; a fixed warm-up)."""
    rss_troughs: Growth | None = None
    """Whole-system RSS, the lowest sample of the first and last `TROUGH_WINDOW_S` (module docstring)."""
    rss_judged_on: str = "medians"
    """What the memory criterion reads of the whole system's RSS: 'medians' (`rss`), or 'troughs' (`rss_troughs`)
    when the learner stepped in the measured window."""
    rss_min_mib_by_minute: list[float | None] = field(default_factory=list)
    """The lowest whole-system RSS sample of each minute of the measured window (MiB)."""
    rss_by_role_troughs_mib: dict[str, list[float | None]] = field(default_factory=dict)
    """Role → [lowest in the first, lowest in the last `TROUGH_WINDOW_S`] MiB: which process a rise is in."""

    @property
    def rss_judged(self) -> Growth:
        return self.rss_troughs if self.rss_judged_on == "troughs" and self.rss_troughs is not None else self.rss


def hostile_problem(acceptable: tuple[int, ...], status: int, raw: bytes) -> str | None:
    """What is wrong with a hostile case's answer, or None: a status outside the case's acceptable ones, or a 4xx
    without an OpenAI-style error body (README "Request limits")."""
    if status not in acceptable:
        return f"HTTP {status} (expected {'/'.join(map(str, acceptable))}): {raw[:120].decode(errors='replace')}"
    if 400 <= status < 500:
        try:
            error = json.loads(raw).get("error")
        except (ValueError, AttributeError):
            error = None
        if not isinstance(error, dict) or set(error) != ERROR_KEYS:
            return f"HTTP {status} without an OpenAI-style error: {raw[:120].decode(errors='replace')}"
    return None


def retry_after_s(value: str | None, default: float = 1.0) -> float:
    """Seconds a 429's Retry-After asks for (delta-seconds; anything else: `default`), kept within 0.05–30 s."""
    try:
        seconds = float(value) if value is not None else default
    except ValueError:
        seconds = default
    return min(30.0, max(0.05, seconds if seconds == seconds else default))  # NaN → default


def windows(seconds: float, window_s: float = WINDOW_S) -> tuple[tuple[float, float], tuple[float, float]]:
    """The first and last windows of a measured window of `seconds` (each at most a third of it)."""
    w = min(window_s, seconds / 3)
    return (0.0, w), (seconds - w, seconds)


def _median_in(points: list[tuple[float, float]], lo: float, hi: float) -> float | None:
    return _of_in(points, lo, hi, statistics.median)


def _of_in(points: list[tuple[float, float]], lo: float, hi: float, of: Callable[[list[float]], float]) -> float | None:
    inside = [v for t, v in points if lo <= t <= hi]
    return of(inside) if inside else None


def minute_minima(points: list[tuple[float, float]], seconds: float) -> list[float | None]:
    """The lowest value (MiB) of each whole or partial minute of the measured window."""
    minutes = max(1, int(-(-seconds // 60)))
    return [
        None if (low := _of_in(points, 60.0 * m, min(60.0 * (m + 1), seconds), min)) is None else round(low / MIB, 1)
        for m in range(minutes)
    ]


def growth(
    points: list[tuple[float, float]],
    seconds: float,
    allow_mib: float,
    allow_share: float,
    window_s: float = WINDOW_S,
    of: Callable[[list[float]], float] = statistics.median,
) -> Growth:
    """Growth of a series of (t_s, bytes) over a measured window of `seconds` — `of` (the median; `min`: troughs) of
    its first and of its last `window_s` — judged against max(`allow_mib`, `allow_share` × the first)."""
    (a0, a1), (b0, b1) = windows(seconds, window_s)
    first, last = _of_in(points, a0, a1, of), _of_in(points, b0, b1, of)
    if first is None or last is None:
        return Growth(first, last, None, None, None, None)
    grown = last - first
    allowed = max(allow_mib * MIB, allow_share * first)
    return Growth(first, last, grown, grown / first if first else None, allowed, grown <= allowed)


def _role_medians(
    samples: list[MemorySample],
    seconds: float,
    window_s: float = WINDOW_S,
    of: Callable[[list[float]], float] = statistics.median,
) -> dict[str, list[float | None]]:
    (a0, a1), (b0, b1) = windows(seconds, window_s)
    roles = sorted({r for s in samples for r in s.rss_by_role})
    out = {}
    for role in roles:
        points = [(s.t_s, float(s.rss_by_role.get(role, 0))) for s in samples]
        values = [_of_in(points, a0, a1, of), _of_in(points, b0, b1, of)]
        out[role] = [round(m / MIB, 1) if m is not None else None for m in values]
    return out


def _ms(seconds: float | None) -> float | None:
    return round(seconds * 1000, 2) if seconds is not None else None


def per_minute_p99(pings: list[tuple[float, float]], seconds: float) -> list[float | None]:
    """p99 (ms) of the pings of each whole or partial minute of the measured window."""
    minutes = max(1, int(-(-seconds // 60)))
    buckets: list[list[float]] = [[] for _ in range(minutes)]
    for t, latency in pings:
        if 0 <= t <= seconds:
            buckets[min(minutes - 1, int(t // 60))].append(latency)
    return [_ms(percentile(b, 99)) for b in buckets]


def summarise(
    seconds: float,
    samples: list[MemorySample],
    pings: list[tuple[float, float]],
    ping_failures: dict[str, int],
    legal: list[LegalResult],
    hostile: list[HostileResult],
    cases: list[CaseResult] | None = None,
    window: WindowStart | None = None,
) -> SoakSummary:
    """`pings`: (t_s, latency_s) of the answered /healthz pings; only those in the measured window [0, seconds]
    count for the percentiles. Failures, statuses, legal and hostile requests count over the whole run. `cases`:
    the hostile cases' tries (None: none planned; an empty list: planned, none ran — which fails). `window`: when
    and why the measured window began (a window begun at the cap, the system never steady, fails)."""
    rss_points = [(s.t_s, s.rss_bytes) for s in samples if s.rss_bytes is not None]
    redis_points = [(s.t_s, s.redis_bytes) for s in samples if s.redis_bytes is not None]
    rss = growth(rss_points, seconds, RSS_FLAT_MIB, RSS_FLAT_SHARE)
    troughs = growth(rss_points, seconds, RSS_FLAT_MIB, RSS_FLAT_SHARE, TROUGH_WINDOW_S, min)
    redis = growth(redis_points, seconds, REDIS_FLAT_MIB, REDIS_FLAT_SHARE)
    measured = [latency for t, latency in pings if 0 <= t <= seconds]
    counts = status_counts(legal, hostile)
    five_xx = sum(n for s, n in counts.items() if int(s) >= 500) + sum(
        n for k, n in ping_failures.items() if k.isdigit() and int(k) >= 500
    )
    bad = [h for h in hostile if not h.acceptable]
    steps, versions = learner_progress(samples, seconds)
    answered_s = [r.seconds for r in legal if r.answered]
    return SoakSummary(
        seconds=seconds,
        rss=rss,
        redis=redis,
        rss_by_role_mib=_role_medians(samples, seconds),
        status_counts=dict(sorted(counts.items())),
        five_xx=five_xx,
        pings=len(measured),
        ping_failures=sum(ping_failures.values()),
        healthz_p50_ms=_ms(percentile(measured, 50)),
        healthz_p99_ms=_ms(percentile(measured, 99)),
        healthz_max_ms=_ms(max(measured) if measured else None),
        healthz_p99_ms_by_minute=per_minute_p99(pings, seconds),
        legal_sent=len(legal),
        legal_answered=sum(r.answered for r in legal),
        legal_by_kind=_by_kind(legal),
        retries_429=sum(r.statuses.count(429) - (r.statuses[-1:] == [429]) for r in legal),  # a last 429: no retry
        legal_p50_s=percentile(answered_s, 50),
        legal_p99_s=percentile(answered_s, 99),
        hostile_sent=len(hostile),
        hostile_violations=len(bad),
        hostile_slow=sum(h.slow for h in hostile),
        violations={h.name: h.error or f"HTTP {h.status}" for h in bad[:10]},
        first_legal_error=next((r.error for r in legal if not r.answered), None),
        learner_steps=steps,
        learner_versions=versions,
        cases=None if cases is None else case_rows(cases),
        window=window,
        rss_troughs=troughs,
        rss_judged_on="troughs" if steps else "medians",
        rss_min_mib_by_minute=minute_minima(rss_points, seconds),
        rss_by_role_troughs_mib=_role_medians(samples, seconds, TROUGH_WINDOW_S, min),
    )


def _by_kind(legal: list[LegalResult]) -> dict[str, list[int]]:
    """Kind of legal request → [answered, sent]."""
    by_kind: dict[str, list[int]] = {}
    for r in legal:
        by_kind.setdefault(r.kind, [0, 0])
        by_kind[r.kind][0] += r.answered
        by_kind[r.kind][1] += 1
    return by_kind


def status_counts(legal: list[LegalResult], hostile: list[HostileResult]) -> dict[str, int]:
    """Status → how many answers had it, of the legal requests (each try) and the hostile bodies."""
    counts: dict[str, int] = {}
    for status in [s for r in legal for s in r.statuses] + [h.status for h in hostile if h.status is not None]:
        counts[str(status)] = counts.get(str(status), 0) + 1
    return counts


def learner_progress(samples: list[MemorySample], seconds: float) -> tuple[int | None, int | None]:
    """(steps, versions) the learner added between the measured window's start (the last sample at or before it,
    else its first) and its end; (None, None) when no sample read the learner's stream."""
    read = [s for s in samples if s.learner_step is not None and s.t_s <= seconds]
    if not read:
        return None, None
    before = [s for s in read if s.t_s <= 0]
    first, last = (before[-1] if before else read[0]), read[-1]
    return last.learner_step - first.learner_step, (last.learner_version or 0) - (first.learner_version or 0)


def _or_dash(value: int | None) -> str:
    return "—" if value is None else str(value)


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def window_text(w: WindowStart) -> str:
    """When the measured window began and why, in words."""
    read = f"learner step {_or_dash(w.learner_step)} at v{_or_dash(w.learner_version)}"
    read += f", serving v{_or_dash(w.served_version)}"
    since = f"a version published since v{_or_dash(w.baseline_version)}"
    if w.steady:
        return f"window from {_minutes(w.warmup_s)} ({read}: {since} served)"
    return (
        f"window from {_minutes(w.warmup_s)}: the learner never reached steady state within the "
        f"{_minutes(w.cap_s)} cap ({read}; no {since[2:]} served)"
    )


def _mib(value: float | None, sign: bool = False) -> str:
    return "—" if value is None else f"{value / MIB:{'+' if sign else ''}.1f} MiB"


def _growth_text(name: str, g: Growth) -> str:
    if g.flat is None:
        return f"{name} not measured"
    share = f", {g.growth_share:+.1%}" if g.growth_share is not None else ""
    return f"{name} {_mib(g.growth_bytes, True)}{share} (limit {_mib(g.allowed_bytes)})"


def criteria(s: SoakSummary) -> dict[str, bool]:
    """The four criteria of the soak (and the hostile bodies' statuses, a learner that trained, and every hostile
    case held when they ran): name → met."""
    met = {
        "memory flat": bool(s.rss_judged.flat) and bool(s.redis.flat),
        "0 × 5xx": s.five_xx == 0,
        "/healthz p99 < 100 ms": s.healthz_p99_ms is not None
        and s.healthz_p99_ms < HEALTHZ_P99_S * 1000
        and s.ping_failures == 0,
        "every legal request answered": s.legal_sent > 0 and s.legal_answered == s.legal_sent,
        "hostile statuses as expected": s.hostile_violations == 0,
        "learner trained": bool(s.learner_steps),
    }
    if s.cases is not None:
        met["hostile cases held"] = cases_held(s.cases)
    if s.window is not None:
        met["steady state before the window"] = s.window.steady
    return met


def verdict(s: SoakSummary) -> tuple[bool, str]:
    """(passed, the verdict line with the numbers)."""
    met = criteria(s)
    failed = [name for name, ok in met.items() if not ok]
    head = "PASS" if not failed else f"FAIL ({'; '.join(failed)})"
    numbers = [
        _growth_text("RSS" if s.rss_judged_on == "medians" else "RSS troughs", s.rss_judged),
        _growth_text("Redis", s.redis),
        f"{s.five_xx} × 5xx",
        f"/healthz p50 {s.healthz_p50_ms} / p99 {s.healthz_p99_ms} / max {s.healthz_max_ms} ms "
        f"({s.pings} pings, {s.ping_failures} failed)",
        f"legal answered {s.legal_answered}/{s.legal_sent}",
        f"hostile violations {s.hostile_violations}/{s.hostile_sent}",
        f"learner steps {_or_dash(s.learner_steps)} (versions {_or_dash(s.learner_versions)})",
    ]
    if s.cases is not None:
        numbers.append(cases_line(s.cases))
    if s.window is not None:
        numbers.append(window_text(s.window))
    return not failed, f"{head} — " + ", ".join(numbers)


def table(s: SoakSummary) -> str:
    met = criteria(s)
    rows = [
        (
            "RSS, whole system (first → last minute median)",
            f"{_mib(s.rss.first_bytes)} → {_mib(s.rss.last_bytes)}",
            _growth_text("growth", s.rss),
            bool(s.rss.flat),  # each row its own flatness; the criterion needs both
        ),
        *_trough_rows(s),
        (
            "Redis used_memory",
            f"{_mib(s.redis.first_bytes)} → {_mib(s.redis.last_bytes)}",
            _growth_text("growth", s.redis),
            bool(s.redis.flat),
        ),
        ("5xx", str(s.five_xx), "0", met["0 × 5xx"]),
        (
            "/healthz p50 / p99 / max ms",
            f"{s.healthz_p50_ms} / {s.healthz_p99_ms} / {s.healthz_max_ms}",
            f"p99 < {HEALTHZ_P99_S * 1000:g}, {s.ping_failures} failed of {s.pings}",
            met["/healthz p99 < 100 ms"],
        ),
        (
            "legal answered / sent",
            f"{s.legal_answered} / {s.legal_sent}",
            ", ".join(f"{k} {a}/{n}" for k, (a, n) in s.legal_by_kind.items()) + f"; {s.retries_429} retries after 429",
            met["every legal request answered"],
        ),
        (
            "hostile violations / sent",
            f"{s.hostile_violations} / {s.hostile_sent}",
            f"{s.hostile_slow} slower than their max_seconds",
            met["hostile statuses as expected"],
        ),
        (
            "learner steps / versions published",
            f"{_or_dash(s.learner_steps)} / {_or_dash(s.learner_versions)}",
            "in the measured window, from `stats:learner` (not read: —)",
            met["learner trained"],
        ),
    ]
    rows += _optional_rows(s, met)
    lines = ["| criterion | value | detail | ok |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {'yes' if ok else 'NO'} |" for a, b, c, ok in rows]
    return "\n".join(lines)


def _trough_rows(s: SoakSummary) -> list[tuple[str, str, str, bool]]:
    """The whole system's RSS troughs, and which of the two RSS rows the memory criterion reads."""
    t = s.rss_troughs
    if t is None:
        return []
    judged = "the criterion reads this row (the learner trained)" if s.rss_judged_on == "troughs" else "shown only"
    return [
        (
            f"RSS, whole system, troughs (lowest of the first → last {TROUGH_WINDOW_S / 60:g} minutes)",
            f"{_mib(t.first_bytes)} → {_mib(t.last_bytes)}",
            f"{_growth_text('growth', t)}; {judged}",
            bool(t.flat),
        )
    ]


def _optional_rows(s: SoakSummary, met: dict[str, bool]) -> list[tuple[str, str, str, bool]]:
    """The table's rows of what a run may leave out: the hostile cases, when the window began."""
    rows = []
    if s.cases is not None:
        rows.append(("hostile cases held", cases_line(s.cases), "a row each below", met["hostile cases held"]))
    if s.window is not None:
        began = _minutes(s.window.warmup_s)
        rows.append(("measured window began", began, window_text(s.window), met["steady state before the window"]))
    return rows


def _round_mib(value: int | None, digits: int) -> float | None:
    return None if value is None else round(value / MIB, digits)


def write(out: Path, summary: SoakSummary, header: dict, samples: list[MemorySample], notes: list[str]) -> None:
    passed, line = verdict(summary)
    out.mkdir(parents=True, exist_ok=True)
    md = [
        line,
        "",
        "# slca bench soak",
        "",
        *(f"- {k}: {v}" for k, v in header.items()),
        "",
        table(summary),
        "",
        "RSS by process role, first → last minute median (MiB):",
        "",
        *(f"- {role}: {a} → {b}" for role, (a, b) in summary.rss_by_role_mib.items()),
        "",
        f"RSS by process role, troughs (lowest of the first → last {TROUGH_WINDOW_S / 60:g} minutes, MiB):",
        "",
        *(f"- {role}: {a} → {b}" for role, (a, b) in summary.rss_by_role_troughs_mib.items()),
        "",
        f"whole-system RSS, lowest of each minute (MiB): {summary.rss_min_mib_by_minute}",
        "",
        f"/healthz p99 per minute (ms): {summary.healthz_p99_ms_by_minute}",
        "",
        f"statuses: {summary.status_counts}",
        "",
        *(f"- {n}" for n in notes),
    ]
    if summary.cases is not None:
        md += [
            "",
            "hostile cases (ops/bench/soak/cases.py), each try judged held or not:",
            "",
            case_table(summary.cases),
        ]
    if summary.violations:
        md += ["", "hostile violations (first 10):", *(f"- {k}: {v}" for k, v in summary.violations.items())]
    (out / "results.md").write_text("\n".join(md) + "\n")
    series = [
        {
            "t_s": round(s.t_s, 1),
            "rss_mib": _round_mib(s.rss_bytes, 1),
            "redis_mib": _round_mib(s.redis_bytes, 2),
            "learner_step": s.learner_step,
            "learner_version": s.learner_version,
            "served_version": s.served_version,
            "rss_by_role_mib": {role: _round_mib(b, 1) for role, b in sorted(s.rss_by_role.items())},
        }
        for s in samples
    ]
    payload = {"verdict": line, "passed": passed, **header, "notes": notes, **asdict(summary), "samples": series}
    (out / "results.json").write_text(json.dumps(payload, indent=2) + "\n")
