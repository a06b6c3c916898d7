"""The engine interface: what serve asks of an inference engine, and what an engine gives back
(docs/design.md#engines). The engines themselves live in `serve/engines/` and register there by name.

Every engine:
- streams `TokenStep`s per request (the exact sampled ids, their raw log-probabilities, the weight version
  that produced them);
- batches concurrent requests itself (callers just `await`/iterate concurrently);
- hot-swaps weights between engine steps (`swap_weights`), keeping the old version when a load fails (one rollback
  path for every engine: `slca.weights.load_or_roll_back`).
Log-probabilities are those of the model distribution at temperature 1, before top-p — what the learner
recomputes teacher-forced. Exception: under a grammar (forced tool choice) they are taken after the grammar
mask, renormalised over the allowed tokens (vLLM applies its bitmask before taking logprobs; hf matches it);
the agent loop lists such turns in `Trajectory.meta["constrained_turns"]`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AsyncIterator, Protocol, runtime_checkable

if TYPE_CHECKING:  # slca.weights imports the contracts: the interface names the type only
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


@runtime_checkable
class Engine(Protocol):
    """What serve calls on an engine, whichever is registered under `serve.engine`."""

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
        WeightLoadError, the previous version still serving (WeightRollback when it had begun replacing weights
        and restored them through `slca.weights.load_or_roll_back`)."""
        ...

    @property
    def loaded(self) -> bool: ...
