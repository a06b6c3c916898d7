"""The `local` backend: the embedded model in-process (transformers), frozen, as the tool's API server.

The model is never the policy being trained: it is loaded from the model cache once, put in eval mode
with gradients off, and never receives weight updates. Generation runs in a worker thread under a lock
(one generation at a time: the CPU is the bottleneck, and the event loop must not block). Decoding is
guided by the response schema (xgrammar) where it compiles; validate-and-retry, then the schema
synthesiser, cover the rest (e.g. an answer cut off by `max_new_tokens`). A response whose synthesised form is longer
than half of `max_new_tokens` tokens is answered by the synthesiser at once (source `fallback`, 0 attempts); guided
decoding gets one attempt (an answer it makes is valid unless cut off, and a retry would be cut off again).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from sim.backends.base import Answer, SimRequest, build_prompt, schema_answer, validate_and_retry
from sim.backends.guided import GrammarCache, _has_xgrammar, generate
from slca.models.paths import how_to_make, is_model_dir, resolve_model


def model_dir(settings) -> Path:
    """The model directory of `sim.local_model`. A cached name ('embedded', 'tiny') needs `sim.cache_dir`, which
    the caller fills from `common.cache_dir` (`SimSettings.with_cache_of`): this backend reads no configuration
    of its own, so the cache it uses is the one the process was configured with."""
    if settings.local_model in ("embedded", "tiny") and not settings.cache_dir:
        raise ValueError(
            f"sim.local_model={settings.local_model!r} needs sim.cache_dir: build the settings with "
            "SimSettings.with_cache_of(common) (or set sim.local_model to a model directory)"
        )
    return resolve_model(settings.local_model, Path(settings.cache_dir or "."))


class LocalBackend:
    name = "local"

    def __init__(self, settings):
        self.settings = settings
        self.path = model_dir(settings)
        if not is_model_dir(self.path):
            raise ValueError(f"sim.local_model: no model at {self.path} ({how_to_make(settings.local_model)})")
        self._lock = asyncio.Lock()
        self._model = None
        self._tokenizer = None
        self._grammars: GrammarCache | None = None

    def _load(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self._tokenizer = AutoTokenizer.from_pretrained(self.path)
        model = AutoModelForCausalLM.from_pretrained(self.path, dtype=torch.float32)
        model.eval()
        model.requires_grad_(False)
        self._model = model
        if self.settings.local_guided and _has_xgrammar():
            self._grammars = GrammarCache(
                self._tokenizer,
                model.config.vocab_size,
                [self._tokenizer.eos_token_id],
                self.settings.grammar_cache_bytes,
            )

    def _generate(self, request: SimRequest, attempt: int) -> str:
        import torch

        if self._model is None:
            self._load()
        tok = self._tokenizer
        prompt = tok.apply_chat_template(build_prompt(request), tokenize=False, add_generation_prompt=True)
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        matcher = self._grammars.matcher(request.response_schema) if self._grammars else None
        temperature = self.settings.temperature if attempt else min(self.settings.temperature, 0.3)
        with torch.inference_mode():
            return generate(
                self._model,
                tok,
                ids,
                self.settings.max_new_tokens,
                temperature,
                (request.seed + attempt) % (2**31),
                matcher,
            )

    async def _ask(self, request: SimRequest, attempt: int) -> str | None:
        async with self._lock:
            return await asyncio.to_thread(self._generate, request, attempt)

    async def respond(self, request: SimRequest) -> Answer:
        synthesised = await asyncio.to_thread(schema_answer, request)
        if await asyncio.to_thread(self._too_long, synthesised):
            return Answer(synthesised, "fallback", 0)
        retries = 0 if await asyncio.to_thread(self._guided, request) else self.settings.max_retries
        return await validate_and_retry(request, lambda i: self._ask(request, i), retries)

    def _guided(self, request: SimRequest) -> bool:
        """Whether decoding is constrained by the response schema: then an answer is valid unless `max_new_tokens`
        cuts it off, which a retry with the same budget would do again, so it gets one attempt."""
        if self._model is None:
            self._load()
        return self._grammars is not None and self._grammars.matcher(request.response_schema) is not None

    def _too_long(self, value) -> bool:
        """Whether a response like the synthesiser's needs more than half of `max_new_tokens` (the grammar lets the
        model write longer strings and lists than the synthesiser: measured on τ² objects, such answers were cut
        off on every attempt, 1-2.5 minutes a call for nothing), so the model is not asked."""
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.path)
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return 2 * len(self._tokenizer(text, add_special_tokens=False)["input_ids"]) > self.settings.max_new_tokens

    async def close(self) -> None:
        self._model = None
