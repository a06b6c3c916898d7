"""The gate's lines of `slca status`: the promoted version and its record, and the latest gate decisions (Redis)."""

from __future__ import annotations

import json

from slca.contracts import Streams
from slca.contracts.versions import gate_decisions_key, promotion_key

SHOWN = 5


def gate_lines(client, prefix: str, shown: int = SHOWN) -> str:
    """Text for `slca status` from a sync Redis client (errors propagate: the caller reports Redis failures)."""
    streams = Streams(prefix)
    raw = client.get(promotion_key(streams))
    lines = []
    if raw is None:
        lines.append("promoted: no promotion record yet (callers get the version served at start)")
    else:
        record = json.loads(raw)
        lines.append(
            f"promoted: v{record['promoted']} ({record['reason']}); before: {record['history'][-3:]}; "
            f"rolled back: {record['rolled_back'] or 'none'}"
        )
    decisions = [json.loads(x) for x in client.lrange(gate_decisions_key(streams), -shown, -1)]
    if not decisions:
        lines.append("gate: no decision yet")
    for d in decisions:
        figures = (
            f"diff {d['diff']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}], n {d['n']}"
            if d.get("diff") is not None
            else "no figures"
        )
        lines.append(f"gate: v{d['candidate']} vs v{d['promoted']}: {d['outcome']} — {figures} ({d['why']})")
    return "\n".join(lines)
