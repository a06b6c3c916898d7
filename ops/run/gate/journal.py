"""Where the gate's decisions go: a JSON-lines file under `<data_dir>/gate/` (every one) and a bounded Redis list
(`slca status`, the dashboard). The file is the record; Redis is the view, so a Redis failure only warns."""

from __future__ import annotations

import logging
from pathlib import Path

from slca.contracts.wire import Contract

log = logging.getLogger(__name__)

KEEP_DECISIONS = 500
"""Decisions each Redis list keeps (the files keep every one)."""


async def append_decision(path: Path, redis, key: str, decision: Contract) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = decision.model_dump_json()
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    if redis is not None:
        try:
            await redis.rpush(key, text)
            await redis.ltrim(key, -KEEP_DECISIONS, -1)
        except Exception as exc:  # noqa: BLE001 - the file has it; Redis is the status view
            log.warning("gate decision not written to Redis %s: %s", key, exc)
