"""The test harness itself: an owned Redis that survives SIGKILL with AOF, and real Celery workers."""

from celery import Celery

from tests.support.wait import wait_for


def test_owned_redis_is_not_the_shared_one(redis_server, redis_client):
    assert redis_server.port != 6379
    assert redis_client.ping()


def test_aof_survives_sigkill(durable_redis_server, durable_redis_client):
    durable_redis_client.xadd("s", {"k": "v"})
    durable_redis_server.restart()  # SIGKILL then start on the same dir and port
    assert durable_redis_client.xlen("s") == 1


def test_celery_worker_runs_tasks_and_redelivers_after_sigkill(celery_workers, redis_url):
    client = Celery(broker=redis_url, backend=redis_url)
    client.conf.update(task_serializer="json", accept_content=["json"], result_serializer="json")
    worker = celery_workers.start("tests.harness_app", name="a")
    assert client.send_task("harness.add", args=(2, 3)).get(timeout=30) == 5
    slow = client.send_task("harness.slow_add", args=(1, 1, 2.0))
    # wait until the task is running in the worker, then kill it mid-task
    inspect = client.control.inspect(timeout=1.0)
    wait_for(lambda: any((inspect.active() or {}).values()), 60, "the task to be active in the worker")
    celery_workers.kill(worker)
    celery_workers.start("tests.harness_app", name="b")
    # acks_late + reject_on_worker_lost: the killed task goes back to the queue and finishes elsewhere
    assert slow.get(timeout=60) == 2
    client.close()
