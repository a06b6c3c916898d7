"""The hf engine's compiled grammars: taken from the grammar builders, never compiled on a batch thread.

A forced call's grammar reaches the engine as text (`SamplingParams.grammar`). Compiling it for the vocabulary is
the costly part (seconds for large enums); the builders (serve/engines/grammar_builder.py) have done it already,
in a process they kill at the time bound, and kept the result. Here it is only deserialised (in a thread, before
the request joins a batch: a batch's other rows never wait for it) and kept, bounded by bytes
(`serve.grammar_cache_mib`, least recently used out first). An engine used without an app builds through a
builder of its own, with the same bounds.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

from serve.engines.base import EngineError


class HFGrammars:
    def __init__(self, engine, max_bytes: int):
        self.engine, self.max_bytes = engine, max_bytes
        self.bytes = 0
        self._entries: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._info: Any = None
        self._own: Any = None
        """A builder of this engine's own, made only when no app gave it one (`engine.grammars`)."""

    async def compiled(self, ebnf: str):
        """`ebnf` compiled for this engine's vocabulary; EngineError when it cannot be had within the bounds."""
        entry = self._entries.get(ebnf)
        if entry is not None:
            self._entries.move_to_end(ebnf)
            return entry[0]
        from serve.engines.grammar_builder import GrammarError

        try:
            built = await self._builder().compiled(ebnf)
        except GrammarError as exc:
            raise EngineError(f"grammar: {exc.reason}") from None
        info = self._info or await asyncio.to_thread(self._tokenizer_info)
        compiled = await asyncio.to_thread(_deserialize, built.compiled, info)
        self._put(ebnf, compiled, int(compiled.memory_size_bytes))
        return compiled

    @staticmethod
    def matcher(compiled):
        import xgrammar as xgr

        return xgr.GrammarMatcher(compiled)

    def _builder(self):
        if self.engine.grammars is not None:
            return self.engine.grammars
        if self._own is None:
            from serve.engines.grammar_builder import BuilderLimits, GrammarBuilder, Vocabulary

            settings = self.engine.settings
            limits = BuilderLimits.of(settings) if hasattr(settings, "grammar_builders") else BuilderLimits()
            self._own = GrammarBuilder(Vocabulary.of(self.engine.model_dir), limits)
        return self._own

    def _tokenizer_info(self):
        """The same view of the vocabulary the builders compiled for (serve/engines/grammar_host.py)."""
        import xgrammar as xgr

        engine = self.engine
        self._info = xgr.TokenizerInfo.from_huggingface(
            engine.tokenizer, vocab_size=engine.model.config.vocab_size, stop_token_ids=sorted(engine.stop_ids)
        )
        return self._info

    def _put(self, ebnf: str, compiled, size: int) -> None:
        if size > self.max_bytes or ebnf in self._entries:
            return
        self._entries[ebnf] = (compiled, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (_, old) = self._entries.popitem(last=False)
            self.bytes -= old

    def __contains__(self, ebnf: str) -> bool:
        return ebnf in self._entries

    async def close(self) -> None:
        if self._own is not None:
            await self._own.close()


def _deserialize(text: str, info):
    import xgrammar as xgr

    try:
        return xgr.CompiledGrammar.deserialize_json(text, info)
    except (RuntimeError, ValueError) as exc:  # built for another vocabulary, or damaged
        raise EngineError(f"grammar: the compiled grammar does not fit this engine ({exc})") from None
