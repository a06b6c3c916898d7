"""The versions' endpoints and their place in the app (docs/design.md#versions).

- `POST /admin/promote` ('admin' scope): `{"version": N}` promotes vN (an operator: `slca promote --to vN`),
  `{"rollback": true}` rolls back to the last earlier promoted version (`slca promote --rollback`), and
  `{"decision": GateDecision}` is the gate's word: every decision is counted, one whose outcome is `promote`
  promotes its candidate (never one rolled back before), and `{"rollback": SuccessRollback}` is the gate's
  scored-success guard: an automatic rollback (`auto-rollback`) of the version it judged, refused (409
  `promoted_changed`) when another one was promoted since. A version that does not exist, was pruned or fails
  verification: 404/422 and nothing changes. Answers the promotion record.
- `GET /v1/versions`: the promoted and candidate versions, this replica's role (`serve.role`: a "promoted" replica
  reports as candidate the version it serves the system's keys, its promoted one), the record (history, rolled back),
  what each engine holds and the live signals of the promoted version.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import AsyncIterator

from aiohttp import web

from serve.auth import require_scope
from serve.errors import BadRequest
from serve.http_util import read_json
from serve.keys import BACKGROUND, COMMON, ENGINE, METRICS, REDIS, SETTINGS, STREAMS, WEIGHTS
from serve.promotion import PromotionController, PromotionRecord, RECORD_FILE
from serve.version_store import FETCHED_DIR, RemoteVersions, VersionStore
from serve.versions import VersionRouter, version_header
from slca.contracts import ContractError
from slca.contracts.versions import GateDecision, SuccessRollback, promotion_key
from slca.contracts.wire import validate
from slca.weights import ManifestPolicy, fetches_by_number, for_server

log = logging.getLogger(__name__)

PROMOTION = web.AppKey("promotion", PromotionController)


def store_of(app: web.Application) -> VersionStore:
    """Where this server finds versions by number (the learner's weights, the kept copies, the follower's mirror),
    and, with `weights.url` and a transport that fetches over HTTP, where it fetches the others from."""
    weights = app[WEIGHTS]
    policy = ManifestPolicy.from_settings(weights)
    mirror = mirror_dir_of(app)
    return VersionStore(Path(app[COMMON].data_dir), policy, mirror, remote_versions(app, mirror / FETCHED_DIR))


def remote_versions(app: web.Application, into: Path) -> RemoteVersions | None:
    """The learner's weight server (`weights.url`) through `weights.transport`, built as the follower's is, fetching
    into `into`; None when there is no URL or the transport reads the disk only (`disk`)."""
    weights = app[WEIGHTS]
    transport = None
    if weights.url:
        transport = for_server(
            weights.transport,
            into,
            weights.key,
            weights.fetch_timeout_s,
            weights.fetch_max_bytes,
            observer=app[METRICS].observe_fetch,  # slca_weights_fetch_*, as the follower's fetches
        )
    if transport is None or not fetches_by_number(transport):
        if app[SETTINGS].role == "promoted":
            log.info(
                "serve.role=promoted: versions are found on this machine's disk only (weights.url and "
                "weights.transport=http or auto fetch the others from the learner)"
            )
        return None
    return RemoteVersions(transport, weights.url, into)


def mirror_dir_of(app: web.Application) -> Path:
    """Where this server keeps fetched versions (its weight follower's, and where the store finds them):
    `weights.mirror_dir`, else one per port under the data dir."""
    mirror = app[WEIGHTS].mirror_dir or Path(app[COMMON].data_dir) / "serve-weights" / str(app[SETTINGS].port)
    return Path(mirror)


def route_versions(app: web.Application, engine, factory) -> VersionRouter:
    """The engine the handlers hold: `engine` (the candidate's) behind the version router."""
    return VersionRouter(engine, factory, app[SETTINGS], store_of(app))


def install(app: web.Application) -> None:
    """The endpoints and the version header (the middleware is in the app's list, the context in its order)."""
    app.router.add_post("/admin/promote", admin_promote)
    app.router.add_get("/v1/versions", versions)
    app.on_response_prepare.append(version_header)


async def promotion_ctx(app: web.Application) -> AsyncIterator[None]:
    """After Redis, before the weight follower: the promoted version of the record is loaded before any swap."""
    router = app[ENGINE]
    if not isinstance(router, VersionRouter):
        yield
        return
    record = PromotionRecord(app[REDIS], promotion_key(app[STREAMS]), Path(app[COMMON].data_dir) / RECORD_FILE)
    controller = PromotionController(router, record, router.store, app[METRICS], app[SETTINGS])
    await controller.start()
    app[PROMOTION] = controller
    app[METRICS].promoted_version.set_function(lambda: router.promoted)
    app[METRICS].candidate_version.set_function(lambda: router.candidate)
    if router.role == "promoted":  # its engine moves on promotions, which the weight swapper never sees
        app[METRICS].policy_version.set_function(lambda: router.primary.version)
    task = asyncio.create_task(controller.follow(), name="promotion-follower")
    app[BACKGROUND].append(task)
    try:
        yield
    finally:
        task.cancel()
        await router.close_others()


async def admin_promote(request: web.Request) -> web.Response:
    require_scope(request, "admin")
    controller = request.app.get(PROMOTION)
    if controller is None:
        raise BadRequest("this server has no version roles (no promotion record)")
    body = await read_json(request)
    if not isinstance(body, dict):
        raise BadRequest('body must be {"version": N}, {"rollback": true | {...}} or {"decision": {...}}')
    if body.get("rollback") is True:
        state = await controller.roll_back("rollback")
    elif isinstance(body.get("rollback"), dict):
        try:
            verdict = validate(SuccessRollback, body["rollback"])
        except ContractError as exc:
            raise BadRequest(f"rollback: {exc}", param="rollback") from None
        log.error("the promoted v%s lost success on scored traffic (%s): rolling back", verdict.version, verdict.why)
        state = await controller.roll_back("auto-rollback", judged=verdict.version)
    elif isinstance(body.get("decision"), dict):
        try:
            decision = validate(GateDecision, body["decision"])
        except ContractError as exc:
            raise BadRequest(f"decision: {exc}", param="decision") from None
        if decision.outcome == "promote":
            state = await controller.promote(decision.candidate, "gate")
        else:
            state = controller.state
        controller.record_decision(decision)
    elif isinstance(body.get("version"), int) and not isinstance(body["version"], bool) and body["version"] >= 0:
        state = await controller.promote(body["version"], "operator")
    else:
        raise BadRequest('body must be {"version": <int >= 0>}, {"rollback": true | {...}} or {"decision": {...}}')
    return web.json_response(state.model_dump(mode="json"))


async def versions(request: web.Request) -> web.Response:
    router = request.app[ENGINE]
    controller = request.app.get(PROMOTION)
    if not isinstance(router, VersionRouter):
        return web.json_response({"promoted": router.version, "candidate": router.version})
    body = {
        "promoted": router.promoted,
        "candidate": router.candidate,
        "engines": router.loaded_versions(),
        "canary_share": request.app[SETTINGS].canary_share,
        "follow_candidate": request.app[SETTINGS].follow_candidate,
        "one_engine": router.one_engine,  # pins of a version the engine moved past are refused (the probe holds)
        "role": router.role,
    }
    hold = getattr(router, "hold", None)
    if hold is not None and hold.active:  # the gate judges this candidate: its swaps wait (serve/version_hold.py)
        body["hold"] = {"version": hold.version, "left_s": round(max(0.0, hold.until - time.monotonic()), 1)}
    if controller is not None:
        body["record"] = controller.state.model_dump(mode="json")
        body["live_signals"] = controller.signals.shares(router.promoted)
    return web.json_response(body)
