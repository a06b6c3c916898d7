"""Inference engines behind one interface (`slca.contracts.engine.Engine`), registered by name
(serve/engines/registry.py: `register_engine`, `create_engine`)."""

from serve.engines.base import (
    ENGINES,
    Engine,
    EngineError,
    GenerationResult,
    SamplingParams,
    TokenStep,
    create_engine,
)
from serve.engines.registry import EngineSpec, UnknownEngineError, engine_names, engine_spec, register_engine

__all__ = [
    "ENGINES",
    "Engine",
    "EngineError",
    "EngineSpec",
    "GenerationResult",
    "SamplingParams",
    "TokenStep",
    "UnknownEngineError",
    "create_engine",
    "engine_names",
    "engine_spec",
    "register_engine",
]
