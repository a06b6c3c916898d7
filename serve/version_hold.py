"""Holding the candidate at one version while it is judged (docs/design.md#versions).

An engine that holds one model per process (vLLM) answers a pin only of the version it holds; the candidate's engine
follows the learner, so an evaluation pinned to the candidate — the gate's 96 greedy agent runs, minutes long — was
refused with 409 as soon as the learner's next version was swapped in (a 60-minute `make run` with
`ops.candidate_replica`: "96 gate requests failed", the only decision of the run). A hold keeps the follower's swaps
waiting while the candidate is judged:

- `POST /admin/hold` ('admin' scope) `{"version": N | null, "seconds": S}`: hold the candidate's engine at the
  version it serves now (`null`), or at N when it still serves N (else 409 `candidate_moved`, naming the version it
  serves); at most `serve.hold_max_s` seconds, so a judge that dies never stops the follower for long. Answers
  `{"held": N, "seconds": S}`; a new hold replaces the one before.
- `DELETE /admin/hold`: release it at once (the judging ended). The follower then loads the newest announcement.

Meanwhile every request of the candidate's role is answered by the held version (the learner's staleness bound drops
the groups that grow too old, so learning waits rather than training on what it should not); callers' promoted
version is not touched, and a promotion is not held.
"""

from __future__ import annotations

from aiohttp import web

from serve.auth import require_scope
from serve.errors import BadRequest
from serve.http_util import read_json
from serve.keys import ENGINE


def _router(request: web.Request):
    router = request.app[ENGINE]
    if getattr(router, "hold", None) is None:
        raise BadRequest("this server has no version roles: nothing to hold")
    return router


async def admin_hold(request: web.Request) -> web.Response:
    require_scope(request, "admin")
    router = _router(request)
    body = await read_json(request)
    if not isinstance(body, dict):
        raise BadRequest('body must be {"version": N | null, "seconds": S}')
    version, seconds = body.get("version"), body.get("seconds")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
        raise BadRequest("version must be an integer >= 0, or null (the version served now)", param="version")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < 1e9:
        raise BadRequest("seconds must be a number > 0", param="seconds")
    held, granted = await router.hold_candidate(version, float(seconds))
    return web.json_response({"held": held, "seconds": round(granted, 3)})


async def admin_release(request: web.Request) -> web.Response:
    require_scope(request, "admin")
    _router(request).hold.release()
    return web.json_response({"held": None})


def install(app: web.Application) -> None:
    app.router.add_post("/admin/hold", admin_hold)
    app.router.add_delete("/admin/hold", admin_release)
