"""`slca status`'s lines about the serve replicas: one per replica, from their statuses in Redis
(`slca.replicas.read_replicas`)."""

from __future__ import annotations

from slca.contracts.replicas import ReplicaView

ERROR_CHARS = 100
"""A failed swap's reason is cut to this many characters on its line (the dashboard shows it whole)."""


def _swap(view: ReplicaView) -> str:
    s = view.status
    if s.last_swap == "none":
        return "no swap yet"
    text = f"last swap {s.last_swap} (v{s.last_swap_version})"
    if s.last_error and s.last_swap != "ok":
        error = s.last_error if len(s.last_error) <= ERROR_CHARS else s.last_error[: ERROR_CHARS - 1] + "…"
        text += f": {error}"
    return text


def _name(view: ReplicaView) -> str:
    role = view.status.role
    return view.status.replica if role == "both" else f"{view.status.replica} [{role}]"


def replica_lines(views: list[ReplicaView]) -> str:
    """A heading and one line per replica: id (with its role when it serves one: `serve.role`), served version, age
    of its last heartbeat, STALE when it missed three, its last swap and its address."""
    if not views:
        return "serve replicas: none announced"
    names = [_name(v) for v in views]
    width = max(len(n) for n in names)
    lines = [f"serve replicas ({len(views)}):"]
    for v, name in zip(views, names):
        stale = "  STALE" if v.stale else ""
        lines.append(
            f"  {name:<{width}}  v{v.status.policy_version:<5} heartbeat {v.age_s:6.1f}s ago{stale}  "
            f"{_swap(v)}  {v.status.url or '-'}"
        )
    return "\n".join(lines)
