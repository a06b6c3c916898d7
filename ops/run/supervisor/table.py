"""The live status table of `slca up` and `slca status`."""

from __future__ import annotations

from typing import Any

from ops.observe.redis_view import Snapshot


def fmt_duration(seconds: float | None) -> str:
    if not seconds:
        return "-"
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def process_table(processes: list[dict[str, Any]]) -> str:
    width = max([10, *(len(p["name"]) for p in processes)])  # `serve-candidate` (ops.candidate_replica) is longer
    header = f"{'PROCESS':<{width}} {'PID':>7}  {'STATE':<9} {'RESTARTS':>8}  {'UPTIME':>8}  WHERE"
    lines = [header]
    for p in processes:
        lines.append(
            f"{p['name']:<{width}} {p.get('pid') or '-':>7}  {p['state']:<9} {p['restarts']:>8}  "
            f"{fmt_duration(p.get('uptime_s')):>8}  {where(p)}"
        )
    return "\n".join(lines)


def where(p: dict[str, Any]) -> str:
    """The WHERE column: the process's URL or log; a held one says what it waits for; a line of its own (the warm
    start's progress) comes first."""
    if p.get("state") == "held" and p.get("after"):
        return f"waits for {' and '.join(p['after'])}"
    place = p.get("url") or p.get("log") or ""
    return f"{p['detail']}  ({place})" if p.get("detail") else place


def _mean(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return sum(values) / len(values) if values else None


def _fmt(v: float | None, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def system_lines(snapshot: Snapshot | None, served_version: float | None, window: int = 50) -> str:
    if snapshot is None:
        return "redis: not reachable"
    queues = " | ".join(f"{q.stream} {q.length} (backlog {q.backlog})" for q in snapshot.queues)
    published = "-" if snapshot.published_version is None else f"v{snapshot.published_version}"
    served = "-" if served_version is None else f"v{int(served_version)}"
    recent = snapshot.rewards[-window:]
    rewards = (
        f"recent rewards (last {len(recent)}): exec {_fmt(_mean(recent, 'exec'))}  pref {_fmt(_mean(recent, 'pref'))}"
        f"  success {_fmt(_mean(recent, 'success'))}  tool turns {_fmt(_mean(recent, 'tool_turns'), '.2f')}"
        if recent
        else "recent rewards: none yet"
    )
    last = snapshot.learner[-1] if snapshot.learner else None
    learner = (
        f"learner: step {int(last['step'] or 0)}  loss {_fmt(last['loss'])}  kl {_fmt(last['kl'], '.4f')}"
        if last
        else "learner: no step yet"
    )
    return "\n".join([f"queues: {queues}", f"weights: published {published}  served {served}", rewards, learner])
