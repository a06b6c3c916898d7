"""Serve's side of grammar building: bounded in time, bytes and share, and cancellable.

Every forced-call grammar is built by the grammar host (serve/engines/grammar_host.py), each build in a child
process killed at its deadline. Here:
- at most `builders` builds run at once, and one caller (`serve.admission.caller_of`) holds at most
  `per_caller` of them: a caller with many heavy schemas waits for its own share while other callers' builds
  take the free places (and chats without a forced call never wait here at all);
- a place is waited for at most `timeout_s` (GrammarBusy: 503 + Retry-After), a build runs at most `timeout_s`
  and is then killed (GrammarTooCostly: 422), as is a build whose caller hung up (its handler is cancelled);
- a build may add at most `memory_mib` MiB and send back at most `max_bytes` (GrammarTooCostly);
- results are kept by bytes (`cache_bytes`, least recently used out first), so a schema seen before costs
  nothing; both the grammar text (what vLLM compiles, within the same bound: it is the build already timed here)
  and the compiled grammar (what the hf engine applies without compiling) come back;
- every build asked for ends in one of `OUTCOMES`, told to `observe(kind, outcome)` (serve's
  `slca_grammar_builds_total`, serve/metrics.py): how often the bounds refuse, and whether the cache holds.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import signal
import sys
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

ENGINE_CALLER = "engine"
"""The caller of builds an engine asks for itself (a grammar that left the cache between request and batch)."""

KINDS = ("schema", "ebnf")
"""What a build starts from: a request's forced-call schema (`schema`), or grammar text an engine asks to have
compiled (`ebnf`, the hf engine: usually found in the cache, the schema's build having put it there)."""
OUTCOMES = ("built", "cached", "schema_refused", "too_costly", "timed_out", "busy", "unavailable", "cancelled")
"""How a build asked for ended: built now, found in the cache, or refused — the schema (the caller's error), past
the memory or byte bound, past the time bound, no builder place within the bound, no vocabulary, or the caller hung
up first. A fixed set: metric labels never grow with what callers send."""


@dataclass(frozen=True)
class Vocabulary:
    """What the grammar host needs to build the vocabulary's token masks (the hf engine uses the same values)."""

    model_dir: str
    vocab_size: int
    stop_ids: tuple[int, ...]

    @classmethod
    def of(cls, model_dir: str) -> "Vocabulary | None":
        """The vocabulary of the model in `model_dir`; None when the directory holds no model to read it from."""
        from pathlib import Path

        from transformers import AutoConfig, AutoTokenizer, GenerationConfig

        if not Path(model_dir).is_dir():  # never a hub name: nothing is fetched
            log.warning("no vocabulary for forced-call grammars: %s is no model directory", model_dir)
            return None
        try:
            config = AutoConfig.from_pretrained(model_dir, local_files_only=True)
            stop = {AutoTokenizer.from_pretrained(model_dir, local_files_only=True).eos_token_id} - {None}
        except (OSError, ValueError) as exc:
            log.warning("no vocabulary for forced-call grammars in %s (%s)", model_dir, exc)
            return None
        try:
            eos = GenerationConfig.from_pretrained(model_dir, local_files_only=True).eos_token_id
        except OSError:  # no generation_config.json
            eos = None
        stop |= set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        return cls(str(model_dir), config.vocab_size, tuple(sorted(stop)))


@dataclass(frozen=True)
class Built:
    ebnf: str
    compiled: str
    """xgrammar's `CompiledGrammar.serialize_json()` for the served vocabulary."""
    bytes: int


class GrammarError(Exception):
    outcome = "too_costly"
    """Its entry of `OUTCOMES`."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class SchemaRefused(GrammarError):
    """xgrammar cannot turn the schema into a grammar (the caller's schema is at fault)."""

    outcome = "schema_refused"


class GrammarTooCostly(GrammarError):
    """The build overran its time, memory or byte bound and was killed."""


class GrammarTimedOut(GrammarTooCostly):
    """The build overran its time bound (killed; refused as too costly, counted apart)."""

    outcome = "timed_out"


class GrammarUnavailable(GrammarError):
    """No grammar can be built here (no vocabulary: the served model's directory has none)."""

    outcome = "unavailable"


class GrammarBusy(GrammarError):
    """No place for the build within the bound (the caller's share in use, or every builder busy)."""

    outcome = "busy"


@dataclass(frozen=True)
class BuilderLimits:
    builders: int = 2
    per_caller: int = 1
    timeout_s: float = 10.0
    memory_mib: int = 512
    max_bytes: int = 8 << 20
    cache_bytes: int = 64 << 20
    start_timeout_s: float = 120.0
    """The host imports xgrammar, torch and transformers: seconds on an idle machine, more on a loaded one."""
    idle_s: float = 0.0
    """`serve.grammar_host_idle_s`: 0, the host runs from `start` to `close`; > 0, it is started by the first build
    and stopped after this many seconds without one."""

    @property
    def on_demand(self) -> bool:
        return self.idle_s > 0

    @classmethod
    def of(cls, settings) -> "BuilderLimits":
        return cls(
            builders=settings.grammar_builders,
            per_caller=settings.grammar_builds_per_caller,
            timeout_s=settings.grammar_compile_timeout_s,
            memory_mib=settings.grammar_build_memory_mib,
            max_bytes=settings.max_grammar_bytes,
            cache_bytes=settings.grammar_cache_mib << 20,
            idle_s=settings.grammar_host_idle_s,
        )


class CallerQueueFull(Exception):
    """The caller has as many builds waiting as it may."""


@dataclass
class _Waiter:
    caller: str
    ready: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class _Places:
    """`builders` places, at most `per_caller` to one caller; waiters served in arrival order among those whose
    caller is under its share (a caller at its share never blocks the callers behind it). A caller may have
    `WAITING_PER_SHARE` × `per_caller` builds waiting besides (`CallerQueueFull` past that): its waits hold places
    in admission's planning queue, which other callers need too."""

    WAITING_PER_SHARE = 2

    def __init__(self, builders: int, per_caller: int):
        self.free, self.per_caller = builders, per_caller
        self.held: dict[str, int] = {}
        self.waiting: deque[_Waiter] = deque()

    async def take(self, caller: str, timeout_s: float) -> None:
        if sum(w.caller == caller for w in self.waiting) >= self.WAITING_PER_SHARE * self.per_caller:
            raise CallerQueueFull(caller)
        waiter = _Waiter(caller)
        self.waiting.append(waiter)
        self._dispatch()
        try:
            await asyncio.wait_for(asyncio.shield(waiter.ready), timeout_s)
        except (TimeoutError, asyncio.CancelledError):
            if waiter.ready.done() and not waiter.ready.cancelled():  # granted just as we gave up: give it back
                self.give(caller)
            else:
                waiter.ready.cancel()
                self.waiting.remove(waiter)
            raise

    @property
    def busy(self) -> bool:
        """A build holds a place or waits for one."""
        return bool(self.held or self.waiting)

    def give(self, caller: str) -> None:
        self.free += 1
        self.held[caller] -= 1
        if not self.held[caller]:
            del self.held[caller]
        self._dispatch()

    def _dispatch(self) -> None:
        for waiter in list(self.waiting):
            if not self.free:
                return
            if self.held.get(waiter.caller, 0) >= self.per_caller:
                continue
            self.waiting.remove(waiter)
            self.free -= 1
            self.held[waiter.caller] = self.held.get(waiter.caller, 0) + 1
            waiter.ready.set_result(None)


class _Cache:
    """Built grammars by request text (a schema or a grammar), bounded by bytes, least recently used out first."""

    def __init__(self, max_bytes: int):
        self.max_bytes, self.bytes = max_bytes, 0
        self.entries: OrderedDict[str, Built] = OrderedDict()

    def get(self, key: str) -> Built | None:
        built = self.entries.get(key)
        if built is not None:
            self.entries.move_to_end(key)
        return built

    def put(self, key: str, built: Built) -> None:
        size = built.bytes + len(key)
        if size > self.max_bytes or key in self.entries:
            return
        self.entries[key] = built
        self.bytes += size
        while self.bytes > self.max_bytes:
            old_key, old = self.entries.popitem(last=False)
            self.bytes -= old.bytes + len(old_key)


class GrammarBuilder:
    """Builds grammars through one grammar host process (started on first use, or by `start`; closed by
    `close`). Lives on one event loop: the app's."""

    def __init__(
        self,
        vocabulary: Vocabulary | None,
        limits: BuilderLimits,
        observe: Callable[[str, str], None] | None = None,
    ):
        self.vocabulary, self.limits = vocabulary, limits
        self.observe = observe or (lambda kind, outcome: None)
        """Told (kind, outcome) of every build asked for: one of `KINDS`, one of `OUTCOMES`."""
        self._places = _Places(limits.builders, limits.per_caller)
        self._cache = _Cache(limits.cache_bytes)
        self._ids = itertools.count(1)
        self._answers: dict[int, asyncio.Future] = {}
        self._host: asyncio.subprocess.Process | None = None
        self._starting: asyncio.Task | None = None
        self._reader: asyncio.Task | None = None
        self._first_start_over = asyncio.Event()
        if vocabulary is None or limits.on_demand:  # nothing to wait for: 501 at once, or started by the first build
            self._first_start_over.set()
        self._last_build = 0.0
        """Event-loop time of the last build's end (on demand: the idle clock)."""
        self._idle_watch: asyncio.Task | None = None

    async def schema(self, caller: str, schema_json: str) -> Built:
        """The grammar of one `<tool_call>` block following `schema_json`, built and compiled."""
        return await self._build(caller, "schema", schema_json)

    async def compiled(self, ebnf: str, caller: str = ENGINE_CALLER) -> Built:
        """`ebnf` compiled for the served vocabulary (from the cache when it was built before)."""
        return await self._build(caller, "ebnf", ebnf)

    def cached(self, ebnf: str) -> Built | None:
        return self._cache.get("ebnf:" + ebnf)

    async def _build(self, caller: str, kind: str, text: str) -> Built:
        try:
            built, outcome = await self._build_or_reuse(caller, kind, text)
        except GrammarError as exc:
            self.observe(kind, exc.outcome)
            raise
        except asyncio.CancelledError:
            self.observe(kind, "cancelled")
            raise
        self.observe(kind, outcome)
        return built

    async def _build_or_reuse(self, caller: str, kind: str, text: str) -> tuple[Built, str]:
        if self.vocabulary is None:
            raise GrammarUnavailable("forced tool_choice is unavailable: the served model's vocabulary is unknown")
        key = f"{kind}:{text}"
        if (built := self._cache.get(key)) is not None:
            return built, "cached"
        # One wait before the build, bounded by one build's time: for a builder place and, after a (re)start, for
        # the host (its imports took 10+ s on a loaded 2-core machine, and the first forced call then waited for
        # them past its bound: CI, 2026-12-06). A caller gets its answer, or a 503 to retry, within that wait plus
        # one build.
        deadline = asyncio.get_running_loop().time() + self.limits.timeout_s
        try:
            await self._places.take(caller, self.limits.timeout_s)
        except CallerQueueFull:
            raise GrammarBusy(
                "this caller's grammar builds are at their share, and as many again are waiting; retry shortly"
            ) from None
        except TimeoutError:
            raise GrammarBusy(
                f"no grammar builder was free within {self.limits.timeout_s:g} s "
                f"({self.limits.per_caller} build(s) at once per caller, {self.limits.builders} in all); retry shortly"
            ) from None
        try:
            await self._ready(max(0.1, deadline - asyncio.get_running_loop().time()))
            answer = await self._ask({kind: text, "timeout_s": self.limits.timeout_s})
        finally:
            self._places.give(caller)
            self._last_build = asyncio.get_running_loop().time()
        built = self._built(answer)
        self._cache.put(key, built)
        self._cache.put("ebnf:" + built.ebnf, built)  # the engine asks by grammar text
        return built, "built"

    def _built(self, answer: dict) -> Built:
        if answer.get("ok"):
            if answer["bytes"] > self.limits.max_bytes:
                raise GrammarTooCostly(
                    f"the compiled grammar takes {answer['bytes']} bytes, over {self.limits.max_bytes}"
                )
            return Built(answer["ebnf"], answer["compiled"], answer["bytes"])
        kind, reason = answer.get("kind"), str(answer.get("reason", "failed"))
        if kind == "schema":
            raise SchemaRefused(reason)
        if kind == "timeout":
            raise GrammarTimedOut(f"building the grammar took longer than {self.limits.timeout_s:g} s (stopped)")
        if kind == "bytes":
            reason = f"the compiled grammar exceeds {self.limits.max_bytes} bytes (stopped)"
        elif kind == "memory":
            reason = f"building the grammar needs more than {self.limits.memory_mib} MiB (stopped)"
        raise GrammarTooCostly(reason)

    async def _ask(self, request: dict) -> dict:
        build_id = next(self._ids)
        answer = asyncio.get_running_loop().create_future()
        self._answers[build_id] = answer
        host = self._host
        try:
            self._write(host, {"id": build_id, **request})
            # the host kills the build at its deadline and says so; past a grace the host itself is stuck
            return await asyncio.wait_for(asyncio.shield(answer), self.limits.timeout_s + 10.0)
        except asyncio.CancelledError:  # the caller hung up: its build is killed, not left running
            if host is self._host and host is not None and host.returncode is None:
                self._write(host, {"cancel": build_id})
            raise
        except TimeoutError:
            log.warning("grammar host did not answer build %d in time; restarting it", build_id)
            await self._stop_host()
            raise GrammarTimedOut(f"building the grammar took longer than {self.limits.timeout_s:g} s") from None
        finally:
            self._answers.pop(build_id, None)

    @staticmethod
    def _write(host, message: dict) -> None:
        host.stdin.write(json.dumps(message).encode() + b"\n")

    # --- the host process ------------------------------------------------------------------------
    def start(self) -> None:
        """Start the host in the background (the first build waits for it); on demand, the first build starts it."""
        if not self.limits.on_demand:
            self._launch()

    def _launch(self) -> None:
        if self.vocabulary is None:
            return
        if self._starting is None or (self._starting.done() and not self._alive()):
            self._starting = asyncio.create_task(self._start_host(), name="grammar-host-start")

    @property
    def first_start_over(self) -> bool:
        """The host's first start has ended, up or failed: readiness waits for this and no later restart (a
        restart after a stuck build must not take the replica out of rotation)."""
        return self._first_start_over.is_set()

    async def first_start(self) -> None:
        """Wait until the host's first start has ended (see `first_start_over`)."""
        await self._first_start_over.wait()

    async def ready(self) -> None:
        await self._ready(self.limits.start_timeout_s)

    def _alive(self) -> bool:
        return self._host is not None and self._host.returncode is None

    async def _ready(self, timeout_s: float) -> None:
        self._launch()
        try:
            await asyncio.wait_for(asyncio.shield(self._starting), timeout_s)
        except TimeoutError:
            raise GrammarBusy("the grammar builder is still starting; retry shortly") from None
        except OSError as exc:  # the host could not be started at all
            log.error("grammar host: cannot start (%s)", exc)
        if not self._alive():
            self._starting = None
            raise GrammarBusy("the grammar builder is not running; retry shortly")

    async def _start_host(self) -> None:
        try:  # bounded: readiness waits for the first start, and a host stuck in its imports must not hold it
            await asyncio.wait_for(self._spawn_host(), self.limits.start_timeout_s)
        except TimeoutError:
            log.error(
                "grammar host: not up within %g s (stopped); the next forced call starts it again",
                self.limits.start_timeout_s,
            )
        finally:
            self._first_start_over.set()

    async def _spawn_host(self) -> None:
        limits = self.limits
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
        host = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "serve.engines.grammar_host",
            "--memory-mib",
            str(limits.memory_mib),
            "--max-bytes",
            str(limits.max_bytes),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group: killing it kills the builds it forked
            limit=limits.max_bytes * 2 + (1 << 20),  # one answer is one line: the compiled grammar, escaped
        )
        v = self.vocabulary
        self._write(host, {"model_dir": v.model_dir, "vocab_size": v.vocab_size, "stop_ids": list(v.stop_ids)})
        try:
            line = await host.stdout.readline()
        except asyncio.CancelledError:
            host.kill()
            raise
        if not line:
            await host.wait()
            log.error("grammar host exited while starting (status %s)", host.returncode)
            return
        self._host = host
        self._reader = asyncio.create_task(self._read_answers(host), name="grammar-host-reader")
        if self.limits.on_demand:
            self._last_build = asyncio.get_running_loop().time()
            self._idle_watch = asyncio.create_task(self._stop_when_idle(host), name="grammar-host-idle")

    async def _stop_when_idle(self, host) -> None:
        """On demand: stop `host` once `idle_s` have passed since the last build with none running (a build that
        comes after the stop starts a new host)."""
        loop = asyncio.get_running_loop()
        while self._host is host and host.returncode is None:
            idle_for = loop.time() - self._last_build
            if idle_for >= self.limits.idle_s and not self._answers and not self._places.busy:
                # no await between the check and this: no build can have taken the host meanwhile
                self._host, self._starting = None, None
                log.info("grammar host: stopped after %.0f s without a forced call (the next one starts it)", idle_for)
                await self._quit(host)
                return
            await asyncio.sleep(max(self.limits.idle_s - idle_for, 0.05 * self.limits.idle_s, 0.01))

    async def _read_answers(self, host) -> None:
        while line := await host.stdout.readline():
            answer = json.loads(line)
            future = self._answers.get(answer.get("id"))
            if future is not None and not future.done():
                future.set_result(answer)
        if self._host is not None and self._host is not host:
            return  # an idle host that was stopped: what is pending now belongs to its successor
        for future in self._answers.values():  # the host died: every build it held failed
            if not future.done():
                future.set_result({"ok": False, "kind": "memory", "reason": "the grammar host stopped"})

    @staticmethod
    async def _kill(host) -> None:
        if host.returncode is None:
            try:
                os.killpg(host.pid, signal.SIGKILL)  # the host and every build it forked
            except ProcessLookupError:
                pass
            await host.wait()

    async def _stop_host(self) -> None:
        host, self._host, self._starting = self._host, None, None
        if host is not None:
            await self._kill(host)
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
            self._reader = None

    async def _quit(self, host) -> None:
        """End `host`: its stdin closed (it kills its builds and exits), killed if it lingers."""
        if host.returncode is None:
            host.stdin.close()
            try:
                await asyncio.wait_for(host.wait(), 5.0)
            except TimeoutError:
                await self._kill(host)

    async def close(self) -> None:
        if self._idle_watch is not None:
            self._idle_watch.cancel()
            await asyncio.gather(self._idle_watch, return_exceptions=True)
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
            await asyncio.gather(self._starting, return_exceptions=True)
        if self._host is not None:
            await self._quit(self._host)
        await self._stop_host()
