"""The hostile cases' share of `slca bench soak`'s report (ops/bench/soak/cases.py runs them): one row per case —
tries, tries held, the worst latency of the small chat sent meanwhile beside its latency alone — and their criterion.
A try that could not run (nothing to attack, e.g. no weight server) is counted apart and neither holds nor fails.

The criterion: every try that ran held, except that a try whose only fault was a late small chat is weighed against
the control (`CONTROL`, a case that sends nothing, run in every round like the others): with the learner training
beside serving, a small chat is late now and then whatever else is sent (the 30-minute soak of 2026-12-06 on an
avx2-only EPYC: 0.8–22.6 s alone within the window), so a case holds the others up only when its tries were late
more often than the control's — one-sided Fisher's exact test on late tries (each try, retries included: the
control is retried by the same rule) at `LATE_P`. A case that holds the others up does so at nearly every try (six
impossible prompts made a 0.1 s chat take 10 s), which this test finds from 4 late tries of 4 against a control
never late (p = 0.014); one late try in 8 where the control was late 1 time in 7 is the system's cycle
(p = 0.80). Without a control row every late try fails its case, as before."""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

CONTROL = "control"
"""The case that sends nothing (ops/bench/soak/cases.py): how often a small chat is late anyway."""
LATE_P = 0.05
"""A case's late tries hold the others up when Fisher's one-sided p against the control's is below this."""


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
    """Not held only because a small chat sent meanwhile was late (its action held; cases.run_case)."""
    tries_run: int = 1
    """Tries behind this result (a try whose small chat was late is tried again: cases.run_case)."""
    tries_late: int = 0
    """Of them, tries whose action held while a small chat sent meanwhile was late."""


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
    """Every try that ran held, or its only faults were late small chats no more often than the control's."""
    detail: str
    """The first failure's detail, else the last try's (or why it was skipped)."""
    tries_run: int = 0
    """Single tries behind the rows' results, retries included (the units of the late-try comparison)."""
    tries_late: int = 0
    """Of them, tries whose action held while a small chat sent meanwhile was late."""
    late_p: float | None = None
    """Fisher's one-sided p that this case's tries were late more often than the control's (None: not compared)."""


def _worst(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def fisher_greater_p(late: int, tries: int, control_late: int, control_tries: int) -> float:
    """One-sided Fisher's exact p that `late` of `tries` is a higher share than `control_late` of `control_tries`:
    the chance, with the late tries of both dealt at random among all tries, that this side gets `late` or more."""
    total, all_late = tries + control_tries, late + control_late
    ways = comb(total, tries)
    return (
        sum(comb(all_late, k) * comb(total - all_late, tries - k) for k in range(late, min(tries, all_late) + 1)) / ways
    )


def case_rows(results: list[CaseResult]) -> list[CaseRow]:
    """One row per case, in the order the cases first ran; late-only failures weighed against the control's."""
    by_name: dict[str, list[CaseResult]] = {}
    for r in results:
        by_name.setdefault(r.name, []).append(r)
    control = [r for r in by_name.get(CONTROL, []) if r.skipped is None]
    control_counts = (sum(r.tries_late for r in control), sum(r.tries_run for r in control)) if control else None
    return [_row(name, tries, control_counts) for name, tries in by_name.items()]


def _row(name: str, tries: list[CaseResult], control: tuple[int, int] | None) -> CaseRow:
    ran = [r for r in tries if r.skipped is None]
    failed = [r for r in ran if not r.held]
    hard = [r for r in failed if not r.late]
    tries_run, tries_late = sum(r.tries_run for r in ran), sum(r.tries_late for r in ran)
    late_p = None
    if control is not None and name != CONTROL and tries_run:
        late_p = fisher_greater_p(tries_late, tries_run, *control)
    if name == CONTROL:
        ok = not hard  # the reference itself: only a small chat alone that failed counts against it
    elif failed and not hard and late_p is not None:
        ok = late_p >= LATE_P
    else:
        ok = not failed
    shown = failed[0] if failed else tries[-1]
    return CaseRow(
        name=name,
        tries=len(tries),
        held=len(ran) - len(failed),
        skipped=len(tries) - len(ran),
        worst_chat_s=_worst([r.chat_worst_s for r in ran]),
        worst_alone_s=_worst([r.chat_alone_s for r in ran]),
        worst_seconds=_worst([r.seconds for r in ran]),
        ok=ok,
        detail=shown.detail if shown.skipped is None else f"skipped: {shown.skipped}",
        tries_run=tries_run,
        tries_late=tries_late,
        late_p=late_p,
    )


def cases_held(rows: list[CaseRow]) -> bool:
    """The criterion: at least one try of a case ran, and every case is ok (`CaseRow.ok`)."""
    return any(r.tries > r.skipped for r in rows if r.name != CONTROL) and all(r.ok for r in rows)


def cases_line(rows: list[CaseRow]) -> str:
    """`cases held 12/14 (2 skipped)` for the verdict line, the control apart (`; control late 1/7 tries`)."""
    cases = [r for r in rows if r.name != CONTROL]
    tries, held, skipped = (sum(getattr(r, k) for r in cases) for k in ("tries", "held", "skipped"))
    line = f"cases held {held}/{tries - skipped}" + (f" ({skipped} skipped)" if skipped else "")
    excused = [r for r in cases if r.ok and r.held < r.tries - r.skipped]
    if excused:
        line += f" ({len(excused)} case{'s' if len(excused) > 1 else ''} late no more often than the control)"
    control = next((r for r in rows if r.name == CONTROL), None)
    if control is not None:
        line += f"; control late {control.tries_late}/{control.tries_run} tries"
    return line


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def case_table(rows: list[CaseRow]) -> str:
    lines = [
        "| case | tries | held | skipped | small chat meanwhile, worst s (alone) | slowest try s "
        "| late tries (p vs control) | ok | detail |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        detail = r.detail.replace("|", "/").replace("\n", " ")[:200]
        late = f"{r.tries_late}/{r.tries_run}" + ("" if r.late_p is None else f" ({r.late_p:.2f})")
        lines.append(
            f"| {r.name} | {r.tries} | {r.held} | {r.skipped} | {_s(r.worst_chat_s)} ({_s(r.worst_alone_s)}) "
            f"| {_s(r.worst_seconds)} | {late} | {'yes' if r.ok else 'NO'} | {detail} |"
        )
    return "\n".join(lines)
