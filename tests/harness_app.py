"""A minimal Celery app used only to test the worker fixture itself."""

import os
import time

from celery import Celery

app = Celery("harness", broker=os.environ.get("SLCA_REDIS_URL"), backend=os.environ.get("SLCA_REDIS_URL"))
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    # a killed worker's unacked message is restored once older than visibility_timeout (longer than the
    # slowest task); kombu scans for such messages every unacked_restore_interval seconds (default ~100 s)
    broker_transport_options={"visibility_timeout": 5, "unacked_restore_interval": 1, "unacked_restore_throttle": 1},
)


@app.task(name="harness.add")
def add(a: int, b: int) -> int:
    return a + b


@app.task(name="harness.slow_add")
def slow_add(a: int, b: int, delay: float) -> int:
    time.sleep(delay)  # stands in for a long scorer, so a test can kill the worker mid-task
    return a + b
