import time

import pytest
import redis

from tests.ops.observe.dashboard.system import History, HistoryClock, write_history


@pytest.fixture
def history(redis_url, builder, tiny_model_dir, tmp_path, monkeypatch) -> History:
    """Five versions of scored trajectories, groups and learner steps over the 15 minutes before now."""
    import learner.loop
    import workers.pipeline

    clock = HistoryClock(time.time() - 15 * 60)
    monkeypatch.setattr(workers.pipeline, "time", clock)
    monkeypatch.setattr(learner.loop, "time", clock)
    return write_history(redis.Redis.from_url(redis_url), builder, tiny_model_dir, tmp_path / "learner", clock)
