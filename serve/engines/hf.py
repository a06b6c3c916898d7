"""transformers engine: the fallback and the logprob reference (fp32 by default).

Concurrency model: requests queue up in `_pending`; a batching task takes every waiting request (up to `max_batch`,
after a short gathering window) and runs them together, step by step, in a worker thread so the event loop is never
blocked. Requests arriving during a batch start another batch (up to `hf_concurrent_batches` in flight) whose steps
interleave with the running one. Every piece of torch work (loading, each batch's forward and sampling steps, a
swap's conversion and install) runs on the engine's one torch thread (`_on_torch`): libgomp keeps an OpenMP team for
every thread that ever ran a parallel region, and with more team threads than CPUs it cuts every team's spin-wait,
which slowed each bf16 linear ~2× (docs/cpu-facts.md#serving). `_lock` guards the parameters: it is held for each
forward step and by a weight swap, so a swap lands between two steps, never inside one. A row whose request ends —
finished, or cancelled by its client — leaves the batch before the next forward step (its KV rows are dropped from
the cache): nothing is computed for it after that step, whatever the other rows still have to do.

Prefill: a prompt that several requests of a batch share is computed once (`serve.hf_shared_prefill`), and with
`serve.hf_prefix_cache_tokens` a prompt that starts like one prefilled earlier reuses that prompt's KV rows for the
common prefix (`_PrefixCache`) and computes only the rest.

Device (`serve.hf_device`, `serve.hf_dtype`; `placement`): the model lives on the CPU or on CUDA, and every tensor a
batch builds (ids, masks, positions, KV buffers, sampling generators, grammar masks) and a swap's new weights are
made on the model's device, so nothing crosses between devices inside a step except the sampled ids and logprobs
read back. 'auto' is CUDA when torch sees a GPU; the dtype there is what slca/models/precision.py picks for CUDA
(bfloat16), while the CPU stays in float32, the logprob reference. Sampling is seeded per request on a generator of
the model's device: the same seed draws the same tokens again on that device (not across devices).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from serve.engines.base import EngineError, SamplingParams, ServedModel, TokenStep
from serve.engines.hf_grammars import HFGrammars
from serve.engines.hf_settings import HFEngineSettings
from serve.engines.registry import register_engine
from slca.models.precision import Precision, choose_precision, cuda_available
from slca.weights import WeightLoadError, WeightVersion, run_sync

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Placement:
    """Where the hf engine runs (`device`: 'cpu' or 'cuda') and in which precision."""

    device: str
    precision: Precision


def placement(settings, cuda: bool | None = None) -> Placement:
    """`serve.hf_device` and `serve.hf_dtype` resolved (`cuda`: whether torch sees a GPU; None: ask it). A 'cuda' the
    machine lacks is an EngineError here, at start, rather than a failure deep in the first forward step."""
    cuda = cuda_available() if cuda is None else cuda
    device = settings.hf_device
    if device == "auto":
        device = "cuda" if cuda else "cpu"
    elif device == "cuda" and not cuda:
        raise EngineError(
            "serve.hf_device=cuda, but torch sees no CUDA device (torch.cuda.is_available() is False: a CPU build of "
            "torch, no driver, or no visible GPU); set serve.hf_device=auto or cpu"
        )
    if device == "cpu" and settings.hf_dtype == "auto":
        # not choose_precision's CPU rule (bf16 where the CPU has bf16 units): on the CPU the engine is the
        # logprob reference, and float32 is what it always ran in there
        return Placement(device, Precision("float32", "cpu: the logprob reference"))
    return Placement(device, choose_precision(settings.hf_dtype, cuda=device == "cuda"))


@dataclass
class _Job:
    prompt_ids: list[int]
    params: SamplingParams
    queue: asyncio.Queue
    cancelled: bool = False
    generated: list[int] = field(default_factory=list)
    grammar: Any = None
    """`params.grammar` compiled (`HFGrammars`), before the job joins a batch."""


class _Row:
    """Per-request sampling state inside a batch."""

    def __init__(self, job: _Job, engine: "HFEngine"):
        import torch

        self.job = job
        self.done = job.cancelled
        seed = job.params.seed if job.params.seed is not None else random.getrandbits(63)
        self.generator = torch.Generator(device=engine.device).manual_seed(seed)
        self.matcher = engine._grammars.matcher(job.grammar) if job.grammar is not None else None
        self.budget = min(job.params.max_tokens, engine.settings.max_model_len - len(job.prompt_ids))


@register_engine("hf", settings=HFEngineSettings, threads_from_plan=True)
class HFEngine(ServedModel):
    """transformers (fp32 by default): the fallback and the logprob reference."""

    name = "hf"

    def __init__(self, model_dir: str, settings):
        super().__init__(model_dir, settings)
        self.model: Any = None
        self.placement: Placement | None = None
        self.device = "cpu"
        """The model's device ('cpu' or 'cuda'), resolved at `start` (`placement`)."""
        self._pending: list[_Job] = []
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(settings.hf_concurrent_batches, thread_name_prefix="hf-engine")
        self._torch = ThreadPoolExecutor(1, thread_name_prefix="hf-torch")
        """The one thread that runs torch work (the module docstring says why); batches take turns on it."""
        self.grammars = None
        """The app's grammar builders (serve/grammars.py), which compile forced-call grammars; None: its own."""
        self._grammars = HFGrammars(self, getattr(settings, "grammar_cache_mib", 64) << 20)
        self._last_logits_only = False
        self._running = 0
        self.stop_ids = {self.tokenizer.eos_token_id}
        self._prefix: _PrefixCache | None = None
        """KV rows of recent prompts for later prompts that start alike (`serve.hf_prefix_cache_tokens`; None: off
        or not used yet); made, resized or dropped at a prefill, as the setting says (`_prefix_cache`)."""

    @property
    def loaded(self) -> bool:
        return self.model is not None and self._task is not None and not self._task.done()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.placement = placement(self.settings)  # before loading: a missing GPU is refused here
        self.device = self.placement.device
        log.info("%s", self.placement.precision.describe(f"hf engine on {self.device}"))
        self.model = await loop.run_in_executor(self._torch, self._load_model)
        self._wakeup = asyncio.Event()
        self._task = asyncio.create_task(self._batch_loop(), name="hf-batch-loop")

    def _load_model(self):
        import torch
        from transformers import AutoModelForCausalLM

        if self.settings.torch_threads > 0:
            torch.set_num_threads(self.settings.torch_threads)
        attention = self.settings.hf_attention
        if attention == "grouped_decode":
            from serve.engines.hf_attention import register

            attention = register()
        model = AutoModelForCausalLM.from_pretrained(
            self.model_dir, dtype=getattr(torch, self.placement.precision.dtype), attn_implementation=attention
        )
        if self.device != "cpu":
            model.to(self.device)
        model.eval()
        # Only the last position's logits are sampled from: asking for those alone spares the prefill a
        # (batch, prompt length, vocab) projection (3x faster batches on the tiny model). Models whose forward
        # lacks the argument (older architectures) get every position, as before.
        self._last_logits_only = "logits_to_keep" in inspect.signature(model.forward).parameters
        gen_eos = model.generation_config.eos_token_id
        self.stop_ids |= set(gen_eos if isinstance(gen_eos, list) else [gen_eos] if gen_eos is not None else [])
        return model

    async def close(self) -> None:
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for job in self._pending:
            job.queue.put_nowait(EngineError("engine shut down"))
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._torch.shutdown(wait=True, cancel_futures=True)
        await self._grammars.close()

    async def stream(self, prompt_ids: list[int], params: SamplingParams) -> AsyncIterator[TokenStep]:
        if not self.loaded:
            raise EngineError("engine is not running")
        # compiled (or taken from the cache) here, before the batch: never on a batch thread, whose rows would wait
        grammar = await self._grammars.compiled(params.grammar) if params.grammar else None
        job = _Job(list(prompt_ids), params, asyncio.Queue(), grammar=grammar)
        self._pending.append(job)
        self._wakeup.set()
        try:
            while True:
                step = await job.queue.get()
                if isinstance(step, BaseException):
                    raise EngineError(f"engine failed: {step}") from step
                yield step
                if step.finish_reason:
                    return
        finally:
            job.cancelled = True  # the batch loop drops it at its next step

    async def _batch_loop(self) -> None:
        loop = asyncio.get_running_loop()
        # Up to `hf_concurrent_batches` batches are in flight: a request arriving while a batch runs starts
        # the next batch at once instead of waiting for the running one to finish. Their forward steps
        # interleave under `_lock` (one forward at a time), which approximates continuous batching.
        slots = asyncio.Semaphore(self.settings.hf_concurrent_batches)
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            await asyncio.sleep(self.settings.batch_wait_ms / 1000)  # let a burst of arrivals gather
            while self._pending:
                await slots.acquire()
                jobs = self._pending[: self.settings.max_batch]
                del self._pending[: len(jobs)]
                jobs = [j for j in jobs if not j.cancelled]  # their clients left while they waited
                if not jobs:
                    slots.release()
                    continue
                task = asyncio.create_task(self._run_jobs(jobs, loop))
                task.add_done_callback(lambda _: slots.release())

    @property
    def in_flight(self) -> int:
        """Sequences in running batches (a cancelled one leaves at the batch's next step)."""
        return self._running

    async def _run_jobs(self, jobs: list[_Job], loop: asyncio.AbstractEventLoop) -> None:
        self._running += len(jobs)
        left = 0

        def leave(n: int) -> None:  # on the event loop: rows that left the running batch
            nonlocal left
            left += n
            self._running -= n

        try:
            await loop.run_in_executor(self._executor, self._run_batch, jobs, loop, leave)
        except Exception as exc:  # a failed batch fails its requests, never the loop
            log.exception("hf batch failed")
            for job in jobs:
                loop.call_soon_threadsafe(job.queue.put_nowait, exc)
        finally:
            # `leave` calls were queued before the batch's own completion: every one has run by now
            self._running -= len(jobs) - left

    def _on_torch(self, fn, *args):
        """`fn(*args)` on the torch thread, under inference mode (which is per thread), from a batch thread."""

        def run():
            import torch

            with torch.inference_mode():
                return fn(*args)

        return self._torch.submit(run).result()

    # --- the batch, in its worker thread; its torch work on the torch thread ---------------------------
    def _run_batch(self, jobs: list[_Job], loop: asyncio.AbstractEventLoop, leave=None) -> None:
        rows = [_Row(job, self) for job in jobs]
        self.stats.observe(len(rows), len(rows))
        batch = self._on_torch(self._prefill, jobs)
        while True:
            next_ids = self._on_torch(self._sample_step, rows, batch.logits, batch.version, loop)
            keep = [i for i, r in enumerate(rows) if not r.done]
            if not keep:
                return
            if len(keep) < len(rows):  # finished or cancelled rows leave before the next step
                self._on_torch(batch.keep_rows, keep)
                if leave is not None:
                    loop.call_soon_threadsafe(leave, len(rows) - len(keep))
                rows, next_ids = [rows[i] for i in keep], [next_ids[i] for i in keep]
            self._on_torch(self._decode, batch, next_ids)

    def _prefill(self, jobs: list[_Job]) -> "_Batch":
        """With `serve.hf_shared_prefill` (the default) each distinct prompt of the batch is computed once and its KV
        rows and logits are repeated for every job that sent it: an agent run's `n` rollouts (a training group)
        share one prompt of hundreds of tokens, against ≤ 128 decoded each (ops/bench/serve/shared_prefill.py). With the
        prefix cache, each distinct prompt starts from the cached KV rows of its longest cached prefix."""
        if self.settings.hf_shared_prefill:
            distinct: dict[tuple[int, ...], int] = {}
            row_of = [distinct.setdefault(tuple(j.prompt_ids), len(distinct)) for j in jobs]
            prompts = [list(p) for p in distinct]
        else:  # every request's prompt on its own row
            row_of, prompts = list(range(len(jobs))), [j.prompt_ids for j in jobs]
        reused = [0] * len(prompts)
        if (prefix := self._prefix_cache()) is not None:
            reused = [prefix.longest(p) for p in prompts]
            missed = [p[:-1] for p, n in zip(prompts, reused) if n == 0 and len(p) > _PrefixCache.MIN_TOKENS]
            if missed and len(missed) < len(prompts):
                # Rows are padded to the longest part still to compute: in a batch that mixes prompts with and
                # without a cached prefix, the misses first compute all but their last token (cached), so that
                # the batch's forward has only short parts left on every row.
                self._prefill_rows(missed, [0] * len(missed))
                reused = [prefix.longest(p) for p in prompts]
        batch = self._prefill_rows(prompts, reused)
        if len(prompts) < len(jobs):
            batch.keep_rows(row_of)  # rows may repeat: each job gets its own copy of its prompt's KV rows
        return batch

    def _prefix_cache(self) -> "_PrefixCache | None":
        tokens = self.settings.hf_prefix_cache_tokens
        if tokens <= 0:
            self._prefix = None
        elif self._prefix is None or self._prefix.max_tokens != tokens:
            self._prefix = _PrefixCache(tokens)
        return self._prefix

    def _prefill_rows(self, prompts: list[list[int]], reused: list[int]) -> "_Batch":
        """One forward over `prompts`, row i starting after its first `reused[i]` tokens, whose KV rows come from
        the prefix cache. Each row is laid out as [pad | its cached prefix | pad | the rest]: the cached parts
        right-aligned on the longest one, the parts to compute left-padded to the longest; the attention mask
        hides the pads and positions count only real tokens, so a row attends exactly as it would alone."""
        import torch
        from transformers import DynamicCache

        from serve.engines.hf_kv import RoomyCache

        cached = max(reused)
        rest = [p[n:] for p, n in zip(prompts, reused)]
        width = max(len(r) for r in rest)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in rest], device=self.device)
        mask = torch.tensor(
            [[0] * (cached - n) + [1] * n + [0] * (width - len(r)) + [1] * len(r) for n, r in zip(reused, rest)],
            device=self.device,
        )
        positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, cached:]
        room = self.settings.hf_kv_room_tokens
        cache = RoomyCache(room) if room > 0 else DynamicCache()
        if cached:
            self._prefix.fill(cache, prompts, reused)
        logits, version = self._forward(input_ids, mask, positions, cache)
        self.stats.prompt_tokens_computed += sum(len(r) for r in rest)
        self.stats.prompt_tokens_reused += sum(reused)
        if self._prefix is not None:
            self._prefix.remember(prompts, mask, cache)
        return _Batch(mask, positions, cache, logits, version)

    def _decode(self, batch: "_Batch", next_ids: list[int]) -> None:
        """One decode step of every row still in `batch`: their sampled ids in, the next logits out."""
        import torch

        new = torch.ones(len(next_ids), 1, dtype=batch.mask.dtype, device=batch.mask.device)
        batch.mask = torch.cat([batch.mask, new], dim=1)
        batch.positions = batch.positions[:, -1:] + 1
        ids = torch.tensor(next_ids, device=batch.mask.device).unsqueeze(1)
        batch.logits, batch.version = self._forward(ids, batch.mask, batch.positions, batch.cache)

    def _forward(self, input_ids, mask, positions, cache):
        # The lock makes a weight swap wait for this step to finish (swap between steps).
        with self._lock:
            keep = {"logits_to_keep": 1} if self._last_logits_only else {}
            out = self.model(
                input_ids=input_ids,
                attention_mask=mask,
                position_ids=positions,
                past_key_values=cache,
                use_cache=True,
                **keep,
            )
            return out.logits[:, -1, :].float(), self.version

    def _sample_step(self, rows: list[_Row], logits, version: int, loop) -> list[int]:
        import torch

        logprobs = torch.log_softmax(logits, dim=-1)
        next_ids = []
        for i, row in enumerate(rows):
            if row.done or row.job.cancelled:
                row.done = True
                next_ids.append(self.tokenizer.eos_token_id)
                continue
            token, masked = self._choose(logits[i], row)
            row.job.generated.append(token)
            finish = self._finish_reason(row, token)
            row.done = finish is not None
            dist = masked if masked is not None else logprobs[i]  # the distribution the logprobs report
            step = TokenStep([token], [float(dist[token])], version, finish, _top(dist, row.job.params.top_logprobs))
            loop.call_soon_threadsafe(row.job.queue.put_nowait, step)
            next_ids.append(token)
        return next_ids

    def _choose(self, logits_row, row: _Row):
        """The sampled token, and under a grammar the log-probabilities of the masked distribution it came from
        (as vLLM reports them: its grammar bitmask is applied before its logprobs are taken), else None."""
        import torch

        masked_logprobs = None
        params = row.job.params
        scores = logits_row.clone()
        if row.matcher is not None:
            import xgrammar as xgr

            bitmask = xgr.allocate_token_bitmask(1, scores.shape[-1])
            row.matcher.fill_next_token_bitmask(bitmask)
            if scores.device.type == "cpu":
                scores = scores.unsqueeze(0)
                xgr.apply_token_bitmask_inplace(scores, bitmask)
                scores = scores[0]
            else:
                scores = _masked(scores, bitmask)
        if params.temperature <= 0:
            token = int(torch.argmax(scores))
        else:
            probs = torch.softmax(scores / params.temperature, dim=-1)
            if params.top_p < 1.0:
                probs = _top_p(probs, params.top_p)
            token = int(torch.multinomial(probs, 1, generator=row.generator))
        if row.matcher is not None:
            row.matcher.accept_token(token)
            masked_logprobs = torch.log_softmax(scores, dim=-1)
        return token, masked_logprobs

    def _finish_reason(self, row: _Row, token: int) -> str | None:
        if token in self.stop_ids:
            return "stop"
        if row.matcher is not None and row.matcher.is_terminated():
            return "stop"
        if row.job.params.stop:
            tail = self.tokenizer.decode(row.job.generated[-16:], skip_special_tokens=False)
            if any(s in tail for s in row.job.params.stop):
                return "stop"
        if len(row.job.generated) >= row.budget:
            return "length"
        return None

    # --- hot swap -----------------------------------------------------------------------------
    async def swap_weights(self, weights: WeightVersion) -> float:
        import time

        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        # Read and check in a separate thread: batches keep generating meanwhile. Converting and installing are
        # torch work: on the torch thread, between two steps.
        state = await loop.run_in_executor(None, self._checked_state, weights)
        error = await loop.run_in_executor(self._torch, self._install, state, weights)
        if error is not None:
            raise error
        return time.perf_counter() - t0

    def _checked_state(self, weights: WeightVersion) -> dict:
        """The new tensor of every parameter, already in the parameter's dtype and device: everything that can
        fail (reading, checksums, names, shapes, conversion) happens here, before any weight is touched."""
        path = weights.root
        state = weights.state_dict()  # the bytes hashed (against the announced manifest) are those loaded
        params = dict(self.model.named_parameters())
        missing = [n for n in params if n not in state and not self._tied(n)]
        if missing:
            raise WeightLoadError(f"{path}: missing tensors {missing[:3]}{'...' if len(missing) > 3 else ''}")
        for name, tensor in state.items():
            if name in params and tuple(tensor.shape) != tuple(params[name].shape):
                raise WeightLoadError(
                    f"{path}: {name} has shape {tuple(tensor.shape)}, model {tuple(params[name].shape)}"
                )

        def convert() -> dict:  # torch work: on the torch thread
            return {n: state[n].to(device=p.device, dtype=p.dtype) for n, p in params.items() if n in state}

        try:
            return self._torch.submit(convert).result()
        except (RuntimeError, TypeError, AttributeError) as exc:  # e.g. out of memory while converting
            raise WeightLoadError(f"{path}: cannot convert the tensors ({exc})") from None

    def _tied(self, name: str) -> bool:
        return name == "lm_head.weight" and bool(getattr(self.model.config, "tie_word_embeddings", False))

    def _install(self, state: dict, weights: WeightVersion) -> WeightLoadError | None:
        """Swap in `state` (from `_checked_state`): all of it or, should an assignment fail, none of it — the one
        rollback every engine shares (`ServedModel._reload_or_roll_back`), whose last good weights are here the
        parameter tensors replaced (references kept, no copy, no reload). None, or the error once they are back."""
        params = dict(self.model.named_parameters())
        with self._lock:  # between two forward steps of the running batch
            previous = {name: params[name].data for name in state}

            async def load(version: WeightVersion | None) -> None:
                for name, tensor in (state if version is weights else previous).items():
                    params[name].data = tensor

            error = run_sync(self._reload_or_roll_back(weights, load))
            if error is None and self._prefix is not None:
                self._prefix.clear()  # its rows were computed with the weights just replaced
            return error


class _PrefixCache:
    """KV rows of recently prefilled prompts, one row per prompt, keyed by its token ids, bounded in tokens (least
    recently used out first). Attention is causal: the keys and values of a position depend only on the tokens up
    to it, so the rows of any common prefix of a cached prompt and a new one are the new one's too. A new entry
    replaces the entries it extends (their rows are the first rows of its own). Touched on the torch thread."""

    MIN_TOKENS = 16
    """A shorter common prefix is not reused: a few rows saved do not pay for copying and padding."""

    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self._entries: OrderedDict[tuple[int, ...], list[tuple[Any, Any]]] = OrderedDict()
        self._tokens = 0

    @property
    def tokens(self) -> int:
        return self._tokens

    def longest(self, prompt: list[int]) -> int:
        """Tokens of `prompt`'s longest common prefix with a cached prompt, leaving at least its last token to
        compute (the next token's logits come from it); 0 below MIN_TOKENS."""
        key, limit = tuple(prompt), len(prompt) - 1
        best, best_key = 0, None
        for cached in self._entries:
            n = _common_prefix(cached, key, limit)
            if n > best:
                best, best_key = n, cached
        if best < self.MIN_TOKENS:
            return 0
        self._entries.move_to_end(best_key)
        return best

    def fill(self, cache, prompts: list[list[int]], reused: list[int]) -> None:
        """Put each row's reused prefix into the empty `cache`, right-aligned on the longest (zeros before it)."""
        cached = max(reused)
        sources = [self._source(p, n) if n else None for p, n in zip(prompts, reused)]
        some = next(s for s in sources if s is not None)
        for layer, (k, v) in enumerate(some):
            keys = k.new_zeros((len(prompts), k.shape[0], cached, k.shape[-1]))
            values = v.new_zeros((len(prompts), v.shape[0], cached, v.shape[-1]))
            for row, (source, n) in enumerate(zip(sources, reused)):
                if source is not None:
                    keys[row, :, cached - n :] = source[layer][0][:, :n]
                    values[row, :, cached - n :] = source[layer][1][:, :n]
            cache.update(keys, values, layer)

    def _source(self, prompt: list[int], n: int) -> list[tuple[Any, Any]]:
        key = tuple(prompt)
        for cached, rows in self._entries.items():
            if _common_prefix(cached, key, n) >= n:
                return rows
        raise KeyError("prefix left the cache between lookup and fill")  # lookup and fill run back to back

    def remember(self, prompts: list[list[int]], mask, cache) -> None:
        """Keep each prompt's KV rows (its unpadded positions) from a prefill's `cache`; a cache of another layout
        (a sliding window's, which keeps only the last positions) is not kept."""
        from transformers.cache_utils import DynamicLayer

        from serve.engines.hf_kv import RoomyLayer

        layers = getattr(cache, "layers", [])
        kept = (DynamicLayer, RoomyLayer)  # every position kept (not a sliding window's last ones)
        if not layers or not all(type(x) in kept and x.keys.shape[-2] == mask.shape[1] for x in layers):
            return
        for row, prompt in enumerate(prompts):
            if not self.MIN_TOKENS <= len(prompt) <= self.max_tokens:
                continue
            real = mask[row].nonzero().squeeze(-1)
            self._put(tuple(prompt), [(x.keys[row][:, real], x.values[row][:, real]) for x in layers])

    def _put(self, key: tuple[int, ...], rows: list[tuple[Any, Any]]) -> None:
        for cached in [c for c in self._entries if len(c) <= len(key) and key[: len(c)] == c]:
            self._tokens -= len(cached)
            del self._entries[cached]  # the new rows begin with these
        self._entries[key] = rows
        self._tokens += len(key)
        while self._tokens > self.max_tokens:
            dropped, _ = self._entries.popitem(last=False)
            self._tokens -= len(dropped)

    def clear(self) -> None:
        self._entries.clear()
        self._tokens = 0


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...], limit: int) -> int:
    """Length of the common prefix of `a` and `b`, at most `limit` (slices compare in C: a binary search over
    prefix lengths is faster than a Python loop over ~1,000 tokens)."""
    n = min(len(a), len(b), limit)
    if a[:n] == b[:n]:
        return n
    low, high = 0, n - 1  # a[:high + 1] != b[:high + 1] is known for high = n - 1
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


@dataclass
class _Batch:
    """A running batch's tensors, touched only on the torch thread."""

    mask: Any
    positions: Any
    cache: Any
    logits: Any
    version: int

    def keep_rows(self, keep: list[int]) -> None:
        """Only the rows `keep`, in that order (finished or cancelled rows leave before the next step; a shared
        prompt's row is repeated for each job that sent it)."""
        import torch

        index = torch.tensor(keep, device=self.mask.device)
        self.cache.batch_select_indices(index)
        self.mask, self.positions, self.logits = self.mask[index], self.positions[index], self.logits[index]


def _masked(scores, bitmask):
    """`scores` (vocab,) with -inf where xgrammar's `bitmask` (1, words) forbids a token (bit j of word i: token
    32·i + j), on the scores' device. Off the CPU, instead of xgrammar's kernel for CUDA, which Triton compiles at
    its first call (a C compiler on the serving machine); one row's unpacking is a few small ops on the GPU."""
    import torch

    bits = torch.arange(32, dtype=torch.int32, device=scores.device)
    words = bitmask[0].to(scores.device)
    allowed = ((words[:, None] >> bits) & 1).flatten()[: scores.shape[-1]]
    return scores.masked_fill(allowed == 0, float("-inf"))


def _top(logprobs, k: int) -> list[list[tuple[int, float]]] | None:
    """The k most likely (token id, logprob) of one position, most likely first; tokens a grammar masks out
    (-inf) are left out. None when none were asked for."""
    import torch

    if k <= 0:
        return None
    values, ids = torch.topk(logprobs, min(k, logprobs.shape[-1]))
    return [[(i, v) for i, v in zip(ids.tolist(), values.tolist()) if v != float("-inf")]]


def _top_p(probs, top_p: float):
    import torch

    sorted_probs, order = torch.sort(probs, descending=True)
    keep = sorted_probs.cumsum(-1) - sorted_probs < top_p
    sorted_probs = sorted_probs * keep
    out = torch.zeros_like(probs).scatter(0, order, sorted_probs)
    return out / out.sum()
