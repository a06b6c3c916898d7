"""Response backends of SGLS, registered by name."""

from __future__ import annotations

from collections.abc import Callable

from sim.backends.base import Answer, Backend, SimRequest
from sim.backends.llm import LlmBackend
from sim.backends.local import LocalBackend
from sim.backends.schema import SchemaBackend

BACKENDS: dict[str, Callable[..., Backend]] = {
    "schema": lambda settings: SchemaBackend(),
    "llm": LlmBackend,
    "local": LocalBackend,
}


def make_backend(name: str, settings) -> Backend:
    if name not in BACKENDS:
        raise ValueError(f"unknown sim backend {name!r}; known: {', '.join(BACKENDS)}")
    return BACKENDS[name](settings)


__all__ = ["Answer", "BACKENDS", "Backend", "SimRequest", "make_backend"]
