"""The in-process vLLM engine is built, stepped and rebuilt on its one driver thread (serve/engines/vllm_engine.py
`_drive`: a second thread running the engine's parallel regions cost a decode stream ~40% of its rate), and a
build that fails fails `start`. The engine core here is a stand-in that records the thread of every call."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest

from serve.engines.base import EngineError, SamplingParams
from serve.engines.vllm_engine import VLLMEngine
from serve.settings import ServeSettings


class _RecordingCore:
    """Answers each request with one token; its first step fails when `fail_first_step`."""

    def __init__(self, calls: list, fail_first_step: bool):
        self.calls = calls
        self.pending: list[str] = []
        self.fail_first_step = fail_first_step

    def _called(self, what: str) -> None:
        self.calls.append((what, threading.current_thread()))

    def add_request(self, request_id, prompt, params) -> None:
        self._called("add")
        self.pending.append(request_id)

    def abort_request(self, request_ids) -> None:
        self._called("abort")

    def has_unfinished_requests(self) -> bool:
        return bool(self.pending)

    def get_num_unfinished_requests(self) -> int:
        return len(self.pending)

    def step(self) -> list:
        self._called("step")
        if self.fail_first_step:
            self.fail_first_step = False
            raise RuntimeError("simulated: the step failed")
        request_id = self.pending.pop(0)
        lp = SimpleNamespace(logprob=-0.5, rank=1)
        comp = SimpleNamespace(token_ids=[7], logprobs=[{7: lp}], finish_reason="length")
        return [SimpleNamespace(request_id=request_id, outputs=[comp], finished=True)]


def test_the_engine_is_built_stepped_and_rebuilt_on_the_driver_thread(tiny_model_dir, monkeypatch):
    calls: list = []
    cores: list[_RecordingCore] = []

    def build(self):
        calls.append(("build", threading.current_thread()))
        cores.append(_RecordingCore(calls, fail_first_step=not cores))
        return cores[-1]

    monkeypatch.setattr(VLLMEngine, "_build", build)
    monkeypatch.setattr(VLLMEngine, "_vllm_params", lambda self, params: params)
    engine = VLLMEngine(str(tiny_model_dir), ServeSettings(engine="vllm"))
    params = SamplingParams(max_tokens=1)

    async def main():
        await engine.start()
        try:
            with pytest.raises(EngineError, match="simulated"):
                [step async for step in engine.stream([1, 2, 3], params)]
            async with asyncio.timeout(30):  # the rebuild runs on the driver thread
                while not engine.loaded:
                    await asyncio.sleep(0.01)
            return [step async for step in engine.stream([1, 2, 3], params)]
        finally:
            await engine.close()

    steps = asyncio.run(main())
    assert [(s.token_ids, s.finish_reason) for s in steps] == [([7], "length")]
    assert len(cores) == 2  # built, failed, rebuilt
    # (the failed stream's abort reaches the rebuilt core too)
    assert [what for what, _ in calls if what != "abort"] == ["build", "add", "step", "build", "add", "step"]
    assert {thread for _, thread in calls} == {engine._thread}
    assert engine._thread is not threading.main_thread()


def test_a_build_that_fails_fails_start(tiny_model_dir, monkeypatch):
    def build(self):
        raise RuntimeError("simulated: no such model")

    monkeypatch.setattr(VLLMEngine, "_build", build)
    engine = VLLMEngine(str(tiny_model_dir), ServeSettings(engine="vllm"))
    with pytest.raises(RuntimeError, match="no such model"):
        asyncio.run(engine.start())
    assert not engine.loaded
