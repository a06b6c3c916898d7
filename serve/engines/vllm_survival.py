"""How both vLLM engine modes survive failures: the rebuild budget, being declared fatal, and the rollback of a
weight reload that failed midway.

The two modes (serve/engines/vllm_engine.py: the engine in this process, driven by one thread;
serve/engines/vllm_async.py: `AsyncLLM`, the engine core in its own process) must count failures, give up and
restore the last good weights identically; they differ only in how they shut an engine down and load weights,
which they pass in. The rollback itself is every engine's (`ServedModel._reload_or_roll_back`,
`slca.weights.load_or_roll_back`).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable


log = logging.getLogger(__name__)


class RebuildBudget:
    """At most `engine_max_rebuilds` engine failures (each followed by a rebuild) within `engine_rebuild_window_s`."""

    def __init__(self, settings) -> None:
        self.settings = settings
        self.failures: list[float] = []
        """Monotonic times of the failures within the window."""

    def spend(self) -> str | None:
        """Count one failure now: why the engine must give up when the budget is spent, else None (rebuild)."""
        now = time.monotonic()
        window = self.settings.engine_rebuild_window_s
        self.failures = [t for t in self.failures if now - t < window] + [now]
        if len(self.failures) > self.settings.engine_max_rebuilds:
            return f"{len(self.failures)} engine failures in {window:.0f}s"
        return None


class EngineSurvival:
    """Mixed into both vLLM engines (beside `ServedModel`, whose `model_dir`, `settings` and `version` it reads)."""

    model_dir: str
    settings: Any
    version: int

    def _init_survival(self) -> None:
        self.budget = RebuildBudget(self.settings)
        self.fatal = False
        """Set when the engine failed beyond its rebuild budget: the server process must exit non-zero."""
        self.on_fatal: Callable[[], None] | None = None
        """Called once the engine is fatal; the server uses it to shut down (exit non-zero)."""
        self._failed: BaseException | None = None

    @property
    def failures(self) -> list[float]:
        """Monotonic times of engine failures (each followed by a rebuild), for the rebuild budget."""
        return self.budget.failures

    def _declare_fatal(self, why: str, shutdown: Callable[[], None]) -> None:
        """No half-dead server: the engine is shut down (`shutdown`) and `on_fatal` asks the process to exit."""
        log.critical("vllm engine is fatal (%s); the server exits", why)
        self._failed = RuntimeError(why)
        self.fatal = True
        shutdown()
        if self.on_fatal is not None:
            self.on_fatal()
