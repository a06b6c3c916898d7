"""One registry of engines: name → how to build it and the settings class of its own keys (docs/design.md#engines).

An engine registers itself in its own module (`@register_engine("hf", settings=HFEngineSettings)` on its class or
factory); the modules of the engines shipped with serve are listed once, in `BUILTIN_ENGINES`, and imported the
first time the registry is read (they import no torch or vLLM at module level). Every caller goes through
`engine_spec(name)` / `create_engine`; an unknown name raises listing the registered ones. Each engine's settings
class is composed into `ServeSettings` (`engine_settings_classes`), so its keys live under `[serve]` and in the
generated settings reference without serve's settings naming it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from serve.engines.settings import EngineSettings
from slca.contracts.engine import Engine
from slca.heap import bound_onednn_cache

BUILTIN_ENGINES = ("serve.engines.hf", "serve.engines.vllm_engine")
"""The modules of the engines serve ships; importing one registers its engine."""

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class EngineSpec:
    name: str
    build: Callable[[str, Any], Engine]
    """`build(model_dir, serve_settings)`: the engine, not yet started."""
    settings: type[EngineSettings]
    """The class of the keys this engine reads besides `EngineSettings`' (composed into `ServeSettings`)."""
    summary: str
    """One line for `--help` and error messages (the first line of the class's or factory's docstring)."""
    threads_from_plan: bool
    """The engine runs its torch work on the threads it is given (`OMP_NUM_THREADS`, `serve.torch_threads`), so
    `slca up` splits the cores between it and the learner; False: it sizes and binds its own thread team (vLLM)."""


class UnknownEngineError(ValueError):
    """An engine name that is not registered; the message lists the registered ones."""


ENGINES: dict[str, EngineSpec] = {}
_builtins_loaded = False


def register_engine(
    name: str, settings: type[EngineSettings] = EngineSettings, *, threads_from_plan: bool = False
) -> Callable[[F], F]:
    """Register `fn` (an engine class or a factory `(model_dir, serve_settings) -> Engine`) under `name`."""

    def deco(fn: F) -> F:
        if name in ENGINES:
            raise ValueError(f"engine {name!r} registered twice ({ENGINES[name].build!r} and {fn!r})")
        if not (isinstance(settings, type) and issubclass(settings, EngineSettings)):
            raise TypeError(f"engine {name!r}: its settings class must derive from EngineSettings, not {settings!r}")
        summary = ((fn.__doc__ or "").strip().splitlines() or [name])[0]
        ENGINES[name] = EngineSpec(name, fn, settings, summary, threads_from_plan)
        return fn

    return deco


def _load_builtins() -> None:
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True
        for module in BUILTIN_ENGINES:
            importlib.import_module(module)


def engine_names() -> list[str]:
    """Every registered engine's name, sorted."""
    _load_builtins()
    return sorted(ENGINES)


def engine_spec(name: str) -> EngineSpec:
    _load_builtins()
    try:
        return ENGINES[name]
    except KeyError:
        raise UnknownEngineError(f"unknown engine {name!r}; registered: {', '.join(sorted(ENGINES))}") from None


def engine_settings_classes() -> tuple[type[EngineSettings], ...]:
    """The settings classes of the built-in engines, each once, most derived first (the bases of `ServeSettings`)."""
    _load_builtins()
    classes = []
    for spec in ENGINES.values():
        if spec.settings is not EngineSettings and spec.settings not in classes:
            classes.append(spec.settings)
    return (*classes, EngineSettings)


def create_engine(name: str, model_dir: str, settings) -> Engine:
    """The engine registered as `name`, built on `model_dir` with the serve settings (not yet started)."""
    spec = engine_spec(name)  # an unknown name is refused before anything changes
    if not isinstance(settings, spec.settings):
        raise TypeError(
            f"engine {name!r} reads {spec.settings.__name__}, which {type(settings).__name__} does not include "
            f"(its module must be in serve.engines.registry.BUILTIN_ENGINES for ServeSettings to compose it)"
        )
    bound_onednn_cache(getattr(settings, "onednn_primitive_cache", 0))
    return spec.build(model_dir, settings)
