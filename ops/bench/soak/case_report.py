"""The hostile cases' share of `slca bench soak`'s report (ops/bench/soak/cases.py runs them): one row per case —
tries, tries held, the worst latency of the small chat sent meanwhile beside its latency alone — and their criterion:
every try that ran held. A try that could not run (nothing to attack, e.g. no weight server) is counted apart and
neither holds nor fails."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CaseResult:
    name: str
    held: bool
    detail: str
    """What the case saw (statuses, error codes, times), or what was wrong."""
    seconds: float
    """The case's own requests, from the first sent to the last answered."""
    t_s: float | None = None
    """When it started, in seconds since the measured window began (< 0: in the warm-up)."""
    chat_alone_s: float | None = None
    """The small chat with no case in flight: the slower of one just before the case and one just after."""
    chat_worst_s: float | None = None
    """The slowest small chat sent while the case's requests were in flight (None: none was answered)."""
    skipped: str | None = None
    """Why the case did not run (then `held` is False and counts for nothing)."""
    late: bool = False
    """Its action held but a small chat sent meanwhile was late (then the case is tried again: cases.run_case)."""


@dataclass
class CaseRow:
    name: str
    tries: int
    held: int
    skipped: int
    worst_chat_s: float | None
    """The slowest small chat sent during any try."""
    worst_alone_s: float | None
    """The slowest small chat alone around any try (what `worst_chat_s` is compared with)."""
    worst_seconds: float | None
    ok: bool
    """Every try that ran held."""
    detail: str
    """The first failure's detail, else the last try's (or why it was skipped)."""


def _worst(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def case_rows(results: list[CaseResult]) -> list[CaseRow]:
    """One row per case, in the order the cases first ran."""
    by_name: dict[str, list[CaseResult]] = {}
    for r in results:
        by_name.setdefault(r.name, []).append(r)
    rows = []
    for name, tries in by_name.items():
        ran = [r for r in tries if r.skipped is None]
        failed = [r for r in ran if not r.held]
        shown = failed[0] if failed else tries[-1]
        rows.append(
            CaseRow(
                name=name,
                tries=len(tries),
                held=len(ran) - len(failed),
                skipped=len(tries) - len(ran),
                worst_chat_s=_worst([r.chat_worst_s for r in ran]),
                worst_alone_s=_worst([r.chat_alone_s for r in ran]),
                worst_seconds=_worst([r.seconds for r in ran]),
                ok=not failed,
                detail=shown.detail if shown.skipped is None else f"skipped: {shown.skipped}",
            )
        )
    return rows


def cases_held(rows: list[CaseRow]) -> bool:
    """The criterion: at least one try ran, and every try that ran held."""
    return any(r.tries > r.skipped for r in rows) and all(r.ok for r in rows)


def cases_line(rows: list[CaseRow]) -> str:
    """`cases held 12/14 (2 skipped)` for the verdict line."""
    tries, held, skipped = (sum(getattr(r, k) for r in rows) for k in ("tries", "held", "skipped"))
    return f"cases held {held}/{tries - skipped}" + (f" ({skipped} skipped)" if skipped else "")


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def case_table(rows: list[CaseRow]) -> str:
    lines = [
        "| case | tries | held | skipped | small chat meanwhile, worst s (alone) | slowest try s | ok | detail |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        detail = r.detail.replace("|", "/").replace("\n", " ")[:200]
        lines.append(
            f"| {r.name} | {r.tries} | {r.held} | {r.skipped} | {_s(r.worst_chat_s)} ({_s(r.worst_alone_s)}) "
            f"| {_s(r.worst_seconds)} | {'yes' if r.ok else 'NO'} | {detail} |"
        )
    return "\n".join(lines)
