"""The `schema` backend: the deterministic synthesiser (same call, same answer)."""

from __future__ import annotations

import asyncio

from sim.backends.base import Answer, SimRequest, schema_answer


class SchemaBackend:
    name = "schema"

    async def respond(self, request: SimRequest) -> Answer:
        # off the event loop: a large (bounded) schema costs milliseconds to fill
        return Answer(await asyncio.to_thread(schema_answer, request), "schema", 0)

    async def close(self) -> None:
        return None
