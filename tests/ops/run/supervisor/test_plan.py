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


def test_by_default_the_hf_engine_and_the_learner_split_the_cores_and_vllm_binds_its_own(monkeypatch):
    from ops.run.supervisor import plan

    monkeypatch.setattr(plan, "gpu_present", lambda: False)
    cores = len(os.sched_getaffinity(0))
    threads = _threads(["serve.engine=hf"])
    assert int(threads["serve"]) + int(threads["learn"]) == max(2, cores)
    assert threads["worker"] is None and threads["feed"] is None
    vllm = _threads(["serve.engine=vllm"])  # serve's team is vLLM's; the learner takes half the cores beside it
    assert vllm["learn"] == str(max(1, cores // 2)) and {v for k, v in vllm.items() if k != "learn"} == {None}
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


def test_beside_a_vllm_on_the_cpu_the_learner_leaves_vllm_its_cores_and_on_a_gpu_nothing_is_set(tmp_path):
    """Two OpenMP teams on the same 2 cores slowed a decode step 3–10× (docs/cpu-facts.md): vLLM binds every core
    but one, so the learner takes half (1 of 2); on a GPU neither's CPU threads are shared out."""
    from ops.run.supervisor.plan import gpu_present, split_threads
    from slca.config import load_config

    vllm = load_config(None, ["serve.engine=vllm"])
    assert split_threads(vllm, cores=2, gpu=False) == {"learn": 1}
    assert split_threads(vllm, cores=16, gpu=False) == {"learn": 8}
    assert split_threads(vllm, cores=2, gpu=True) == {}
    assert split_threads(vllm, cores=2, warm_start=True, gpu=False) == {"learn": 1, "warmstart": 2}
    alone = load_config(None, ["serve.engine=vllm", 'ops.processes=["serve", "worker"]'])
    assert split_threads(alone, cores=2, gpu=False) == {}  # no learner: nothing to share
    assert not gpu_present(tmp_path / "absent") and not gpu_present(tmp_path)  # no driver, or one listing none
    (tmp_path / "0000:01:00.0").mkdir()
    assert gpu_present(tmp_path)
