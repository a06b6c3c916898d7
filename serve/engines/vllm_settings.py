"""The vllm engine's keys of `[serve]` (serve/engines/vllm_engine.py, vllm_async.py)."""

from pydantic import Field

from serve.engines.settings import EngineSettings


class VLLMEngineSettings(EngineSettings):
    """`serve.engine=vllm`: dtype, engine-core process, KV cache, grammar cache, GPU share and the rebuild budget."""

    dtype: str = "auto"
    """Engine dtype of the vllm engine: 'auto' (bfloat16 on CUDA or a CPU with avx512_bf16/amx_bf16, float32 on
    other CPUs: emulated bf16 is slower there), or 'bfloat16', 'float16', 'float32'. The choice is logged."""
    vllm_engine_core_process: bool = False
    """vllm engine: run vLLM's engine core in its own process (`AsyncLLM`, as vLLM's own OpenAI server does), so
    that scheduling, detokenisation and HTTP overlap the forward pass; False: the engine in this process, driven
    by one thread (starts faster). Both record exact tokens and logprobs, hot-swap and survive engine failures.
    Off by default: on a busy 2-core machine the in-process engine was faster (`slca bench serve`, 16 clients:
    chat 298 vs 204 tok/s, agent 306 vs 164) and swapped sooner (`slca bench swap`: p50 1.2 s vs 3.8 s); re-measure
    on a quiet machine, where the separate process is expected to pay off as it does for vLLM's own server."""
    kv_cache_gib: float = Field(1.0, gt=0)
    """vLLM KV cache size in GiB on CPU, fractions allowed (vLLM's `kv_cache_memory_bytes`: 1 GiB holds ≈ 46k
    bf16 tokens of SmolLM2-135M); keep small on shared machines. On a GPU `gpu_memory_utilization` sizes it."""
    vllm_grammar_cache_mib: int = 64
    """vllm engine: MiB of compiled forced-tool grammars vLLM's xgrammar backend keeps (VLLM_XGRAMMAR_CACHE_MB,
    vLLM's default 512): its keys are caller schemas, so a caller sending new ones fills it. An
    VLLM_XGRAMMAR_CACHE_MB already in the environment wins."""
    gpu_memory_utilization: float = 0.3
    """vLLM share of GPU memory, when a GPU is present."""
    engine_max_rebuilds: int = 3
    """vLLM engine: times the engine is rebuilt in-process after a failure within `engine_rebuild_window_s`;
    one more failure and the process exits non-zero (the supervisor restarts it)."""
    engine_rebuild_window_s: float = 600.0
    """Window over which engine failures are counted against `engine_max_rebuilds`."""
