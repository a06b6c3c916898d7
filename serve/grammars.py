"""The app's grammar builders (serve/engines/grammar_builder.py): one host process for every engine of the app,
started in the background with the app and stopped with it."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Callable

from aiohttp import web

from serve.engines.base import Engine
from serve.engines.grammar_builder import BuilderLimits, GrammarBuilder, Vocabulary
from serve.keys import COMMON, GRAMMARS, METRICS, SETTINGS


async def grammar_ctx(app: web.Application) -> AsyncIterator[None]:
    """`app[GRAMMARS]`, for the served model's vocabulary (read from its directory: no engine needed yet)."""
    model_dir = str(app[COMMON].model_path())
    vocabulary = await asyncio.to_thread(Vocabulary.of, model_dir)  # None: forced calls answer 501
    limits = BuilderLimits.of(app[SETTINGS])
    builder = app[GRAMMARS] = GrammarBuilder(vocabulary, limits, observe=app[METRICS].observe_grammar)
    builder.start()  # the host imports xgrammar while the engine loads: the first forced call need not wait
    try:
        yield
    finally:
        await builder.close()


def with_grammars(app: web.Application, factory: Callable[[], Engine]) -> Callable[[], Engine]:
    """`factory`, whose engines take compiled grammars from `app[GRAMMARS]` where they apply grammars themselves
    (the hf engine; vLLM compiles the grammar text, whose build the builder has already bounded)."""

    def make() -> Engine:
        engine = factory()
        if hasattr(engine, "grammars"):
            engine.grammars = app[GRAMMARS]
        return engine

    return make
