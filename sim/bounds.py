"""Bounds on the work a caller-supplied schema can cause: sizes, depths, counts and a deadline.

A tool definition arrives inside an API request, so its schemas (parameters, `x-response-schema`) are untrusted
input: one schema must not be able to freeze the server, fill its memory or reach the network. Everything SGLS
does with a schema (checking it, validating arguments or a response, synthesising a response) runs under these
bounds and ends, within them, in a value or in a `SchemaLimitError`, which a tool call turns into an error result.

The deadline is a context variable, so one `with deadline(...)` covers all the work of one step, however it nests
(validation inside synthesis inside an overlay), and threads started with `asyncio.to_thread` inherit it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


class SchemaLimitError(ValueError):
    """Work on a caller-supplied schema would pass one of the bounds (the message says which)."""


@dataclass(frozen=True)
class SchemaLimits:
    """The bounds; `SimSettings` overrides the ones an operator may want to tune (see `limits_from`)."""

    max_schema_bytes: int = 256_000
    """Largest schema accepted (its canonical JSON)."""
    max_schema_depth: int = 64
    """Deepest nesting of a schema's JSON accepted."""
    max_output_bytes: int = 65_536
    """Largest synthesised response (approximate JSON bytes); past it the response is refused, not cut."""
    max_depth: int = 12
    """Nesting of a synthesised value; deeper sub-schemas get a plain string (as `$ref` cycles do)."""
    max_items: int = 64
    """Most items of one synthesised array (a larger `minItems` cannot be satisfied: refused)."""
    max_properties: int = 256
    """Most properties of one synthesised object (more `required` ones than this: refused)."""
    max_string: int = 4_096
    """Longest synthesised string (a larger `minLength` cannot be satisfied: refused)."""
    deadline_s: float = 0.5
    """Wall-clock budget of one step on a schema (argument validation, synthesis, response checks)."""
    pattern_timeout_s: float = 0.05
    """Budget of one regular-expression match (never more than what is left of the step's deadline)."""


DEFAULT_LIMITS = SchemaLimits()

_DEADLINE: ContextVar[float] = ContextVar("sim_schema_deadline", default=math.inf)
_PATTERN_TIMEOUT: ContextVar[float] = ContextVar("sim_pattern_timeout", default=DEFAULT_LIMITS.pattern_timeout_s)


@contextmanager
def within(limits: SchemaLimits | None) -> Iterator[None]:
    """The limits' deadline and regex budget for the work inside the block (validators are cached and shared,
    so the per-provider limits travel in the context, not in the validator). None: keep the enclosing block's
    regex budget, and bound the block by the default deadline too."""
    token = _PATTERN_TIMEOUT.set(limits.pattern_timeout_s) if limits is not None else None
    try:
        with deadline((limits or DEFAULT_LIMITS).deadline_s):
            yield
    finally:
        if token is not None:
            _PATTERN_TIMEOUT.reset(token)


def pattern_timeout() -> float:
    """Budget of one regular-expression match in the current context."""
    return _PATTERN_TIMEOUT.get()


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Bound the work inside the block to `seconds` (or less, if an enclosing block ends sooner)."""
    token = _DEADLINE.set(min(_DEADLINE.get(), time.monotonic() + seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def remaining() -> float:
    """Seconds left of the current deadline (inf outside any `deadline` block)."""
    return _DEADLINE.get() - time.monotonic()


def check_deadline(what: str = "schema work") -> None:
    if time.monotonic() > _DEADLINE.get():
        raise SchemaLimitError(f"{what} ran past its deadline")


def limits_from(settings) -> SchemaLimits:
    """The limits a `SimSettings` configures (defaults for the rest)."""
    return SchemaLimits(
        max_schema_bytes=settings.schema_max_bytes,
        max_output_bytes=settings.synth_max_bytes,
        max_items=settings.synth_max_items,
        max_properties=settings.synth_max_properties,
        deadline_s=settings.schema_deadline_s,
        pattern_timeout_s=settings.pattern_timeout_s,
    )
