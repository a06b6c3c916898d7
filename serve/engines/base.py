"""What every engine shares: the interface (`slca.contracts.engine`, re-exported here), `ServedModel` (the model
directory, tokenizer, served name, version and stats every engine holds, and the one rollback of a failed swap),
and `generate`. Engines are looked up by name in serve/engines/registry.py.
"""

from __future__ import annotations

from typing import Awaitable, Callable

from serve.engines.registry import ENGINES, bound_onednn_cache, create_engine
from slca.contracts.engine import (
    Engine,
    EngineError,
    EngineStats,
    GenerationResult,
    SamplingParams,
    TokenStep,
)
from slca.weights import WeightLoadError, WeightVersion, load_or_roll_back

__all__ = [
    "ENGINES",
    "Engine",
    "EngineError",
    "EngineStats",
    "GenerationResult",
    "SamplingParams",
    "ServedModel",
    "TokenStep",
    "bound_onednn_cache",
    "create_engine",
    "generate",
]


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
        self.weights: WeightVersion | None = None
        """The weights now served (None: the model directory; then each verified version swapped in): what a failed
        swap restores and a rebuilt engine loads again."""

    async def _reload_or_roll_back(
        self, weights: WeightVersion | None, load: Callable[[WeightVersion | None], Awaitable[None]]
    ) -> WeightLoadError | None:
        """Load `weights` in place (`load(weights)`; None: the model directory, v0); None (now serving it), or the
        error once the last good weights (`load(self.weights)`) are back: `slca.weights.load_or_roll_back`, the one
        rollback every engine calls."""
        error = await load_or_roll_back(weights, self.weights, self.version, load)
        if error is None:
            self.version, self.weights = (weights.version if weights is not None else 0), weights
        return error


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
