"""The two version roles as Redis shows them (docs/design.md#versions): the promotion record every serve replica
follows, the gate's decisions and the scored-success guard's rollbacks. Read by the dashboard (`api/stats`
`versions`); `slca status` prints the same keys (ops/run/gate/status.py)."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from slca.contracts import Streams
from slca.contracts.versions import gate_decisions_key, promotion_key, rollback_decisions_key

log = logging.getLogger("slca.observe")

DECISIONS_READ = 200
"""Latest gate decisions and rollbacks one read fetches (each list keeps 500)."""


@dataclass
class VersionView:
    promoted: int | None = None
    """What callers get (the promotion record; None before serve wrote one)."""
    candidate: int | None = None
    """The learner's newest published version (`weights:latest`): what serve's weight follower swaps in as the
    candidate."""
    record: dict[str, Any] | None = None
    """The `Promotion` record: history, rolled back, the reason and time of the last change."""
    decisions: list[dict[str, Any]] = field(default_factory=list)
    """`GateDecision`s, oldest first: at, candidate, promoted, outcome, diff with ci_low/ci_high, n, why, ..."""
    rollbacks: list[dict[str, Any]] = field(default_factory=list)
    """`SuccessRollback`s, oldest first: at, version, previous, outcome, diff with its one-sided ci_high, ..."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _json_list(raw: list) -> list[dict[str, Any]]:
    out = []
    for x in raw:
        try:
            value = json.loads(x)
        except ValueError:
            log.warning("unreadable gate record skipped: %.80r", x)
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def _view(raw_record, candidate: int | None, decisions: list, rollbacks: list) -> VersionView:
    try:
        record = json.loads(raw_record) if raw_record is not None else None
    except ValueError:
        record = None
    promoted = record.get("promoted") if isinstance(record, dict) else None
    return VersionView(promoted, candidate, record, _json_list(decisions), _json_list(rollbacks))


async def read_versions_async(client, prefix: str, candidate: int | None, n: int = DECISIONS_READ) -> VersionView:
    """With a `redis.asyncio.Redis` client; `candidate`: the published version the caller already read."""
    streams = Streams(prefix)
    pipe = client.pipeline(transaction=False)
    pipe.get(promotion_key(streams))
    pipe.lrange(gate_decisions_key(streams), -n, -1)
    pipe.lrange(rollback_decisions_key(streams), -n, -1)
    raw_record, decisions, rollbacks = await pipe.execute()
    return _view(raw_record, candidate, decisions, rollbacks)
