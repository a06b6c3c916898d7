"""The gate's lines of `slca status`: the promotion record, the latest gate decisions and the scored-success guard's
rollbacks (Redis). What callers get is served: `ops/run/served_versions.py` (with one engine per process callers
follow the candidate, whatever the record's promoted version)."""

from __future__ import annotations

import json
import time

from slca.contracts import Streams
from slca.contracts.versions import gate_decisions_key, gate_feed_hold_key, promotion_key, rollback_decisions_key

SHOWN = 5


def gate_lines(client, prefix: str, shown: int = SHOWN) -> str:
    """Text for `slca status` from a sync Redis client (errors propagate: the caller reports Redis failures)."""
    streams = Streams(prefix)
    raw = client.get(promotion_key(streams))
    lines = []
    if raw is None:
        lines.append("promotion record: none yet (callers get the version served at start)")
    else:
        record = json.loads(raw)
        lines.append(
            f"promotion record: promoted v{record['promoted']} ({record['reason']}, {_clock(record.get('at'))}); "
            f"before: {record['history'][-3:]}; rolled back: {record['rolled_back'] or 'none'}"
        )
    hold_key = gate_feed_hold_key(streams)
    if (held := client.get(hold_key)) is not None:
        judged = json.loads(held)
        left_ms = client.pttl(hold_key)
        left = f"{left_ms / 1000:.0f} s left at most" if left_ms and left_ms > 0 else "no expiry"
        lines.append(
            f"gate: judging v{judged.get('candidate')} vs v{judged.get('promoted')} since {_clock(judged.get('at'))}; "
            f"the training feed is held ({hold_key}, {left})"
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
        at = _clock(d.get("at"))
        lines.append(f"gate {at}: v{d['candidate']} vs v{d['promoted']}: {d['outcome']} — {figures} ({d['why']})")
    for r in (json.loads(x) for x in client.lrange(rollback_decisions_key(streams), -shown, -1)):
        lines.append(
            f"rollback {_clock(r.get('at'))}: v{r['version']} → v{r['previous']} on scored success: {r['outcome']} — "
            f"{r['success']:.3f} (n {r['n']}) vs {r['previous_success']:.3f} (n {r['previous_n']}), "
            f"diff {r['diff']:+.3f}, one-sided 95% bound {r['ci_high']:+.3f} (margin {r['margin']:.2f})"
        )
    return "\n".join(lines)


def _clock(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if at else "-"
