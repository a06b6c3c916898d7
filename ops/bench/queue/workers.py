"""The worker side of `slca bench queue` (ops/bench/queue/main.py runs it with the producer side, producer.py):
the queue path measured side by side in one run, on one owned Redis.

1. raw stream: `redis-benchmark` XADD (pipelined ×16, the trajectory's payload size) vs our producer's XADD of
   encoded trajectories (redis-py, pipelined ×16), and consumer-group reads + acks (XREADGROUP 256 + XACK);
2. intake: the assembler's consumer moving entries into Celery tasks (XREADGROUP → send_task → XACK);
3. scoring alone: `score_trajectory` in this process (rule judge);
4. end to end: stream → Celery worker processes → groups on `slca:groups`, trajectories/s and per worker.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis

from slca.contracts import GoldCall, GroundTruth, Segment, Streams, Trajectory, encode_entry
from slca.redis_server import RedisServer
from workers.settings import WorkerSettings

REPO = Path(__file__).resolve().parents[2]


def sample_trajectories(tokenizer_dir: str, n: int, group_size: int) -> list[Trajectory]:
    """Real episodes: a tokenized ChatML prompt, a Hermes call, a tool result and an answer; G per task."""
    from workers.scoring.extract import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    parts = [
        ("system", "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"),
        ("user", "<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n<|im_start|>assistant\n"),
        ("tool_call", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'),
        (
            "tool_result",
            '\n<|im_start|>user\n<tool_response>\n{"temp": 18}\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
        ),
        ("summary", "It is 18 degrees in Paris.<|im_end|>"),
    ]
    tokens, segments, turn = [], [], 0
    for kind, text in parts:
        ids = tok.encode(text, add_special_tokens=False).ids
        segments.append(Segment(start=len(tokens), end=len(tokens) + len(ids), kind=kind, turn=turn))
        tokens += ids
        turn += kind == "tool_result"
    logprobs = [-0.1 if s.kind.generated else None for s in segments for _ in range(s.end - s.start)]
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            },
        }
    ]
    gt = GroundTruth(calls=[GoldCall(name="get_weather", arguments={"city": "Paris"})], facts=["18"])
    base = Trajectory(
        task_id="t", policy_version=0, tools=tools, tokens=tokens, logprobs=logprobs, segments=segments, ground_truth=gt
    )
    return [base.model_copy(update={"id": f"b{i}", "task_id": f"task-{i // group_size}"}) for i in range(n)]


def redis_benchmark_xadd(port: int, payload_bytes: int, n: int, clients: int = 4, pipeline: int = 16) -> float:
    """requests/s of redis-benchmark's XADD of a `payload_bytes` field, `clients` connections × `pipeline`."""
    cmd = [
        "redis-benchmark",
        "-p",
        str(port),
        "-n",
        str(n),
        "-P",
        str(pipeline),
        "-c",
        str(clients),
        "-q",
        "XADD",
        "bench:rb",
        "*",
        "data",
        "x" * payload_bytes,
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300).stdout
    rates = re.findall(r"([\d.]+) requests per second", out.replace("\r", "\n"))
    if not rates:
        raise RuntimeError(f"redis-benchmark gave no rate: {out[-300:]}")
    return float(rates[-1])


def our_xadd(client: redis.Redis, stream: str, entries: list[dict], batch: int = 16) -> float:
    started = time.perf_counter()
    for i in range(0, len(entries), batch):
        pipe = client.pipeline(transaction=False)
        for fields in entries[i : i + batch]:
            pipe.xadd(stream, fields)
        pipe.execute()
    return len(entries) / (time.perf_counter() - started)


def our_read_ack(client: redis.Redis, stream: str, n: int) -> float:
    client.xgroup_create(stream, "bench", id="0")
    started, done = time.perf_counter(), 0
    while done < n:
        reply = client.xreadgroup("bench", "c", {stream: ">"}, count=256)
        ids = [entry_id for entry_id, _ in reply[0][1]] if reply else []
        if not ids:
            break
        client.xack(stream, "bench", *ids)
        done += len(ids)
    return done / (time.perf_counter() - started)


def intake_rate(url: str, settings: WorkerSettings, entries: list[dict]) -> float:
    """The assembler's consumer alone (no worker running): entries/s from the stream into Celery's queue."""
    from workers.celery_app import make_celery_app
    from workers.consumer import StreamConsumer
    from workers.metrics import WorkerMetrics
    from prometheus_client import CollectorRegistry

    client = redis.Redis.from_url(url)
    s = settings.model_copy(
        update={"consumer_group": "bench-intake", "score_queue": "bench.intake", "max_inflight": 10**9}
    )
    consumer = StreamConsumer(
        client, make_celery_app(s, url, "benchintake"), s, "benchintake", WorkerMetrics.create(CollectorRegistry())
    )
    our_xadd(client, consumer.stream, entries)
    consumer.ensure_group()
    consumer.recover_own = False
    started, done = time.perf_counter(), 0
    while done < len(entries):
        done += consumer.poll()
    rate = done / (time.perf_counter() - started)
    client.delete(consumer.stream, "bench.intake")
    return rate


def scoring_rate(settings: WorkerSettings, trajs: list[Trajectory]) -> float:
    from workers.scoring import score_trajectory

    started = time.perf_counter()
    for t in trajs:
        score_trajectory(t, settings)
    return len(trajs) / (time.perf_counter() - started)


def start_celery(url: str, settings: WorkerSettings, processes: int, log_dir: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "SLCA_REDIS_URL": url,
        "PYTHONPATH": str(REPO),
        **{f"SLCA_WORKERS__{k.upper()}": str(v) for k, v in settings.model_dump().items() if v is not None},
    }
    cmd = [
        sys.executable,
        "-m",
        "slca",
        "worker",
        "--concurrency",
        str(processes),
        "--loglevel",
        "WARNING",
        "--name",
        "bench@%h",
    ]
    log = open(log_dir / "celery-bench.log", "wb")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    from celery import Celery

    probe = Celery(broker=url, backend=url)
    deadline = time.monotonic() + 120
    while not (probe.control.ping(timeout=0.5) or []):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"celery worker did not start; see {log_dir}/celery-bench.log")
    probe.close()
    return proc


def end_to_end(
    url: str, settings: WorkerSettings, trajs: list[Trajectory], processes: int, log_dir: Path, redis_pid: int
) -> dict:
    from workers.assembler import run_assembler
    from workers.celery_app import make_celery_app

    client = redis.Redis.from_url(url)
    worker = start_celery(url, settings, processes, log_dir)
    stop = threading.Event()
    thread = threading.Thread(
        target=run_assembler, args=(settings, url, "slca", make_celery_app(settings, url), stop), daemon=True
    )
    try:
        thread.start()
        expected = len(trajs) // settings.group_size
        groups = Streams().groups
        entries = [encode_entry(t, id=t.id) for t in trajs]  # serve encodes once per episode, before XADD
        worker_cpu0, own_cpu0, redis_cpu0 = (
            process_group_cpu_s(worker.pid),
            time.process_time(),
            process_cpu_s(redis_pid),
        )
        started = time.perf_counter()
        our_xadd(client, Streams().trajectories, entries)
        while client.xlen(groups) < expected:
            if time.perf_counter() - started > 600:
                raise RuntimeError(f"end-to-end run stalled at {client.xlen(groups)}/{expected} groups")
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
        worker_cpu, own_cpu = process_group_cpu_s(worker.pid) - worker_cpu0, time.process_time() - own_cpu0
        redis_cpu = process_cpu_s(redis_pid) - redis_cpu0
    finally:
        stop.set()
        thread.join(timeout=30)
        os.killpg(worker.pid, 9)
        worker.wait()
    n = len(trajs)
    return {
        "trajectories": n,
        "groups": expected,
        "seconds": elapsed,
        "trajectories_per_s": n / elapsed,
        "per_worker_process": n / elapsed / processes,
        "worker_cpu_ms_per_trajectory": 1000 * worker_cpu / n,
        "assembler_and_feeder_cpu_ms_per_trajectory": 1000 * own_cpu / n,
        "redis_cpu_ms_per_trajectory": 1000 * redis_cpu / n,
        "load_average_1m": os.getloadavg()[0],
    }


def _cpu_fields(pid: str) -> list[str] | None:
    try:  # fields after the command name: state, ppid, pgrp, ..., utime (index 11), stime (index 12)
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def process_cpu_s(pid: int) -> float:
    fields = _cpu_fields(str(pid))
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else 0.0


def process_group_cpu_s(pgid: int) -> float:
    """User + system CPU seconds of every live process in a process group (a Celery worker and its children)."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        fields = _cpu_fields(pid)
        if fields and int(fields[2]) == pgid:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def measure(server: RedisServer, settings: WorkerSettings, trajs: list[Trajectory], args, tmp: Path) -> dict:
    client = redis.Redis.from_url(server.url)
    n = args.stream_entries
    entries = [encode_entry(t, id=t.id) for t in trajs[:n]]
    out = {"redis_benchmark_xadd_per_s": redis_benchmark_xadd(server.port, len(entries[0][b"data"]), n)}
    out["our_xadd_per_s"] = our_xadd(client, "bench:ours", entries)
    out["our_readgroup_ack_per_s"] = our_read_ack(client, "bench:ours", n)
    client.flushall()
    out["intake_stream_to_celery_per_s"] = intake_rate(server.url, settings, entries[: min(n, 20000)])
    out["scoring_only_per_s"] = scoring_rate(settings, trajs[:2000])
    client.flushall()
    out["end_to_end"] = end_to_end(server.url, settings, trajs[: args.trajectories], args.workers, tmp, server.proc.pid)
    return out


def print_report(r: dict, workers: int) -> None:
    rb = r["redis_benchmark_xadd_per_s"]
    e2e = r["end_to_end"]
    print(f"slca bench queue — {r['redis']}; trajectory payload {r['payload_bytes']} B")
    print(f"  redis-benchmark XADD (-P 16, same payload)   {rb:>10,.0f} /s   1.00×")
    print(
        f"  redis-py XADD, pre-encoded (pipeline 16)    {r['our_xadd_per_s']:>10,.0f} /s   "
        f"{r['our_xadd_per_s'] / rb:.2f}×"
    )
    print(
        f"  our consumer XREADGROUP 256 + XACK          {r['our_readgroup_ack_per_s']:>10,.0f} /s   "
        f"{r['our_readgroup_ack_per_s'] / rb:.2f}×"
    )
    print(f"  intake: stream → Celery task → XACK         {r['intake_stream_to_celery_per_s']:>10,.0f} /s")
    print(f"  scoring only (rule judge, one process)      {r['scoring_only_per_s']:>10,.0f} /s")
    print(
        f"  end to end: stream → Celery ({workers} worker process(es)) → groups: "
        f"{e2e['trajectories']} trajectories in {e2e['seconds']:.1f} s = {e2e['trajectories_per_s']:,.0f} /s, "
        f"{e2e['per_worker_process']:,.0f} /s per worker process"
    )
    print(
        f"  CPU per trajectory: worker processes {e2e['worker_cpu_ms_per_trajectory']:.2f} ms "
        f"(⇒ ≈{1000 / e2e['worker_cpu_ms_per_trajectory']:,.0f} /s per worker process on a free core), "
        f"assembler + feeder {e2e['assembler_and_feeder_cpu_ms_per_trajectory']:.2f} ms, "
        f"redis-server {e2e['redis_cpu_ms_per_trajectory']:.2f} ms; "
        f"host load average {e2e['load_average_1m']:.1f} on {os.cpu_count()} cores"
    )
    print(
        f"  targets: ≥ 10,000 /s through the stream: {'met' if r['our_readgroup_ack_per_s'] >= 1e4 else 'NOT met'} "
        f"(raw), {'met' if r['intake_stream_to_celery_per_s'] >= 1e4 else 'NOT met'} (into Celery); "
        f"≥ 500 scored /s per worker: {'met' if e2e['per_worker_process'] >= 500 else 'NOT met'}"
    )
