"""The scoring Celery app, built by `make_celery_app(settings, redis_url, prefix)` from the settings it is given.

There is no module-level app and nothing here reads the environment: `slca worker` loads the configuration
(file, environment, `--set`) and builds the app in its own process (`workers.cli`); the assembler builds one
to send tasks; tests build theirs.

Delivery guarantees (docs/design.md#queues, Celery docs): JSON only (no pickle); `acks_late` so a task is acknowledged
after it ran; `task_reject_on_worker_lost` so a killed child's task is requeued; prefetch 1 so a dying worker
holds at most one task; the broker's visibility timeout (longer than the slowest scorer) brings back tasks whose
worker vanished entirely. Retries only for transient errors (Redis unreachable, judge unreachable), with
exponential backoff and full jitter; anything else is dead-lettered by the pipeline, never retried.

A task carries stream entry ids of `slca:trajectories`, not trajectories: the worker reads each entry from
Redis (`ScoringPipeline.process`). An entry that is gone was grouped or dead-lettered already (entries leave
the stream only then), so a redelivered task finds nothing left to do.
"""

from __future__ import annotations

import base64
import json
import logging
import os

import redis
from celery import Celery, Task

from workers.scoring import TransientJudgeError
from workers.settings import WorkerSettings

log = logging.getLogger(__name__)
SCORE_TASK = "workers.score"
KOMBU_UNACKED_KEY = "unacked"
"""The hash in which kombu's Redis transport keeps the messages workers hold unacknowledged (its default
`unacked_key`, which `make_celery_app` leaves alone)."""
TRANSIENT_ERRORS = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.BusyLoadingError,
    redis.exceptions.OutOfMemoryError,  # a full Redis (noeviction) refuses writes until the learner drains groups
    TransientJudgeError,
)


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
        entry_ids = args[0] if args else []
        try:
            self.pipeline.dead_letter_entries(entry_ids, f"task_failed: {type(exc).__name__}: {exc}")
        except redis.RedisError as redis_exc:  # Redis is down too: say which entries could not be recorded
            log.error(
                "task %s failed (%s) and its entries %s could not be dead-lettered: %s",
                task_id,
                exc,
                entry_ids,
                redis_exc,
            )


def make_celery_app(settings: WorkerSettings, redis_url: str, prefix: str = "slca") -> Celery:
    """The scoring app: broker and result backend `redis_url`, stream names under `prefix`."""
    s = settings
    app = Celery("slca.workers", broker=redis_url, backend=redis_url, set_as_current=False)
    # unacked_restore_*: scan for tasks of vanished workers every restore_interval_s (kombu's default is ~100 s);
    # unacked_mutex_expire: a worker killed inside its scan must not block every other scan for kombu's 300 s
    transport = {
        "visibility_timeout": s.visibility_timeout_s,
        "unacked_restore_interval": s.restore_interval_s,
        "unacked_restore_throttle": 1,
        "unacked_mutex_expire": s.restore_lock_s,
    }
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_transport_options=transport,
        result_backend_transport_options=transport,
        task_routes={SCORE_TASK: {"queue": s.score_queue}},
        task_default_queue=s.score_queue,
        task_ignore_result=True,  # rewards live in their own idempotent keys; results would only fill Redis
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        worker_hijack_root_logger=False,
    )
    app.slca_redis_url, app.slca_settings, app.slca_prefix = redis_url, s, prefix

    @app.task(
        name=SCORE_TASK,
        base=ScoreTask,
        bind=True,
        autoretry_for=TRANSIENT_ERRORS,
        retry_backoff=s.retry_backoff_s,
        retry_backoff_max=s.retry_backoff_max_s,
        retry_jitter=True,
        max_retries=s.task_max_retries,
    )
    def score(self, entry_ids: list[str]) -> list[str]:
        """Score the trajectories of these `slca:trajectories` entries (read from Redis by id) and add them to
        their groups; each entry is deleted from the stream once its trajectory is grouped or dead-lettered."""
        return self.pipeline.process(list(entry_ids))

    return app


def task_entry_ids(raw: bytes) -> list[str]:
    """The stream entry ids a scoring task message carries, as kombu's Redis transport stores it: in the queue a
    JSON envelope with a base64 JSON body `[args, kwargs, embed]`, in the unacknowledged hash `[envelope, exchange,
    routing key]`. Anything else (another task, a message this code cannot read) names no entry."""
    try:
        message = json.loads(raw)
        envelope = message[0] if isinstance(message, list) else message
        if envelope.get("headers", {}).get("task") != SCORE_TASK:
            return []
        body = envelope["body"]
        if envelope.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
        return [str(entry_id) for entry_id in args[0]]
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return []
