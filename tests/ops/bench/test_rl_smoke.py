"""Each side of `slca bench rl` runs for real on the tiny model (≈ 20 s measured each, plus start-up)."""

from __future__ import annotations

import pytest

from ops.bench.rl.main import run_trl_side, trl_available
from ops.bench.rl.slca_side import SlcaSpec, run_slca_side
from ops.bench.rl.trl_side import TrlSpec

pytestmark = pytest.mark.slow


@pytest.mark.skipif(not trl_available(), reason="TRL is the optional [bench] extra (`make install-bench`)")
@pytest.mark.parametrize("generation", ["hf", "vllm-colocate"])
def test_trl_side_trains_and_counts_every_completion(tiny_model_dir, tmp_path, generation):
    spec = TrlSpec(
        model=str(tiny_model_dir),
        pack="everyday",
        group_size=2,
        max_new_tokens=8,
        seconds=5.0,
        lr=5e-6,
        bf16=False,
        generation=generation,
    )
    r = run_trl_side(spec, tmp_path, timeout_s=600)
    assert r.steps >= 1 and r.completions == 2 * r.steps and r.completions_trained == 2 * r.updates <= r.completions
    assert r.extra["cold_step_s"] > 0 and "max_prompt_length" in r.extra["trl_config"]
    assert 0 < r.generated_tokens <= 8 * r.completions
    assert r.peak_rss_bytes > 100 << 20 and r.seconds >= 5.0
    assert r.extra["trl_config"]["num_generations"] == 2 and r.extra["trl_config"]["max_completion_length"] == 8
    assert r.extra["trl_config"]["use_vllm"] is (generation == "vllm-colocate")


def test_slca_side_runs_the_pipeline_and_reads_every_process(tiny_model_dir, tmp_path):
    spec = SlcaSpec(
        model=str(tiny_model_dir),
        pack="everyday",
        group_size=2,
        max_new_tokens=16,
        seconds=8.0,  # a window long enough for a few groups of 2 × 16 tokens on the tiny model
        extra_sets=("serve.engine=hf", "serve.torch_threads=1"),
        ready_timeout_s=300,
    )
    r = run_slca_side(spec, tmp_path)
    assert r.completions > 0 and r.generated_tokens > 0 and r.completions_trained <= r.completions + spec.group_size
    assert 7.5 <= r.seconds < 25.0
    assert {"serve", "learn", "worker", "assembler", "feed", "redis"} <= set(r.cpu_s_by_process)
    assert r.peak_rss_bytes > 500 << 20 and r.peak_rss_by_process["serve"] > 100 << 20
    assert (tmp_path / "slca-up.log").is_file() and (tmp_path / "slca-serve.log").is_file()
