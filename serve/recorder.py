"""Appends finished trajectories to the bounded `slca:trajectories` stream; never fails a request.

The stream is bounded in entries (`max_stream_len`) and in bytes (`max_stream_bytes`). When adding would pass
either bound the trajectory is not added (we never trim entries other components have not consumed yet) and
back-pressure is counted; a Redis error is logged and counted the same way. Either way the request is served.

Why `MEMORY USAGE … SAMPLES n` for the bytes: it is what Redis itself holds for the stream, whoever added or
deleted entries (the workers XDEL each trajectory once its group is written), so nothing has to be kept in
step; with a few samples it reads a few of the stream's nodes and extrapolates (O(samples), not O(entries)),
and it travels with XLEN in one round trip. A running INCRBY/DECRBY counter would be cheaper still, but every
deleter in every component would have to know each entry's size, and one that forgot would make it drift.

Group commit: concurrent requests finish at nearly the same time, and one XLEN + MEMORY USAGE + XADD per
trajectory cost three commands and two round trips each (a quarter of raw XADD's rate, `slca bench queue`).
Each `record` call queues its encoded entry and waits; one flusher task at a time takes every entry waiting
(up to `max_batch`) and sends their XADDs in one pipeline that ends with XLEN + MEMORY USAGE, so the bounds are
read after our own additions and the next batch is admitted on that reading without a round trip of its own.
A fresh reading is taken first only for the first batch, after a Redis error, and when the last reading says
the next entry would not fit (space may have been freed since): so refusals are always decided on a fresh
reading. Admission inside a batch is decided in order against the reading plus the entries admitted before.
Alone, a call is a batch of one; under load the round trips are shared.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import msgpack
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from serve.metrics import ServeMetrics
from serve.settings import ServeSettings
from slca.contracts import Streams, Trajectory, encode_entry
from slca.contracts.queues import PAYLOAD_FIELD

log = logging.getLogger(__name__)
MEMORY_SAMPLES = 5
"""Stream nodes `MEMORY USAGE` reads to estimate the stream's size."""
DEFAULT_MAX_BYTES: int = ServeSettings.model_fields["max_stream_bytes"].default
MAX_BATCH = 64
"""Most entries one flush adds in one pipeline (bounds one pipeline's size and one batch's latency)."""
_AS_THEY_ARE = frozenset({"tokens", "logprobs", "tools", "messages", "meta"})
"""Fields that are already msgpack-native (JSON-shaped) in every trajectory serve builds: the per-token arrays
and the JSON documents it received or produced."""


def encode_trajectory_entry(trajectory: Trajectory) -> dict[bytes, bytes]:
    """The stream entry `encode_entry(trajectory, id=trajectory.id)` gives, decoding to the same payload, in a
    third of the time: the fields in `_AS_THEY_ARE` (in a 1,000-token episode, ≈ 2,000 ints, floats and Nones
    and the tool schemas) go to msgpack as they are instead of through pydantic's JSON-mode walk, which would
    only copy them. Validation forbids NaN and positive logprobs, so the walk changes nothing in the arrays
    but −inf, which it writes as null; here −inf stays −inf, which the reader's validation accepts. A value
    msgpack cannot take as it is (a caller put a non-JSON object in `meta`) falls back to the generic path."""
    data = trajectory.model_dump(mode="json", exclude=_AS_THEY_ARE)
    for name in _AS_THEY_ARE:
        data[name] = getattr(trajectory, name)
    try:
        payload = msgpack.packb(data, use_bin_type=True)
    except (TypeError, ValueError):
        return encode_entry(trajectory, id=trajectory.id)
    return {PAYLOAD_FIELD: payload, b"id": trajectory.id.encode()}


@dataclass
class _Pending:
    trajectory_id: str
    entry: dict[bytes, bytes]
    size: int
    done: asyncio.Future


class TrajectoryRecorder:
    def __init__(self, client: aioredis.Redis, streams: Streams, max_len: int, metrics: ServeMetrics,
                 max_bytes: int = DEFAULT_MAX_BYTES, max_batch: int = MAX_BATCH):  # fmt: skip
        self.client = client
        self.streams = streams
        self.max_len = max_len
        self.max_bytes = max_bytes
        self.max_batch = max_batch
        self.metrics = metrics
        self._waiting: list[_Pending] = []
        self._flusher: asyncio.Task | None = None
        self._reading: tuple[int, int] | None = None
        """(XLEN, MEMORY USAGE) read with the last batch's XADDs, after them; None before the first or after an
        error. Since then the workers can only have shrunk the stream (XDEL of what they consumed), so deciding
        on it never admits more than a fresh reading would; other serve replicas' XADDs race with it exactly
        as they raced with a per-trajectory check (the bounds were never atomic across replicas)."""

    async def record(self, trajectory: Trajectory) -> bool:
        """True when added; False when the stream is full or Redis failed (counted, not raised)."""
        entry = encode_trajectory_entry(trajectory)
        size = sum(len(k) + len(v) for k, v in entry.items())
        pending = _Pending(trajectory.id, entry, size, asyncio.get_running_loop().create_future())
        self._waiting.append(pending)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_waiting(), name="trajectory-recorder")
        # shield: a cancelled request must not cancel the flush other requests' entries ride on
        return await asyncio.shield(pending.done)

    async def _flush_waiting(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting[: self.max_batch], self._waiting[self.max_batch :]
            try:
                added = await self._add(batch)
            except BaseException:  # cancelled at shutdown: nobody is left waiting for an answer
                for p in batch + self._waiting:
                    if not p.done.done():
                        p.done.set_result(False)
                raise
            for p, ok in zip(batch, added):
                p.done.set_result(ok)

    async def _add(self, batch: list[_Pending]) -> list[bool]:
        stream = self.streams.trajectories
        try:
            reading = self._reading
            if reading is None or not self._admit(batch[:1], *reading)[0]:
                reading = await self._read_bounds()  # first batch, or the stream looked full: look again
            admitted = self._admit(batch, *reading)
            pipe = self.client.pipeline(transaction=False)
            for p, fits in zip(batch, admitted):
                if fits:
                    pipe.xadd(stream, p.entry)
            pipe.xlen(stream)
            pipe.memory_usage(stream, samples=MEMORY_SAMPLES)
            *_, length, used = await pipe.execute()
            self._reading = (length, used or 0)
        except RedisError as exc:
            self._reading = None
            log.warning("%d trajector%s not recorded (%s …): %s", len(batch), "y" if len(batch) == 1 else "ies",
                        batch[0].trajectory_id, exc)  # fmt: skip
            self.metrics.record_failures.inc(len(batch))
            return [False] * len(batch)
        refused = admitted.count(False)
        if refused:
            self.metrics.backpressure.inc(refused)
        if len(batch) - refused:
            self.metrics.trajectories_recorded.inc(len(batch) - refused)
        return admitted

    async def _read_bounds(self) -> tuple[int, int]:
        pipe = self.client.pipeline(transaction=False)
        pipe.xlen(self.streams.trajectories)
        pipe.memory_usage(self.streams.trajectories, samples=MEMORY_SAMPLES)
        length, used = await pipe.execute()
        return length, used or 0

    def _admit(self, batch: list[_Pending], length: int, used: int) -> list[bool]:
        """In order: each entry fits if the stream, with the entries admitted before it, stays within both bounds."""
        admitted = []
        for p in batch:
            fits = length < self.max_len and used + p.size <= self.max_bytes
            admitted.append(fits)
            length, used = (length + 1, used + p.size) if fits else (length, used)
        return admitted
