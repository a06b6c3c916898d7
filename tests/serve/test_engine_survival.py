"""The survival logic both vLLM modes share (serve/engines/vllm_survival.py): the rebuild budget, and the rollback of a
reload that failed midway (every engine's: `ServedModel._reload_or_roll_back`), over fake loads (no vLLM)."""

from __future__ import annotations

import pytest

from serve.engines.base import ServedModel
from serve.engines.vllm_survival import EngineSurvival, RebuildBudget
from slca.weights import WeightRollback, WeightRollbackFailed, WeightVersion, run_sync
from serve.settings import ServeSettings


def test_the_budget_allows_max_rebuilds_within_the_window_then_gives_up(monkeypatch):
    import serve.engines.vllm_survival as survival

    now = [1000.0]
    monkeypatch.setattr(survival.time, "monotonic", lambda: now[0])
    budget = RebuildBudget(ServeSettings(engine_max_rebuilds=2, engine_rebuild_window_s=60))
    assert budget.spend() is None and budget.spend() is None
    assert budget.spend() == "3 engine failures in 60s"
    now[0] += 61  # the old failures left the window
    assert budget.spend() is None and len(budget.failures) == 1


class _Served(EngineSurvival, ServedModel):
    def __init__(self):  # ServedModel's state without its tokenizer
        self.model_dir, self.settings, self.version, self.weights = "/base", ServeSettings(), 0, None
        self._init_survival()
        self.loads: list[str] = []
        self.fail_on: set[str] = set()

    async def load(self, weights: WeightVersion | None) -> None:
        path = self.model_dir if weights is None else weights.root
        self.loads.append(path)
        if path in self.fail_on:
            raise RuntimeError(f"simulated: {path} failed midway")

    def reload(self, path: str, version: int):
        return run_sync(self._reload_or_roll_back(WeightVersion(path, version), self.load))

    @property
    def weights_path(self) -> str:
        return self.model_dir if self.weights is None else self.weights.root


def test_a_failed_reload_restores_the_last_good_weights_or_says_nothing_is_left():
    served = _Served()
    served.fail_on.add("/v2")
    assert isinstance(served.reload("/v2", 2), WeightRollback) and served.loads == ["/v2", "/base"]
    assert served.reload("/v1", 1) is None and (served.version, served.weights_path) == (1, "/v1")
    served.loads.clear()
    assert isinstance(served.reload("/v2", 2), WeightRollback) and served.loads == ["/v2", "/v1"]
    served.fail_on.add("/v1")
    error = served.reload("/v2", 2)
    assert isinstance(error, WeightRollbackFailed) and (served.version, served.weights_path) == (1, "/v1")


def test_fatal_shuts_down_then_tells_the_server():
    served, calls = _Served(), []
    served.on_fatal = lambda: calls.append("on_fatal")
    served._declare_fatal("3 engine failures in 60s", lambda: calls.append("shutdown"))
    assert served.fatal and calls == ["shutdown", "on_fatal"] and "3 engine failures" in str(served._failed)


class _Suspend:
    def __await__(self):
        yield  # what an await on real asynchronous work does: hand control to an event loop


async def _suspends() -> None:
    await _Suspend()


def test_run_sync_refuses_a_coroutine_that_suspends():
    assert run_sync(_Served().load(WeightVersion("/x", 1))) is None
    with pytest.raises(RuntimeError, match="suspended"):
        run_sync(_suspends())
