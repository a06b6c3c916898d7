"""`slca status` on a Redis holding a run: the feed's rewards and the probe's rounds (as the probe publishes
them), the round files under the data dir (`run_in_redis` below; `slca bench online` reads the same run in
tests/ops/observe/test_online.py)."""

from types import SimpleNamespace

import redis

from ops.run.status import run_status
from slca.config import load_config
from slca.contracts import Streams
from slca.contracts.queues import STATS_REWARDS
from tests.ops.observe.dashboard.system import write_probe_rounds
from tests.ops.observe.test_reward_curve import synthetic_rounds


def run_in_redis(redis_url, tmp_path):
    data_dir = tmp_path / "var"
    entries = synthetic_rounds(data_dir)
    write_probe_rounds(redis_url, [SimpleNamespace(to_json=lambda e=e: e) for e in entries])
    client = redis.Redis.from_url(redis_url)
    for i in range(6):
        client.xadd(
            Streams().stats(STATS_REWARDS),
            {"exec": 0.5 + 0.05 * i, "pref": 0.5, "tool_turns": 1, "policy_version": 10 * i, "ts": 1000.0 + 60 * i},
        )
    config = load_config(None, [f"common.redis_url={redis_url}", f"common.data_dir={data_dir}"])
    return config, entries


def test_status_prints_the_probe_headline(redis_url, tmp_path, capsys):
    config, entries = run_in_redis(redis_url, tmp_path)
    assert run_status(SimpleNamespace(window=50), config) == 0
    out = capsys.readouterr().out
    assert "held-out probe (greedy, 40 items;" in out
    assert "  v0 → v60: held-out +0.310 [+0.138, +0.483] p=0.00391 (+9/−0 of 29) | test +0.368" in out
    assert "  v0 | held-out 0.367 [0.219, 0.545] n=30 | BFCL 0.400 [0.168, 0.687] n=10" in out
