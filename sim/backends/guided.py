"""Generation with an HF model, optionally constrained to a JSON schema by xgrammar (vLLM's own
structured-output backend), token by token with a KV cache.

Why our own loop: `generate()` has no JSON-schema constraint; xgrammar gives the per-step token bitmask.
A schema xgrammar cannot compile falls back to unconstrained sampling (validate-and-retry still applies).
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from typing import Any

from sim.lru import ByteLRU
from sim.patterns import pattern_size

log = logging.getLogger(__name__)


MAX_STRING = 40
MAX_ITEMS = 2
GRAMMAR_MAX_PATTERN = 256
"""A `pattern` larger than this (elements, repetitions unrolled) is left out of the grammar: xgrammar compiles it
to an automaton without a deadline. Validate-and-retry still checks it."""


def bounded(schema: Any) -> Any:
    """A sub-schema for the grammar: strings ≤ 40 characters, arrays ≤ 2 items (where not tighter already).

    Why: a small model under a grammar can ramble inside a string or array until `max_new_tokens` cuts it
    off, which then fails validation. Any value of the bounded schema also satisfies the original.
    """
    if isinstance(schema, list):
        return [bounded(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: bounded(v) for k, v in schema.items()}
    if isinstance(out.get("pattern"), str) and pattern_size(out["pattern"]) > GRAMMAR_MAX_PATTERN:
        del out["pattern"]
    if out.get("type") == "string" and not any(k in out for k in ("enum", "const", "pattern", "format")):
        out["maxLength"] = min(out.get("maxLength", MAX_STRING), MAX_STRING)
    if out.get("type") == "array":
        out["maxItems"] = max(out.get("minItems", 0), min(out.get("maxItems", MAX_ITEMS), MAX_ITEMS))
    return out


class GrammarCache:
    """Compiled grammars per schema for one tokenizer (compiling costs far more than a decode step).

    Bounded in bytes: our LRU charges each grammar its `memory_size_bytes`, and xgrammar's own compiler cache
    (unbounded by default) gets the same limit.
    """

    def __init__(self, tokenizer, vocab_size: int, stop_ids: list[int], max_bytes: int = 64 << 20):
        import xgrammar as xgr

        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=stop_ids)
        self.compiler = xgr.GrammarCompiler(info, cache_limit_bytes=max_bytes)
        self._compiled = ByteLRU(max_bytes)

    def matcher(self, schema: dict[str, Any]):
        import xgrammar as xgr

        key = json.dumps(bounded(schema), sort_keys=True)
        compiled = self._compiled.get_or_make(
            key, lambda: self._compile(key), lambda c: len(key) + (c.memory_size_bytes if c is not None else 0)
        )
        return xgr.GrammarMatcher(compiled) if compiled is not None else None

    def _compile(self, key: str):
        try:
            return self.compiler.compile_json_schema(key, any_whitespace=False)
        except Exception as exc:  # xgrammar raises plain RuntimeError/ValueError on unsupported schemas
            log.info("schema not compilable by xgrammar (%s): sampling unconstrained", exc)
            return None


@lru_cache(maxsize=4)
def _has_xgrammar() -> bool:
    try:
        import xgrammar  # noqa: F401
    except ImportError:
        return False
    return True


def generate(
    model,
    tokenizer,
    prompt_ids: list[int],
    max_new_tokens: int,
    temperature: float,
    seed: int,
    matcher=None,
    stop_ids: set[int] | None = None,
) -> str:
    """Sample a completion (constrained by `matcher` when given) and decode it."""
    import torch

    stop_ids = stop_ids or {tokenizer.eos_token_id}
    generator = torch.Generator().manual_seed(seed)
    out = model(torch.tensor([prompt_ids]), use_cache=True)
    past, logits = out.past_key_values, out.logits[0, -1]
    ids: list[int] = []
    for _ in range(max_new_tokens):
        scores = logits.float().clone()
        if matcher is not None:
            import xgrammar as xgr

            bitmask = xgr.allocate_token_bitmask(1, scores.shape[-1])
            matcher.fill_next_token_bitmask(bitmask)
            scores = scores.unsqueeze(0)
            xgr.apply_token_bitmask_inplace(scores, bitmask)
            scores = scores[0]
        if temperature <= 0:
            token = int(torch.argmax(scores))
        else:
            token = int(torch.multinomial(torch.softmax(scores / temperature, -1), 1, generator=generator))
        if matcher is not None:
            matcher.accept_token(token)
        if token in stop_ids:
            break
        ids.append(token)
        if matcher is not None and matcher.is_terminated():
            break
        out = model(torch.tensor([[token]]), past_key_values=past, use_cache=True)
        past, logits = out.past_key_values, out.logits[0, -1]
    return tokenizer.decode(ids, skip_special_tokens=True)
