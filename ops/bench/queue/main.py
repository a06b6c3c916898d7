"""`slca bench queue`: the stream producer (serve's recorder) and the worker side (ops.bench.queue.workers), side by
side with redis-benchmark on one owned redis-server, in one run. Lives in ops because it composes serve and
workers."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

from ops.bench.ab import check_no_paths, machine_now
from ops.bench.common import bench_command
from ops.common.machine import machine_facts
from ops.bench.queue.producer import measure_producer, producer_lines
from slca.redis_server import RedisServer


def run_queue_bench(args, config) -> int:
    from slca.cli import CliError
    from ops.bench.queue import workers as worker_bench
    from workers.scoring.extract import load_tokenizer
    from workers.settings import WorkerSettings

    settings = config.get(WorkerSettings).with_tokenizer_of(config.common)
    if not (Path(settings.tokenizer) / "tokenizer.json").is_file():
        raise CliError(f"no tokenizer at {settings.tokenizer}: run `slca model fetch` (or set workers.tokenizer)")
    settings = settings.model_copy(update={"max_inflight": 10**9, "max_groups_len": 10**9})
    results: dict = {
        "command": bench_command("queue", sys.argv),
        "machine": machine_facts(),
        "redis": "owned redis-server, AOF appendfsync everysec, loopback",
    }
    with tempfile.TemporaryDirectory(prefix="slca-bench-queue-") as tmp:
        server = RedisServer(Path(tmp) / "redis", appendonly=True, appendfsync="everysec").start()
        try:
            producer = measure_producer(
                server.url, server.port, server.proc.pid, load_tokenizer(settings.tokenizer), args.producer_entries
            )
            results["producer"] = producer.to_dict()
            if not args.producer_only:
                n = max(args.trajectories, args.stream_entries)
                trajs = worker_bench.sample_trajectories(settings.tokenizer, n, settings.group_size)
                results["payload_bytes"] = len(worker_bench.encode_entry(trajs[0], id=trajs[0].id)[b"data"])
                results.update(worker_bench.measure(server, settings, trajs, args, Path(tmp)))
        finally:
            server.kill()
    table = io.StringIO()
    with contextlib.redirect_stdout(table):
        if not args.producer_only:
            worker_bench.print_report(results, args.workers)
        print("\n".join(producer_lines(producer)))
    print(table.getvalue(), end="")
    results["machine_end"] = machine_now()
    if args.out:
        check_no_paths(
            results, table.getvalue()
        )  # a directory (results.json + table.txt), or a .json file with the table beside it
        out = Path(args.out)
        json_path, table_path = (
            (out, out.with_suffix(".txt")) if out.suffix == ".json" else (out / "results.json", out / "table.txt")
        )
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(results, indent=2) + "\n")
        table_path.write_text(f"$ {results['command']}\n{table.getvalue()}")
    return 0
