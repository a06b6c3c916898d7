"""`slca up`'s process plan: what each child is started with."""

from __future__ import annotations

import json
import os
from pathlib import Path


def test_named_processes_get_their_thread_count_and_the_others_torch_default(tmp_path):
    from ops.run.supervisor.plan import build_specs
    from slca.config import load_config

    threads = json.dumps({"serve": 1, "learn": 2})
    config = load_config(None, [f"ops.process_threads={threads}"])
    available = {"serve", "worker", "assembler", "learn", "feed", "gate"}
    specs, skipped = build_specs(config, [], {"SLCA_REDIS_URL": "redis://x"}, tmp_path, available)
    env = {spec.name: spec.env for spec in specs}
    assert skipped == []
    assert env["serve"]["OMP_NUM_THREADS"] == "1" and env["learn"]["OMP_NUM_THREADS"] == "2"
    assert "OMP_NUM_THREADS" not in env["worker"] and env["worker"]["SLCA_REDIS_URL"] == "redis://x"


def _threads(overrides, base_env=None):
    from ops.run.supervisor.plan import build_specs
    from slca.config import load_config

    config = load_config(None, overrides)
    available = {"serve", "worker", "assembler", "learn", "feed", "gate"}
    specs, _ = build_specs(config, [], dict(base_env or {}), Path("/nonexistent"), available)
    return {spec.name: spec.env.get("OMP_NUM_THREADS") for spec in specs}


def test_by_default_the_hf_engine_and_the_learner_split_the_cores_and_vllm_gets_nothing():
    cores = len(os.sched_getaffinity(0))
    threads = _threads(["serve.engine=hf"])
    assert int(threads["serve"]) + int(threads["learn"]) == max(2, cores)
    assert threads["worker"] is None and threads["feed"] is None
    assert set(_threads(["serve.engine=vllm"]).values()) == {None}
    assert set(_threads(["serve.engine=hf", "ops.process_threads={}"]).values()) == {None}


def test_an_exported_omp_num_threads_is_left_alone_unless_counts_are_configured():
    assert set(_threads(["serve.engine=hf"], {"OMP_NUM_THREADS": "3"}).values()) == {"3"}
    threads = _threads(["serve.engine=hf", 'ops.process_threads={"serve": 2}'], {"OMP_NUM_THREADS": "3"})
    assert threads["serve"] == "2" and threads["learn"] == "3"


def test_split_threads_gives_serve_the_smaller_half():
    from ops.run.supervisor.plan import split_threads
    from slca.config import load_config

    config = load_config(None, ["serve.engine=hf"])
    assert split_threads(config, cores=2) == {"serve": 1, "learn": 1}
    assert split_threads(config, cores=5) == {"serve": 2, "learn": 3}
    assert split_threads(config, cores=1) == {"serve": 1, "learn": 1}
    assert split_threads(load_config(None, ["serve.engine=hf", 'ops.processes=["serve"]']), cores=8) == {}
