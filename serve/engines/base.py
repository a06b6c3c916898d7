"""The engine interface: sampled token ids + behaviour logprobs per request, concurrent requests batched.

Every engine:
- streams `TokenStep`s per request (the exact sampled ids, their raw log-probabilities, the weight version
  that produced them);
- batches concurrent requests itself (callers just `await`/iterate concurrently);
- hot-swaps weights between engine steps (`swap_weights`), keeping the old version when a load fails.
Log-probabilities are those of the model distribution at temperature 1, before top-p — what the learner
recomputes teacher-forced. Exception: under a grammar (forced tool choice) they are taken after the grammar
mask, renormalised over the allowed tokens (vLLM applies its bitmask before taking logprobs; hf matches it);
the agent loop lists such turns in `Trajectory.meta["constrained_turns"]`.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import AsyncIterator, Protocol, runtime_checkable

from slca.weights.verify import WeightVersion


class EngineError(RuntimeError):
    """The engine could not serve a request (crashed, overloaded, not started). Maps to HTTP 503."""


@dataclass
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 256
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    grammar: str | None = None
    """EBNF grammar (xgrammar dialect) constraining the whole completion, e.g. a forced tool call."""
    top_logprobs: int = 0
    """How many of the most likely tokens to report with each sampled one (0..20; 0: none), from the same
    distribution as the sampled token's logprob."""


@dataclass
class TokenStep:
    """Newly sampled tokens of one request (usually one), in order."""

    token_ids: list[int]
    logprobs: list[float]
    version: int
    finish_reason: str | None = None
    """None while running; 'stop' (end of turn, stop string, grammar complete) or 'length' on the last step."""
    top_logprobs: list[list[tuple[int, float]]] | None = None
    """Per sampled token, the `params.top_logprobs` most likely (token id, logprob), most likely first; None when
    none were asked for."""


@dataclass
class GenerationResult:
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    versions: list[int]
    """Weight version per sampled token (one engine step may straddle a swap only between tokens)."""
    top_logprobs: list[list[tuple[int, float]]] | None = None
    """Per sampled token, its most likely alternatives (TokenStep.top_logprobs); None when none were asked for."""

    @property
    def policy_version(self) -> int:
        return self.versions[-1] if self.versions else 0

    @property
    def mixed_version(self) -> bool:
        return len(set(self.versions)) > 1


@dataclass
class EngineStats:
    """Evidence of batching, exported in /metrics: how many requests ran together."""

    steps: int = 0
    requests: int = 0
    max_batch: int = 0
    prompt_tokens_computed: int = 0
    """Prompt tokens a prefill computed (hf engine)."""
    prompt_tokens_reused: int = 0
    """Prompt tokens whose KV rows came from the prefix cache instead (hf engine, `serve.hf_prefix_cache_tokens`)."""

    def observe(self, batch: int, new_requests: int = 0) -> None:
        self.steps += 1
        self.requests += new_requests
        self.max_batch = max(self.max_batch, batch)


class ServedModel:
    """What every engine holds besides its backend: the model directory, its tokenizer (the one that encodes
    prompts and decodes sampled ids), the name it is served under, the weight version and batching stats."""

    def __init__(self, model_dir: str, settings) -> None:
        from pathlib import Path

        from transformers import AutoTokenizer

        self.model_dir = str(model_dir)
        self.settings = settings
        self.model_name = settings.served_model_name or Path(model_dir).name
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        self.version = 0
        self.stats = EngineStats()


@runtime_checkable
class Engine(Protocol):
    name: str
    model_name: str
    tokenizer: object
    version: int
    stats: EngineStats

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def stream(self, prompt_ids: list[int], params: SamplingParams) -> AsyncIterator[TokenStep]:
        """Sampled tokens as they come; cancelling the iterator aborts the request."""
        ...

    async def swap_weights(self, weights: WeightVersion) -> float:
        """Load `weights` in the background (its tensors parsed from the very bytes verified against its manifest:
        `WeightVersion.state_dict`, slca/weights/verify.py), swap them in between steps; returns seconds; raises
        WeightLoadError, the previous version still serving."""
        ...

    @property
    def loaded(self) -> bool: ...


async def generate(engine: Engine, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
    """Run one request to completion."""
    ids: list[int] = []
    lps: list[float] = []
    versions: list[int] = []
    tops: list[list[tuple[int, float]]] | None = [] if params.top_logprobs else None
    finish = "length"
    async for step in engine.stream(prompt_ids, params):
        ids += step.token_ids
        lps += step.logprobs
        versions += [step.version] * len(step.token_ids)
        if tops is not None:
            tops += step.top_logprobs or [[] for _ in step.token_ids]
        if step.finish_reason:
            finish = step.finish_reason
    return GenerationResult(ids, lps, finish, versions, tops)


ENGINES: dict[str, str] = {
    "hf": "serve.engines.hf:HFEngine",
    "vllm": "serve.engines.vllm_engine:create_vllm_engine",  # in-process or engine-core process
}
"""Engine name → import path; imported lazily so that `import serve` never pulls torch or vllm."""


def bound_onednn_cache(settings) -> None:
    """oneDNN (torch's and vLLM's CPU matmuls) caches a compiled primitive per batch shape, 1,024 by default at
    up to ~2 MiB each, so a server's RSS keeps climbing as new prompt lengths arrive; bound it before the
    first primitive exists (oneDNN reads the variable once). The operator's own setting in the environment wins."""
    entries = getattr(settings, "onednn_primitive_cache", 0)
    if entries > 0:
        os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(entries))


def create_engine(name: str, model_dir: str, settings) -> Engine:
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}; known: {', '.join(ENGINES)}")
    bound_onednn_cache(settings)
    module, _, cls = ENGINES[name].partition(":")
    return getattr(importlib.import_module(module), cls)(model_dir, settings)
