"""Two roles for weight versions in one serve process (docs/design.md#versions): which engine answers a request.

The *candidate* is the learner's newest version: the engine the weight follower swaps (`primary`). The *promoted*
version is what callers get. While the two are the same version callers share the primary engine; the first time
the candidate moves past the promoted version, a second engine is made holding the promoted version and callers move
to it (the primary waits, up to `serve.drain_s`, for the callers' requests in flight before it swaps: none of them
sees the candidate). From then on the second engine stays, and a promotion swaps it to the promoted version between
two of its steps (or, for v0, replaces it by a fresh engine on the base model once its requests have ended).
Cost: one more copy of the model and its caches while the roles differ (measured in the README).

Who gets which (`Route`, decided once per request and kept for all its turns and rollouts):
- a pin — a `model` of `<name>@v<N>` or the header `X-SLCA-Pin-Version: N` — gets that version: the engine of
  either role when it holds it, else one of `serve.pin_engines` engines loaded with it (a version that does not
  exist, was pruned or fails verification: 404/422 before any work, and nothing changes);
- the system's own keys (`common.record_key`, `common.admin_token`: the training feed and the probe), or a key
  with the `record` scope sending `X-SLCA-Role: candidate`, get the candidate (the learner trains on its traffic);
- `serve.canary_share` of the other requests get the candidate, the rest the promoted version.
Every answer names its version: the `policy_version` field (as before) and the `X-SLCA-Policy-Version` header.

One role per replica (`serve.role`, "both" by default): a "promoted" replica's one engine holds the promoted version
for every request — it is not swapped on the learner's announcements (serve's weight follower is not started) but on
a promotion, `slca promote` or a rollback, and at start to the recorded promoted version; a "candidate" replica's one
engine follows the announcements and answers every request (a promotion only updates the version it reports). With
an engine that holds one model per process (vLLM) this is how callers keep the promoted version: two replicas, two
processes (`ops.candidate_replica` in `slca up`).

`VersionRouter` is the `Engine` the handlers hold (`app[ENGINE]`): `stream` answers from the request's engine,
`swap_weights` (the follower's) is the candidate's swap, `version` is the request's engine's version inside a
request and the candidate's elsewhere (the follower's checks, /readyz, the replica status).
"""

from __future__ import annotations

import asyncio
import contextvars
import hmac
import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from aiohttp import web

from serve.engines.base import Engine, EngineError, SamplingParams, TokenStep
from serve.errors import BadRequest, Forbidden
from serve.candidate_hold import CandidateHold, CandidateMoved
from serve.version_store import OneEngineOnly, VersionBusy, VersionNotFound, VersionStore
from slca.contracts.versions import PIN, PIN_HEADER, ROLE_HEADER, VERSION_HEADER
from slca.weights import WeightLoadError, WeightVersion

log = logging.getLogger(__name__)

MODEL_PATHS = frozenset({"/v1/chat/completions", "/v1/agent/runs"})
"""The endpoints whose requests are routed to a version (every other one reads the candidate's state)."""


@dataclass
class Slot:
    """One engine and who holds it: requests of each kind ('caller', 'pin', 'candidate') deciding on it."""

    engine: Engine
    role: str
    """'candidate' (the primary), 'promoted' or 'pin'."""
    holders: dict[str, int] = field(default_factory=lambda: {"caller": 0, "pin": 0, "candidate": 0})
    loading: bool = False
    """Being loaded with another version: no new request is routed to it."""
    last_used: float = 0.0

    @property
    def version(self) -> int:
        return self.engine.version


@dataclass
class Route:
    """One request's way to an engine: asked for at the middleware, decided at its first engine call."""

    kind: str = "caller"
    """'caller' (promoted, or the candidate by canary), 'candidate' (the system's own traffic) or 'pin'."""
    pin: int | None = None
    slot: Slot | None = None
    versions: set[int] = field(default_factory=set)
    """Versions that sampled this request's tokens."""
    engine_errors: int = 0
    tool_calls: int = 0
    malformed: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def pin_to(self, version: int) -> None:
        if self.pin is not None and self.pin != version:
            raise BadRequest(f"the request pins v{self.pin} and v{version}; pin one version", param="model")
        self.pin, self.kind = version, "pin"

    @property
    def version(self) -> int | None:
        return max(self.versions) if self.versions else (self.slot.version if self.slot else None)


ROUTE: contextvars.ContextVar[Route | None] = contextvars.ContextVar("slca_version_route", default=None)
"""The current request's route (set by `version_middleware`; agent-run tasks and the request pool inherit it)."""
ROUTE_KEY = web.RequestKey("version_route", Route)


def note_tool_call(outcome: str) -> None:
    """Count one tool call of the current request for the live-signal guard ('malformed' or anything else)."""
    route = ROUTE.get()
    if route is not None:
        route.tool_calls += 1
        route.malformed += outcome == "malformed"


class VersionRouter:
    """The handlers' engine: routes each request to the engine of its version (see the module docstring)."""

    def __init__(
        self,
        primary: Engine,
        factory: Callable[[], Engine],
        settings,
        store: VersionStore,
        on_finish: Callable[[Route], None] | None = None,
    ) -> None:
        self.role = getattr(settings, "role", "both")
        """`serve.role`: "both", or the one role every request of this replica gets ("promoted", "candidate")."""
        self.primary = Slot(primary, "promoted" if self.role == "promoted" else "candidate")
        self._first = primary  # the app's engine context closes it; one that replaced it is closed here
        self.one_engine = bool(getattr(primary, "one_per_process", False))
        """The engine cannot have a sibling in this process (vLLM on CPU: a second in-process engine aborted and then
        segfaulted serve at every restart — `make soak` on a fresh clone, 2026-12-05): one engine holds every
        role, callers follow the candidate, a promotion moves that engine, and a version it does not hold cannot be
        pinned."""
        if self.role != "both":
            log.info("serve.role=%s: every request of this replica gets the %s version", self.role, self.role)
        elif self.one_engine and not settings.follow_candidate:
            log.warning(
                "the %s engine holds one model per process: callers follow the candidate (no promotion gate in this "
                "process; serve.engine=hf, or one replica per role, keeps the roles apart)",
                primary.name,
            )
        self.factory = factory
        self.settings = settings
        self.store = store
        self.promoted_slot: Slot | None = None
        self.pins: list[Slot] = []
        self.promoted = primary.version
        """The version callers get (set by the promotion record, `serve.promotion`)."""
        self.on_finish = on_finish
        self._draining = False
        self._roles = asyncio.Lock()  # role changes (promotion, the candidate's swap) one at a time
        self._pin_lock = asyncio.Lock()
        self._released = asyncio.Event()
        self._streams: dict[int, int] = {}  # id(engine) → streams running on it
        self._retiring: set[asyncio.Task] = set()
        self.hold = CandidateHold(getattr(settings, "hold_max_s", 1800.0))
        """While a judge (the gate) evaluates the candidate pinned, its swaps wait (serve/version_hold.py)."""
        self._swapping = asyncio.Lock()  # a hold is taken between two swaps, never during one

    # --- the Engine protocol, for the handlers and the weight follower -------------------------------------------
    @property
    def name(self) -> str:
        return self.primary.engine.name

    @property
    def model_name(self) -> str:
        return self.primary.engine.model_name

    @property
    def tokenizer(self):
        return self.primary.engine.tokenizer

    @property
    def stats(self):
        return self.primary.engine.stats

    @property
    def loaded(self) -> bool:
        return self.primary.engine.loaded

    @property
    def version(self) -> int:
        route = ROUTE.get()
        if route is not None and route.slot is not None:
            return route.slot.version
        return self.primary.version

    @property
    def candidate(self) -> int:
        return self.primary.version

    def __getattr__(self, name: str) -> Any:  # engine-specific attributes (rebuild counters …): the primary's
        if name == "primary":
            raise AttributeError(name)
        return getattr(self.primary.engine, name)

    async def start(self) -> None:
        await self.primary.engine.start()

    async def close(self) -> None:
        await self.close_others()
        await self._first.close()

    async def close_others(self) -> None:
        """Close every engine but the primary (the app's engine context closes that one)."""
        for task in list(self._retiring):
            task.cancel()
        others = ([self.promoted_slot] if self.promoted_slot else []) + self.pins
        self.promoted_slot, self.pins = None, []
        for slot in others:
            await slot.engine.close()
        if self.primary.engine is not self._first:  # a promoted replica's engine replaced for v0 (`_promote_one`)
            await self.primary.engine.close()

    async def stream(self, prompt_ids: list[int], params: SamplingParams) -> AsyncIterator[TokenStep]:
        route = ROUTE.get()
        slot = await self._slot_of(route) if route is not None else self._callers_slot()
        engine = slot.engine
        key = id(engine)
        self._streams[key] = self._streams.get(key, 0) + 1
        slot.last_used = time.monotonic()
        try:
            async for step in engine.stream(prompt_ids, params):
                if route is not None:
                    route.versions.add(step.version)
                yield step
        except EngineError:
            if route is not None:
                route.engine_errors += 1
            raise
        finally:
            self._streams[key] -= 1
            self._released.set()

    async def swap_weights(self, weights: WeightVersion) -> float:
        """The candidate's swap (the weight follower's): callers never see it unless it is promoted. It waits while
        the candidate is held (`hold_candidate`)."""
        if self.role == "promoted":  # its follower is not started: this is an admin's swap (`POST /admin/weights`)
            raise WeightLoadError(
                f"this replica serves the promoted v{self.promoted} (serve.role=promoted): it moves on a promotion "
                "(`slca promote --to vN`), not on a weight swap"
            )
        while True:
            await self.hold.wait()
            async with self._swapping:
                if not self.hold.active:  # a hold taken while this swap waited for the lock: wait for it too
                    return await self._swap_candidate(weights)

    async def swappable(self) -> bool:
        """Wait while the candidate is held; True when it waited (the weight follower then loads the newest
        announcement, not the one it had when the hold began: slca/weights/swap.py `load_wanted`)."""
        if not self.hold.active:
            return False
        await self.hold.wait()
        return True

    async def hold_candidate(self, version: int | None, seconds: float) -> tuple[int, float]:
        """Hold the candidate's engine at the version it serves (`version`: only if it still serves that one, else
        CandidateMoved) for `seconds` at most `serve.hold_max_s`: (version held, seconds granted)."""
        async with self._swapping:
            served = self.candidate
            if version is not None and version != served:
                raise CandidateMoved(f"the candidate's engine serves v{served}, not v{version}")
            granted = self.hold.hold(served, seconds)
        try:  # the gate promotes it after the judging: its files must outlive the learner's pruning
            await asyncio.to_thread(self.store.keep_held, served)
        except OSError as exc:
            log.warning("could not keep a copy of the held v%s: %s", served, exc)
        log.info("the candidate is held at v%s for %.0f s (its swaps wait)", served, granted)
        return served, granted

    async def _swap_candidate(self, weights: WeightVersion) -> float:
        if self.role == "candidate":  # the one engine follows; the promoted version stays the record's
            return await self.primary.engine.swap_weights(weights)
        if self.settings.follow_candidate or self.one_engine:
            seconds = await self.primary.engine.swap_weights(weights)
            self.promoted = self.primary.version
            return seconds
        async with self._roles:
            if self.promoted_slot is None and self.promoted == self.primary.version:
                try:  # callers share the primary: give them their own engine before it moves on
                    self.promoted_slot = await self._new_slot(self.promoted, "promoted")
                except Exception as exc:  # noqa: BLE001 - no promoted engine: callers follow the candidate (logged)
                    log.error("no engine for the promoted v%s (%s): callers follow the candidate", self.promoted, exc)
            self._draining = True
        try:
            await self._drain(self.primary, ("caller", "pin"), self.settings.drain_s)
            return await self.primary.engine.swap_weights(weights)
        finally:
            self._draining = False
            if self.promoted_slot is None:
                self.promoted = self.primary.version

    # --- roles ---------------------------------------------------------------------------------------------------
    async def promote(self, version: int) -> None:
        """Make `version` the one callers get; raises VersionNotFound / VersionUnverified (nothing changed)."""
        async with self._roles:
            if self.role != "both":
                await self._promote_one(version)
                return
            if version == self.promoted and (self.promoted_slot is None or self.promoted_slot.version == version):
                return
            if self.promoted_slot is None and version == self.primary.version:
                self.promoted = version
                return
            weights = await self._resolve(version)
            if self.one_engine:  # the one engine moves, the feed with it (the warm start's handover promotes first)
                await self._move_one_engine(version, weights)
                self.promoted = version
                log.info("callers and the candidate's traffic now get v%s (one engine)", version)
                return
            if self.promoted_slot is None:
                self.promoted_slot = await self._new_slot(version, "promoted", weights)
            else:
                await self._retarget(self.promoted_slot, version, weights)
            self.promoted = version
            log.info("callers now get v%s (candidate v%s)", version, self.primary.version)

    async def _promote_one(self, version: int) -> None:
        """A one-role replica's promotion. "candidate": checked (404/422) and reported, its engine stays on the
        candidate. "promoted": its one engine loads `version` between two steps; v0 (no manifest): a fresh engine on
        the base model replaces it, where the engine allows a second one (else 409 `one_engine_per_process`)."""
        weights = None if version == self.primary.version else await self._resolve(version)
        if self.role == "promoted" and version != self.primary.version:
            if weights is None and self.one_engine:
                await self._move_one_engine(version, None)
            else:
                await self._retarget(self.primary, version, weights)
        self.promoted = version
        log.info("the promoted version is v%s (this replica, serve.role=%s, serves v%s)", version, self.role,
                 self.primary.version)  # fmt: skip

    async def _move_one_engine(self, version: int, weights: WeightVersion | None) -> None:
        """The one engine of this process (`one_engine`) loads `version`: a published one through its verified swap;
        v0, which has no manifest (None), from the model directory in place (`load_base`: a rollback to the warm
        start's base, the live-signal guard's or an operator's). An engine without `load_base`: OneEngineOnly."""
        if weights is not None:
            await self.primary.engine.swap_weights(weights)
            return
        load_base = getattr(self.primary.engine, "load_base", None)
        if load_base is None:
            raise OneEngineOnly(f"v{version} has no manifest to load into the one {self.name} engine")
        await load_base()

    def loaded_versions(self) -> dict[str, int]:
        if self.role == "promoted":
            return {"promoted": self.primary.version, **{f"pin{i}": s.version for i, s in enumerate(self.pins)}}
        out = {"candidate": self.primary.version}
        if self.promoted_slot is not None:
            out["promoted"] = self.promoted_slot.version
        for i, slot in enumerate(self.pins):
            out[f"pin{i}"] = slot.version
        return out

    # --- routing -------------------------------------------------------------------------------------------------
    def _callers_slot(self) -> Slot:
        return self.promoted_slot or self.primary

    def peek(self, route: Route) -> int:
        """The version `route` would get now (the header of a stream prepared before its first token)."""
        if route.slot is not None:
            return route.slot.version
        if route.pin is not None:
            return route.pin
        return self.primary.version if route.kind == "candidate" else self._callers_slot().version

    async def _slot_of(self, route: Route) -> Slot:
        async with route.lock:  # the n rollouts of a request start together: decide once
            if route.slot is None:
                slot = await self._choose(route)
                slot.holders[route.kind] += 1
                route.slot = slot
            return route.slot

    async def _choose(self, route: Route) -> Slot:
        if route.pin is not None:
            return await self._pinned(route.pin)
        if route.kind == "candidate":
            return self.primary
        if self.role != "both":  # one engine, one role: every request gets it
            if self.role == "candidate":
                route.kind = "candidate"  # not a caller of the promoted version: the live-signal guard skips it
            return self.primary
        if self.settings.canary_share > 0 and random.random() < self.settings.canary_share:
            route.kind = "candidate"
            return self.primary
        return self._callers_slot()

    def _holding(self, version: int) -> Slot | None:
        """A ready engine serving `version` (the primary only when it is not about to swap)."""
        if self.primary.version == version and not self._draining:
            return self.primary
        for slot in ([self.promoted_slot] if self.promoted_slot else []) + self.pins:
            if slot.version == version and not slot.loading:
                return slot
        return None

    async def _pinned(self, version: int) -> Slot:
        if (slot := self._holding(version)) is not None:
            return slot
        weights = await self._resolve(version)  # 404 / 422 before any engine work
        async with self._pin_lock:
            if (slot := self._holding(version)) is not None:
                return slot
            idle = [s for s in self.pins if not any(s.holders.values()) and not s.loading]
            if idle:
                slot = min(idle, key=lambda s: s.last_used)
                await self._retarget(slot, version, weights)
                return slot
            if len(self.pins) < self.settings.pin_engines:
                slot = await self._new_slot(version, "pin", weights)
                self.pins.append(slot)
                return slot
        raise VersionBusy(f"every engine for pinned versions ({self.settings.pin_engines}) is busy; retry shortly", 2)

    def finish(self, route: Route) -> None:
        """The request ended: release its engine, hand its live signals on."""
        if route.slot is not None:
            route.slot.holders[route.kind] -= 1
            self._released.set()
        if self.on_finish is not None:
            self.on_finish(route)

    # --- engines -------------------------------------------------------------------------------------------------
    async def _resolve(self, version: int) -> WeightVersion | None:
        if not self.store.exists(version):
            raise VersionNotFound(
                f"weight version v{version} does not exist on this server (never published, or pruned)"
            )
        return await asyncio.get_running_loop().run_in_executor(None, self.store.resolve, version)

    async def _new_slot(self, version: int, role: str, weights: WeightVersion | None = ...) -> Slot:
        if self.one_engine:
            raise OneEngineOnly(
                f"v{version} needs an engine of its own and the {self.primary.engine.name} engine holds one model per "
                f"process (this one holds v{self.primary.version}); serve.engine=hf keeps several"
            )
        if weights is ...:
            weights = await self._resolve(version)
        engine = await asyncio.get_running_loop().run_in_executor(None, self.factory)
        await engine.start()
        try:
            if weights is not None:
                await engine.swap_weights(weights)
        except BaseException:
            await engine.close()
            raise
        log.info("a %s engine now holds v%s", role, version)
        return Slot(engine, role, last_used=time.monotonic())

    async def _retarget(self, slot: Slot, version: int, weights: WeightVersion | None) -> None:
        """Load `version` into `slot`'s engine between two of its steps; v0 (the base model, no manifest): a fresh
        engine takes the slot's place and the old one is closed once its streams have ended."""
        slot.loading = True
        try:
            if weights is not None:
                await slot.engine.swap_weights(weights)
                return
            fresh = await self._new_slot(0, slot.role, None)
            old, slot.engine = slot.engine, fresh.engine
            task = asyncio.create_task(self._retire(old), name="retire-engine")
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)
        finally:
            slot.loading = False

    async def _retire(self, engine: Engine) -> None:
        deadline = time.monotonic() + getattr(self.settings, "engine_timeout_s", 300.0)
        while self._streams.get(id(engine), 0) > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        self._streams.pop(id(engine), None)
        await engine.close()

    async def _drain(self, slot: Slot, kinds: tuple[str, ...], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while sum(slot.holders[k] for k in kinds) > 0:
            left = deadline - time.monotonic()
            if left <= 0:
                log.warning("swapping with %s requests of callers/pins still on the candidate engine", slot.holders)
                return
            self._released.clear()
            try:
                await asyncio.wait_for(self._released.wait(), min(left, 1.0))
            except TimeoutError:
                pass


# --- the request side: the route of each model request, its pin, its version header ----------------------------
def parse_pin(value: str) -> int:
    text = value.strip()
    text = text[1:] if text[:1] in ("v", "V") else text
    if not text.isdigit() or len(text) > 9:
        raise BadRequest(f"{PIN_HEADER} must be a version such as 12 or v12, not {value[:40]!r}", param=PIN_HEADER)
    return int(text)


def _wants_candidate(request: web.Request) -> bool:
    """The system's own keys (the feed, the probe: `common.record_key`, `common.admin_token`) get the candidate; so
    does a key with the 'record' scope that sends `X-SLCA-Role: candidate`."""
    from serve.auth import bearer, has_scope
    from serve.keys import COMMON

    common, key = request.app[COMMON], bearer(request)
    own = [k for k in (common.record_key, common.admin_token) if k]
    if key and any(hmac.compare_digest(key.encode("utf-8", "surrogatepass"), k.encode()) for k in own):
        return True
    asked = request.headers.get(ROLE_HEADER)
    if asked is None:
        return False
    if asked.strip().lower() != "candidate":
        raise BadRequest(f"{ROLE_HEADER} may only be 'candidate'", param=ROLE_HEADER)
    if not has_scope(request, "record"):
        raise Forbidden(f"{ROLE_HEADER}: candidate needs a key with the 'record' scope")
    return True


def router_of(app: web.Application) -> VersionRouter | None:
    from serve.keys import ENGINE

    engine = app.get(ENGINE)
    return engine if isinstance(engine, VersionRouter) else None


@web.middleware
async def version_middleware(request: web.Request, handler) -> web.StreamResponse:
    router = router_of(request.app)
    if router is None or request.path not in MODEL_PATHS:
        return await handler(request)
    route = Route(kind="candidate" if _wants_candidate(request) else "caller")
    if (pin := request.headers.get(PIN_HEADER)) is not None:
        pin_request(router, route, parse_pin(pin))
    request[ROUTE_KEY] = route
    token = ROUTE.set(route)
    try:
        return await handler(request)
    finally:
        ROUTE.reset(token)
        router.finish(route)


def pin_request(router: VersionRouter, route: Route, version: int) -> None:
    """Pin `route` to `version`; 404 at once when this server cannot find it (nothing is loaded then)."""
    if router._holding(version) is None and not router.store.exists(version):
        raise VersionNotFound(
            f"weight version v{version} does not exist on this server (never published, or pruned)", param="model"
        )
    route.pin_to(version)


def model_pin(app: web.Application, model: str | None) -> str | None:
    """`model` without a `@v<N>` pin (the pin goes on the current request's route); unchanged when it has none.
    Called by the model check (`serve.http_util.check_model`), off the event loop with the request's context."""
    match = PIN.match(model) if model else None
    router, route = router_of(app), ROUTE.get()
    if match is None or router is None or route is None:
        return model
    pin_request(router, route, int(match.group("version")))
    return match.group("name")


async def version_header(request: web.Request, response: web.StreamResponse) -> None:
    """`on_response_prepare`: name the version that answered (or, for a stream, the one that will)."""
    route = request.get(ROUTE_KEY)
    router = router_of(request.app)
    if route is None or router is None or response.status >= 400:
        return
    version = route.version if route.version is not None else router.peek(route)
    response.headers[VERSION_HEADER] = str(version)
