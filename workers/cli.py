"""`slca worker` (a Celery scoring worker), `slca assembler` (stream consumer + group assembly), `slca bench queue`."""

from __future__ import annotations

import os
import sys
import tempfile


def register(commands, bench) -> None:
    worker = commands.add_parser("worker", help="a Celery worker scoring trajectories (HierR)")
    worker.add_argument("--concurrency", type=int, help="worker processes (default: workers.concurrency)")
    worker.add_argument("--loglevel", default="INFO")
    worker.set_defaults(func=_worker)
    assembler = commands.add_parser("assembler", help="stream consumer → scoring tasks, and group assembly")
    assembler.set_defaults(func=_assembler)
    queue = bench.add_parser("queue", help="stream throughput vs redis-benchmark, end-to-end scored trajectories/s")
    queue.add_argument("--trajectories", type=int, default=4000, help="trajectories for the end-to-end run")
    queue.add_argument("--stream-entries", type=int, default=100000, help="entries for the raw stream run")
    queue.add_argument("--workers", type=int, default=1, help="Celery worker processes in the end-to-end run")
    queue.add_argument("--out", help="also write the figures as JSON here")
    queue.set_defaults(func=_bench_queue)


def _settings(config):
    from workers.settings import WorkerSettings

    return config.get(WorkerSettings)


def _worker(args, config) -> int:
    """Exec `celery -A workers.celery_app worker`: the module-level app reads the same configuration from the
    environment (file and --set overrides are passed on as SLCA_* variables)."""
    s = _settings(config)
    env = dict(os.environ)
    if config.source:
        env["SLCA_CONFIG"] = str(config.source)
    for section, values in config.raw.items():
        for key, value in values.items():
            env[f"SLCA_{section.upper()}__{key.upper()}"] = value if isinstance(value, str) else _json(value)
    env.setdefault("SLCA_REDIS_URL", config.common.redis_or_default())
    if s.metrics_port:
        # Prefork children each write their samples here; the parent's endpoint aggregates them.
        env.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="slca-worker-metrics-"))
    concurrency = args.concurrency or s.concurrency
    argv = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "--pool", "prefork",
            "-c", str(concurrency), "-Q", s.score_queue, "--without-gossip", "--without-mingle",
            "--loglevel", args.loglevel]  # fmt: skip
    os.execve(sys.executable, argv, env)
    return 0  # not reached


def _json(value) -> str:
    import json

    return json.dumps(value)


def _assembler(args, config) -> int:
    import logging

    from workers.assembler import run_assembler
    from workers.celery_app import create_app

    logging.basicConfig(level=config.common.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    s = _settings(config).with_tokenizer_of(config.common)
    url = config.common.redis_or_default()
    if s.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(s.metrics_port)
    run_assembler(s, url, config.common.stream_prefix, create_app(s, url, config.common.stream_prefix))
    return 0


def _bench_queue(args, config) -> int:
    from workers.benchmark import run_queue_bench

    return run_queue_bench(args, config)
