"""The scoring Celery app: a factory, plus the one module-level `app` that `celery -A workers.celery_app` needs.

Delivery guarantees (DESIGN.md §7, Celery docs): JSON only (no pickle); `acks_late` so a task is acknowledged
after it ran; `task_reject_on_worker_lost` so a killed child's task is requeued; prefetch 1 so a dying worker
holds at most one task; the broker's visibility timeout (longer than the slowest scorer) brings back tasks whose
worker vanished entirely. Retries only for transient errors (Redis unreachable, judge unreachable), with
exponential backoff and full jitter; anything else is dead-lettered by the pipeline, never retried.
"""

from __future__ import annotations

import logging
import os

import redis
from celery import Celery, Task
from celery.signals import worker_init

from workers.scoring import TransientJudgeError
from workers.settings import WorkerSettings

log = logging.getLogger(__name__)
SCORE_TASK = "workers.score"
TRANSIENT_ERRORS = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError, TransientJudgeError)


class ScoreTask(Task):
    """Holds one `ScoringPipeline` per worker process (created after fork, on first use)."""

    _pipeline = None
    _pid = None

    @property
    def pipeline(self):
        if self._pipeline is None or self._pid != os.getpid():
            from workers.pipeline import ScoringPipeline
            from workers.redisconn import connect

            app = self.app
            client = connect(app.slca_redis_url)
            self._pipeline = ScoringPipeline(client, app.slca_settings, app.slca_prefix)
            self._pid = os.getpid()
        return self._pipeline

    def on_failure(self, exc, task_id, args, kwargs, einfo):
        """Retries exhausted (or an unexpected bug): record the entries as dead rather than lose them."""
        import base64

        items = args[0] if args else []
        try:
            for traj_id, payload_b64, *entry in items:
                if not self.pipeline.client.exists(self.pipeline.keys.member(traj_id)):
                    self.pipeline.dead_letter(traj_id, f"task_failed: {type(exc).__name__}: {exc}",
                                              base64.b64decode(payload_b64 or ""), entry[0] if entry else None)  # fmt: skip
        except redis.RedisError as redis_exc:  # Redis is down too: say which entries could not be recorded
            log.error("task %s failed (%s) and its %d entries could not be dead-lettered: %s", task_id, exc,
                      len(items), redis_exc)  # fmt: skip


def create_app(settings: WorkerSettings | None = None, redis_url: str | None = None, prefix: str = "slca") -> Celery:
    s = settings or WorkerSettings()
    url = redis_url or "redis://127.0.0.1:6379/0"
    app = Celery("slca.workers", broker=url, backend=url, set_as_current=False)
    # unacked_restore_*: scan for tasks of vanished workers every restore_interval_s (kombu's default is ~100 s)
    transport = {"visibility_timeout": s.visibility_timeout_s, "unacked_restore_interval": s.restore_interval_s,
                 "unacked_restore_throttle": 1}  # fmt: skip
    app.conf.update(
        task_serializer="json", result_serializer="json", accept_content=["json"],
        task_acks_late=True, task_reject_on_worker_lost=True, worker_prefetch_multiplier=1,
        broker_transport_options=transport, result_backend_transport_options=transport,
        task_routes={SCORE_TASK: {"queue": s.score_queue}}, task_default_queue=s.score_queue,
        task_ignore_result=True,  # rewards live in their own idempotent keys; results would only fill Redis
        broker_connection_retry_on_startup=True, broker_connection_max_retries=None,
        worker_hijack_root_logger=False,
    )  # fmt: skip
    app.slca_redis_url, app.slca_settings, app.slca_prefix = url, s, prefix

    @app.task(name=SCORE_TASK, base=ScoreTask, bind=True, autoretry_for=TRANSIENT_ERRORS,
              retry_backoff=s.retry_backoff_s, retry_backoff_max=s.retry_backoff_max_s, retry_jitter=True,
              max_retries=s.task_max_retries)  # fmt: skip
    def score(self, items: list[list[str]]) -> list[str]:
        """Score a batch of trajectories, each [id, base64 msgpack payload] or [id, payload, stream entry id]
        (the entry is deleted from slca:trajectories once grouped), and add them to their groups."""
        return self.pipeline.process([tuple(item) for item in items])

    return app


def app_from_environment() -> Celery:
    """The app as configured by the environment / config file (what `slca worker` and `celery -A` use)."""
    from slca.config import load_config

    config = load_config()
    settings = config.get(WorkerSettings).with_tokenizer_of(config.common)
    return create_app(settings, config.common.redis_or_default(), config.common.stream_prefix)


app = app_from_environment()


def _serve_worker_metrics(**_kwargs) -> None:
    """`slca worker` with a metrics port: one endpoint aggregating the prefork children's samples."""
    port = int(os.environ.get("SLCA_WORKERS__METRICS_PORT", "0") or 0)
    if port and os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import CollectorRegistry, multiprocess, start_http_server

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        start_http_server(port, registry=registry)


worker_init.connect(_serve_worker_metrics, weak=False)
