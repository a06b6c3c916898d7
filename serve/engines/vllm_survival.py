"""How both vLLM engine modes survive failures: the rebuild budget, being declared fatal, and the rollback of a
weight reload that failed midway.

The two modes (serve/engines/vllm_engine.py: the engine in this process, driven by one thread;
serve/engines/vllm_async.py: `AsyncLLM`, the engine core in its own process) must count failures, give up and
restore the last good weights identically; they differ only in how they shut an engine down and load weights,
which they pass in.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Awaitable, Callable, Coroutine, TypeVar

from slca.weights import WeightLoadError
from slca.weights import WeightRollback, WeightRollbackFailed

log = logging.getLogger(__name__)

T = TypeVar("T")


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
        self.weights_path = self.model_dir
        self.weights_manifest = None  # the announced manifest of `weights_path` (None: the directory's own)
        """The weights now served (the model directory, then each swapped-in version): a rebuild reloads them."""
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

    async def _reload_or_roll_back(
        self,
        path: str,
        version: int,
        manifest,
        load_new: Callable[[], Awaitable[None]],
        load_good: Callable[[str, Any], Awaitable[None]],
    ) -> WeightLoadError | None:
        """Load version `version` (`load_new`); None, or the error once the last good weights are back.

        vLLM copies a checkpoint into the running model parameter by parameter, so a reload that fails midway
        leaves two versions mixed: the last good weights (`weights_path`: the model directory until the first
        swap) are then loaded again (`load_good(path, manifest)`). Should that fail too, WeightRollbackFailed:
        nothing good is left to serve, and the version is not claimed."""
        try:
            await load_new()
        except Exception as exc:
            good = self.weights_path
            log.warning(
                "loading v%s from %s failed (%s); reloading v%s from %s", version, path, exc, self.version, good
            )
            try:
                await load_good(good, self.weights_manifest)
            except Exception as again:
                log.critical("restoring v%s from %s failed too: %s", self.version, good, again)
                return WeightRollbackFailed(
                    f"{path}: reload failed ({exc}); restoring v{self.version} failed ({again})"
                )
            return WeightRollback(f"{path}: reload failed ({exc}); v{self.version} restored")
        # the last good weights: what a failed reload or an engine rebuild loads back
        self.version, self.weights_path, self.weights_manifest = version, path, manifest
        return None


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never suspends (every await in it is of an `async def` over synchronous
    calls), on a thread with no event loop: how the in-process engine's driver thread runs the shared async logic."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("run_sync: the coroutine suspended (it awaited real asynchronous work)")
