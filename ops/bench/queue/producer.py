"""The stream producer measured against `redis-benchmark` XADD of the same payload size, in one run.

The producer is serve's `TrajectoryRecorder` (encoding, the stream's bound check and XADD), driven by concurrent
callers the way concurrent requests drive it; its payload is a realistic episode of ≈ 1,000 tokens (a system
prompt with tool schemas, a user turn, a Hermes call, its result and an answer) with behaviour logprobs on the
generated tokens, segments, messages and tools, encoded as the recorder writes it.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import redis
import redis.asyncio as aioredis

from serve.metrics import ServeMetrics
from serve.recorder import TrajectoryRecorder, encode_trajectory_entry
from slca.contracts import GoldCall, GroundTruth, Segment, Streams, Trajectory, encode_entry
from ops.bench.queue.workers import redis_benchmark_xadd

PIPELINE = 16
"""Commands in flight per connection, for redis-benchmark (-P) and for our producer (concurrent callers)."""

_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{what}. Returns the current figures as JSON with units and a timestamp.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, e.g. Paris"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit of temperature"},
                    "date": {"type": "string", "description": "ISO date; today when omitted"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Most results to return"},
                },
                "required": ["city"],
            },
        },
    }
    for name, what in [
        ("get_weather", "Current weather in a city"),
        ("get_forecast", "Forecast for a city"),
        ("get_air_quality", "Air quality index in a city"),
        ("get_sunrise", "Sunrise and sunset"),
        ("find_restaurants", "Restaurants near a city centre"),
    ]
]


def realistic_trajectory(tokenizer, target_tokens: int = 1000) -> Trajectory:
    """An episode of about `target_tokens` tokens, tokenized turn by turn as serve does (Hermes tools in the
    system prompt), generated tokens carrying logprobs."""
    system = (
        "<|im_start|>system\nYou are a helpful assistant with tools.\n<tools>\n"
        + "\n".join(json.dumps(t["function"]) for t in _TOOLS)
        + "\n</tools><|im_end|>\n"
    )
    answer = (
        "In Paris it is 18 degrees Celsius with light wind from the west; the air is clean and "
        "no rain is expected before the evening. "
    ) * 3
    parts = [
        ("system", system),
        (
            "user",
            "<|im_start|>user\nWhat is the weather in Paris today, in Celsius?<|im_end|>\n<|im_start|>assistant\n",
        ),
        (
            "tool_call",
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": '
            '"celsius"}}\n</tool_call><|im_end|>',
        ),
        (
            "tool_result",
            '\n<|im_start|>user\n<tool_response>\n{"temp": 18, "unit": "celsius", "wind_kmh": '
            '12, "wind_dir": "W", "rain_mm": 0, "aqi": 21}\n</tool_response><|im_end|>\n'
            "<|im_start|>assistant\n",
        ),
        ("summary", answer + "<|im_end|>"),
    ]
    tokens, segments, turn = [], [], 0
    for kind, text in parts:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        if kind == "system":  # pad the prompt so the episode reaches the target length
            ids = (ids * (1 + target_tokens // max(len(ids), 1)))[: max(len(ids), target_tokens - 210)]
        segments.append(Segment(start=len(tokens), end=len(tokens) + len(ids), kind=kind, turn=turn))
        tokens += ids
        turn += kind == "tool_result"
    logprobs = [-0.05 - (i % 97) / 31.0 if s.kind.generated else None for s in segments for i in range(s.start, s.end)]
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c0",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c0", "content": '{"temp": 18, "unit": "celsius"}'},
        {"role": "assistant", "content": answer},
    ]
    gt = GroundTruth(calls=[GoldCall(name="get_weather", arguments={"city": "Paris", "unit": "celsius"})], facts=["18"])
    return Trajectory(
        task_id="task-0",
        policy_version=3,
        tools=_TOOLS,
        messages=messages,
        tokens=tokens,
        logprobs=logprobs,
        segments=segments,
        ground_truth=gt,
        meta={"engine": "hf", "sampling": {"temperature": 1.0, "max_tokens": 128}},
    )


def encode_rate(encode, trajectory: Trajectory, seconds: float = 1.0) -> float:
    """Encodings per CPU second of one trajectory (the producer's CPU cost before any round trip; CPU time, so
    that other load on a shared machine does not count)."""
    done, started = 0, time.process_time()
    while (elapsed := time.process_time() - started) < seconds:
        for _ in range(100):
            encode(trajectory)
        done += 100
    return done / elapsed


async def recorder_rate(url: str, trajectories: list[Trajectory], concurrency: int) -> float:
    """trajectories/s through `TrajectoryRecorder.record` from `concurrency` concurrent callers."""
    client = aioredis.Redis.from_url(url, decode_responses=False)
    stream = Streams(f"bench{concurrency}")
    recorder = TrajectoryRecorder(client, stream, max_len=10**9, metrics=ServeMetrics(), max_bytes=10**13)
    todo = list(trajectories)

    async def caller() -> None:
        while todo:
            if not await recorder.record(todo.pop()):
                raise RuntimeError("the recorder refused a trajectory in the bench (bounds or Redis)")

    try:
        started = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(concurrency)))
        rate = len(trajectories) / (time.perf_counter() - started)
        await client.delete(stream.trajectories)
    finally:
        await client.aclose()
    return rate


def transport_rate(url: str, entries: list[dict], batch: int = PIPELINE) -> float:
    """Pre-encoded entries through a redis-py pipeline of `batch` XADDs: the client library's share alone."""
    client = redis.Redis.from_url(url)
    started = time.perf_counter()
    for i in range(0, len(entries), batch):
        pipe = client.pipeline(transaction=False)
        for fields in entries[i : i + batch]:
            pipe.xadd("bench:transport", fields)
        pipe.execute()
    rate = len(entries) / (time.perf_counter() - started)
    client.delete("bench:transport")
    client.close()
    return rate


@dataclass
class ProducerFigures:
    """Medians over `rounds` interleaved rounds (raw, transport, producer, serial producer in turn, so that a
    load change on a shared machine hits every contender alike); per-round lists in `rounds_detail`."""

    payload_bytes: int
    tokens: int
    rounds: int
    redis_benchmark_c1_per_s: float
    """redis-benchmark XADD, 1 connection × PIPELINE in flight: the same concurrency as our producer."""
    redis_benchmark_c4_per_s: float
    """redis-benchmark XADD, 4 connections × PIPELINE in flight (the setting of earlier reports)."""
    encode_entry_per_s: float
    """The contract's generic `encode_entry` (pydantic JSON-mode dump + msgpack), per CPU second."""
    recorder_encode_per_s: float
    """The recorder's encoder (same payload once decoded), per CPU second."""
    transport_per_s: float
    """Pre-encoded entries, redis-py pipeline ×PIPELINE: no encoding, no bound check."""
    recorder_serial_per_s: float
    """One caller at a time: every trajectory pays the bound check and XADD round trip alone."""
    recorder_per_s: float
    """The producer: PIPELINE concurrent callers, group commit."""
    producer_cpu_us: float = 0.0
    """CPU µs of the producer process per trajectory (encoding included), in the concurrent run."""
    server_cpu_us_producer: float = 0.0
    """redis-server CPU µs per trajectory added by the producer (script, XADD, AOF write)."""
    server_cpu_us_raw: float = 0.0
    """redis-server CPU µs per XADD of redis-benchmark (same payload size)."""
    rounds_detail: dict = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        """The producer ÷ raw XADD at the same concurrency, the figure the 0.5× target is about: the median of
        the rounds' ratios (each pairs runs seconds apart), else the ratio of the medians."""
        paired = self.rounds_detail.get("ratio") or []
        return statistics.median(paired) if paired else self.recorder_per_s / self.redis_benchmark_c1_per_s

    def to_dict(self) -> dict:
        return {**asdict(self), "ratio_producer_over_raw": self.ratio, "pipeline": PIPELINE}


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_producer(url: str, port: int, server_pid: int, tokenizer, n: int, rounds: int = 3) -> ProducerFigures:
    """`n` trajectories per producer run, `rounds` interleaved rounds; redis-benchmark sends 2n XADDs a run (it
    is faster: its runs must not be shorter than ours to be measured as well)."""
    base = realistic_trajectory(tokenizer)
    trajs = [base.model_copy(update={"id": f"p{i}", "task_id": f"task-{i // 8}"}) for i in range(n)]
    entry = encode_trajectory_entry(base)
    if _decoded(entry) != _decoded(encode_entry(base, id=base.id)):
        raise RuntimeError("the recorder's encoding decodes to another payload than encode_entry's")
    payload, raw_client = len(entry[b"data"]), redis.Redis(port=port)
    entries = [encode_trajectory_entry(t) for t in trajs]
    runs: dict[str, list[float]] = {"raw": [], "transport": [], "producer": [], "serial": [], "ratio": []}
    cpu = {"producer": 0.0, "server_producer": 0.0, "server_raw": 0.0}
    for _ in range(rounds):
        server0 = _cpu_s(server_pid)
        runs["raw"].append(redis_benchmark_xadd(port, payload, 2 * n, clients=1))
        cpu["server_raw"] += _cpu_s(server_pid) - server0
        raw_client.delete("bench:rb")
        runs["transport"].append(transport_rate(url, entries))
        own0, server0 = time.process_time(), _cpu_s(server_pid)
        runs["producer"].append(asyncio.run(recorder_rate(url, trajs, concurrency=PIPELINE)))
        cpu["producer"] += time.process_time() - own0
        cpu["server_producer"] += _cpu_s(server_pid) - server0
        runs["serial"].append(asyncio.run(recorder_rate(url, trajs[: max(n // 10, 50)], concurrency=1)))
        runs["ratio"].append(runs["producer"][-1] / runs["raw"][-1])
    c4 = redis_benchmark_xadd(port, payload, 2 * n, clients=4)
    raw_client.delete("bench:rb")
    raw_client.close()
    med = {k: statistics.median(v) for k, v in runs.items()}
    return ProducerFigures(
        payload_bytes=payload,
        tokens=len(base.tokens),
        rounds=rounds,
        redis_benchmark_c1_per_s=med["raw"],
        redis_benchmark_c4_per_s=c4,
        encode_entry_per_s=encode_rate(lambda t: encode_entry(t, id=t.id), base),
        recorder_encode_per_s=encode_rate(encode_trajectory_entry, base),
        transport_per_s=med["transport"],
        recorder_serial_per_s=med["serial"],
        recorder_per_s=med["producer"],
        producer_cpu_us=1e6 * cpu["producer"] / (rounds * n),
        server_cpu_us_producer=1e6 * cpu["server_producer"] / (rounds * n),
        server_cpu_us_raw=1e6 * cpu["server_raw"] / (rounds * 2 * n),
        rounds_detail={k: [round(x, 4 if k == "ratio" else 0) for x in v] for k, v in runs.items()},
    )


def _decoded(entry: dict) -> dict:
    import msgpack

    return msgpack.unpackb(entry[b"data"], raw=False)


def producer_lines(f: ProducerFigures) -> list[str]:
    """The producer's rows of the report, each rate with its ratio to raw XADD at the same concurrency."""
    raw = f.redis_benchmark_c1_per_s
    rows = [
        (f"redis-benchmark XADD -c 1 -P {PIPELINE} (same payload)", raw),
        (f"redis-benchmark XADD -c 4 -P {PIPELINE}", f.redis_benchmark_c4_per_s),
        (f"transport: pre-encoded, redis-py pipeline {PIPELINE}", f.transport_per_s),
        ("recorder, 1 caller at a time (round trips each)", f.recorder_serial_per_s),
        (f"PRODUCER: recorder, {PIPELINE} concurrent callers", f.recorder_per_s),
    ]
    out = [
        f"  stream producer — trajectory of {f.tokens} tokens, payload {f.payload_bytes:,} B; "
        f"medians of {f.rounds} interleaved rounds"
    ]
    out += [f"    {name:<52} {rate:>9,.0f} /s  {rate / raw:5.2f}×" for name, rate in rows]
    encode_us = 1e6 / f.recorder_encode_per_s
    out.append(
        f"    encoding alone, per CPU second: encode_entry {f.encode_entry_per_s:,.0f} /s, recorder's encoder "
        f"{f.recorder_encode_per_s:,.0f} /s ({encode_us:.0f} µs per trajectory)"
    )
    out.append(
        f"    CPU per trajectory: producer process {f.producer_cpu_us:.0f} µs (encoding ≈ {encode_us:.0f}, "
        f"client and event loop ≈ {max(f.producer_cpu_us - encode_us, 0):.0f}), redis-server "
        f"{f.server_cpu_us_producer:.0f} µs; redis-benchmark's XADD costs redis-server "
        f"{f.server_cpu_us_raw:.0f} µs"
    )
    out.append(
        f"    producer ÷ raw XADD = {f.ratio:.3f}, median of the rounds' ratios "
        f"({', '.join(f'{r:.2f}' for r in f.rounds_detail.get('ratio', []))}; "
        f"target ≥ 0.50: {'met' if f.ratio >= 0.5 else 'NOT met'})"
    )
    return out
