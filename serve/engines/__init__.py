"""Inference engines behind one async interface (see `base.Engine`), chosen by name from `ENGINES`."""

from serve.engines.base import (
    ENGINES,
    Engine,
    EngineError,
    GenerationResult,
    SamplingParams,
    TokenStep,
    create_engine,
)

__all__ = [
    "ENGINES",
    "Engine",
    "EngineError",
    "GenerationResult",
    "SamplingParams",
    "TokenStep",
    "create_engine",
]
