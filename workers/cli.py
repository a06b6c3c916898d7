"""`slca worker` (a Celery scoring worker), `slca assembler` (stream consumer + group assembly); `slca bench queue` is
in ops (it composes serve's producer with the worker side, ops/bench/queue/workers.py)."""

from __future__ import annotations

import os
import tempfile


def register(commands, bench) -> None:
    worker = commands.add_parser("worker", help="a Celery worker scoring trajectories (HierR)")
    worker.add_argument("--concurrency", type=int, help="worker processes (default: workers.concurrency)")
    worker.add_argument("--loglevel", help="Celery's log level (default: common.log_level)")
    worker.add_argument("--name", help="the worker's node name (Celery's -n, e.g. score1@%%h; default celery@host)")
    worker.set_defaults(func=_worker, service=True)
    assembler = commands.add_parser("assembler", help="stream consumer → scoring tasks, and group assembly")
    assembler.set_defaults(func=_assembler, service=True)


def _settings(config):
    from workers.settings import WorkerSettings

    return config.get(WorkerSettings)


def _worker(args, config) -> int:
    """A Celery worker (prefork) of the scoring app built here from the loaded configuration (file, environment,
    `--set`): the pool's children fork from this process and inherit the app, so no configuration is written
    back into environment variables for them."""
    from workers.celery_app import make_celery_app

    s = _settings(config)
    if s.metrics_port:
        _aggregate_child_metrics(s.metrics_port)
    app = make_celery_app(s, config.common.redis_or_default(), config.common.stream_prefix)
    argv = [
        "worker",
        "--pool",
        "prefork",
        "-c",
        str(args.concurrency or s.concurrency),
        "-Q",
        s.score_queue,
        "--without-gossip",
        "--without-mingle",
        "--loglevel",
        args.loglevel or config.common.log_level,
    ]
    if args.name:
        argv += ["-n", args.name]
    app.worker_main(argv)
    return 0


def _aggregate_child_metrics(port: int) -> None:
    """Prefork children each write their samples under `PROMETHEUS_MULTIPROC_DIR` (prometheus_client's own
    switch, not our configuration); one endpoint in the parent, started when the worker initialises, aggregates
    them. prometheus_client picks its value class from that variable when first imported, which may have
    happened already (the CLI loads every component's commands): it is picked again here, before the children
    create their metrics (`workers.pipeline.process_metrics`, after fork)."""
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="slca-worker-metrics-"))
    from celery.signals import worker_init
    from prometheus_client import values

    values.ValueClass = values.get_value_class()

    def serve(**_kwargs) -> None:
        from prometheus_client import CollectorRegistry, multiprocess, start_http_server

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        start_http_server(port, registry=registry)

    worker_init.connect(serve, weak=False)


def _assembler(args, config) -> int:

    from workers.assembler import run_assembler
    from workers.celery_app import make_celery_app
    from slca.logs import setup_logging

    setup_logging(config.common.log_level)
    s = _settings(config)
    url = config.common.redis_or_default()
    if s.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(s.metrics_port)
    run_assembler(s, url, config.common.stream_prefix, make_celery_app(s, url, config.common.stream_prefix))
    return 0
