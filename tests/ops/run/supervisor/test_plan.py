"""`slca up`'s process plan: what each child is started with."""

from __future__ import annotations

import json


def test_named_processes_get_their_thread_count_and_the_others_torch_default(tmp_path):
    from ops.run.supervisor.plan import build_specs
    from slca.config import load_config

    threads = json.dumps({"serve": 1, "learn": 2})
    config = load_config(None, [f"ops.process_threads={threads}"])
    available = {"serve", "worker", "assembler", "learn", "feed"}
    specs, skipped = build_specs(config, [], {"SLCA_REDIS_URL": "redis://x"}, tmp_path, available)
    env = {spec.name: spec.env for spec in specs}
    assert skipped == []
    assert env["serve"]["OMP_NUM_THREADS"] == "1" and env["learn"]["OMP_NUM_THREADS"] == "2"
    assert "OMP_NUM_THREADS" not in env["worker"] and env["worker"]["SLCA_REDIS_URL"] == "redis://x"
