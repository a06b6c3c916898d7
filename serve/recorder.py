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
trajectory cost three commands, two round trips and three replies to parse each (one caller at a time reaches
under a fifth of raw XADD's rate in `slca bench queue`). Each `record` call queues its encoded entry and waits;
up to `max_in_flight` flusher tasks take the entries waiting (up to `max_batch` each) and send them in ONE call
of a Lua script (`ADD_WITHIN_BOUNDS`) that reads XLEN and MEMORY USAGE once and adds, in order, each entry that
still fits: one command, one round trip and one reply per batch. Two in flight so that the server adds one
batch while this process encodes the next (encoding is over half of the producer's CPU). The bound check and
the adds are atomic now (a script runs alone), so the bounds also hold exactly across serve replicas, which a
check-then-add from each replica never did. Alone, a call is a batch of one. The price: redis-server spends
about twice raw XADD's CPU per entry (the script copies its arguments); at serve's rates that is noise.
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
MAX_BATCH = 8
"""Most entries one flush adds in one script call. Small enough that a burst splits into batches that overlap
(one at the server while the next is encoded), large enough that the per-command cost is shared."""
MAX_IN_FLIGHT = 2
"""Batches at the server at once (each on its own pooled connection)."""
ADD_WITHIN_BOUNDS = """
-- KEYS[1]: the stream. ARGV: max_len, max_bytes, MEMORY USAGE samples, payload field name, then per entry:
-- its size in bytes, its payload, its id. Returns one flag per entry: 1 added, 0 refused (it would not fit).
local length = redis.call('XLEN', KEYS[1])
local used = redis.call('MEMORY', 'USAGE', KEYS[1], 'SAMPLES', ARGV[3]) or 0
local max_len, max_bytes, added = tonumber(ARGV[1]), tonumber(ARGV[2]), {}
for i = 5, #ARGV, 3 do
  local size = tonumber(ARGV[i])
  if length < max_len and used + size <= max_bytes then
    redis.call('XADD', KEYS[1], '*', ARGV[4], ARGV[i + 1], 'id', ARGV[i + 2])
    length, used = length + 1, used + size
    added[#added + 1] = 1
  else
    added[#added + 1] = 0
  end
end
return added
"""
"""Bound check and XADDs of one batch, atomically, in one command."""
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
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer msgpack cannot hold (wire.packb)
        return encode_entry(trajectory, id=trajectory.id)
    return {PAYLOAD_FIELD: payload, b"id": trajectory.id.encode()}


@dataclass
class _Pending:
    trajectory_id: str
    entry: dict[bytes, bytes]
    size: int
    done: asyncio.Future


class TrajectoryRecorder:
    def __init__(
        self,
        client: aioredis.Redis,
        streams: Streams,
        max_len: int,
        metrics: ServeMetrics,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_batch: int = MAX_BATCH,
        max_in_flight: int = MAX_IN_FLIGHT,
    ):
        self.client = client
        self.streams = streams
        self.max_len = max_len
        self.max_bytes = max_bytes
        self.max_batch = max_batch
        self.max_in_flight = max_in_flight
        self.metrics = metrics
        self._waiting: list[_Pending] = []
        self._flushers: set[asyncio.Task] = set()
        # redis-py's Script: EVALSHA, and on NOSCRIPT (a restarted Redis) loads the source and runs it again
        self._script = client.register_script(ADD_WITHIN_BOUNDS)

    async def record(self, trajectory: Trajectory) -> bool:
        """True when added; False when the stream is full or Redis failed (counted, not raised)."""
        entry = encode_trajectory_entry(trajectory)
        size = sum(len(k) + len(v) for k, v in entry.items())
        pending = _Pending(trajectory.id, entry, size, asyncio.get_running_loop().create_future())
        self._waiting.append(pending)
        if len(self._flushers) < self.max_in_flight:
            task = asyncio.create_task(self._flush_waiting(), name="trajectory-recorder")
            self._flushers.add(task)  # the set holds the task (the loop keeps only weak references)
        # A cancelled request cancels only its own future (the flusher skips it when answering); the flush that
        # carries its entry and others' goes on. (asyncio.shield would do the same at a few µs per call.)
        return await pending.done

    async def _flush_waiting(self) -> None:
        try:
            await self._drain()
        finally:
            # leave the set in the same step as the last look at `_waiting` (no await between): a done-callback
            # would run a step later, and a `record` in that gap would see the set full and wait forever
            self._flushers.discard(asyncio.current_task())

    async def _drain(self) -> None:
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
                if not p.done.done():
                    p.done.set_result(ok)

    async def _add(self, batch: list[_Pending]) -> list[bool]:
        args: list = [self.max_len, self.max_bytes, MEMORY_SAMPLES, PAYLOAD_FIELD]
        for p in batch:
            args += [p.size, p.entry[PAYLOAD_FIELD], p.entry[b"id"]]
        try:
            admitted = [bool(flag) for flag in await self._script(keys=[self.streams.trajectories], args=args)]
        except RedisError as exc:
            log.warning(
                "%d trajector%s not recorded (%s …): %s",
                len(batch),
                "y" if len(batch) == 1 else "ies",
                batch[0].trajectory_id,
                exc,
            )
            self.metrics.record_failures.inc(len(batch))
            return [False] * len(batch)
        refused = admitted.count(False)
        if refused:
            self.metrics.backpressure.inc(refused)
        if len(batch) - refused:
            self.metrics.trajectories_recorded.inc(len(batch) - refused)
        return admitted
