"""The hf (transformers) engine's keys of `[serve]` (serve/engines/hf.py)."""

from typing import Literal

from pydantic import Field

from serve.engines.settings import EngineSettings


class HFEngineSettings(EngineSettings):
    """`serve.engine=hf`: device, dtype, threads, batching, prefill sharing, prefix cache and KV room of the
    transformers engine."""

    hf_device: Literal["auto", "cpu", "cuda"] = "auto"
    """hf engine: where the model and every tensor of its batches live. 'auto': CUDA when torch sees a GPU
    (`torch.cuda.is_available()`), else the CPU; 'cuda' on a machine without one refuses to start."""
    hf_dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    """Engine dtype of the hf engine. 'auto': float32 on the CPU (there it is the logprob reference, whatever bf16
    units the CPU has), on CUDA what slca/models/precision.py chooses there (bfloat16); or 'bfloat16', 'float16',
    'float32' on either device. The choice is logged."""
    torch_threads: int = 0
    """Intra-op threads of the hf engine (0: torch's default). On a shared, oversubscribed CPU 1 is far faster."""
    hf_concurrent_batches: int = 4
    """hf engine: batches in flight at once (their forward steps interleave under the engine lock)."""
    hf_shared_prefill: bool = True
    """hf engine: a prompt that several requests of one batch share (an agent run's `n` rollouts) is prefilled once
    and its KV rows repeated per request; off, every request's prompt is computed on its own
    (ops/bench/serve/shared_prefill.py measures the two)."""
    hf_attention: Literal["sdpa", "eager", "grouped_decode"] = "sdpa"
    """hf engine: transformers' attention kernel. 'grouped_decode': SDPA for a prefill; for a decode step (one query
    per row) SDPA over the KV heads as cached, each KV head's query heads folded into its queries, where
    transformers' SDPA call first copies every KV head once per query head sharing it
    (serve/engines/hf_attention.py)."""
    hf_prefix_cache_tokens: int = Field(default=0, ge=0)
    """hf engine: prompt tokens whose KV rows are kept after their prefill, for later prompts that start with the same
    tokens (an agent run's next turn: the previous turn's prompt plus the reply and the tool's result; every task
    of a pack: the same system message and tool schemas): only the rest of such a prompt is computed. Least
    recently used first out; emptied at every weight swap (no prompt is continued on another version's KV rows).
    0: off. The rows of a prompt of ~800 tokens take ~18 MB in bf16 on SmolLM2-135M (~37 MB in fp32)."""
    hf_kv_room_tokens: int = Field(default=128, ge=0)
    """hf engine: positions of room each layer's KV buffers get when they grow, so that a decode step writes its one
    position in place (serve/engines/hf_kv.py); 0: transformers' DynamicCache, which concatenates the whole cache
    with each new position. The default room holds a turn of up to 128 new tokens."""
    batch_wait_ms: float = 5.0
    """hf engine: how long a new batch waits for more arrivals before starting."""
