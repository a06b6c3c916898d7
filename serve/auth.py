"""API keys and their scopes: who may serve, record training data, or administer (README "API keys").

Keys come from `common.api_keys` (key → scopes), `common.record_key` (scope 'record': the task feed's key) and
`common.admin_token` (scope 'admin'), sent as `Authorization: Bearer <key>`. Scopes nest: admin ⊇ record ⊇ serve.

- Serving is open: a request without a key is answered.
- Recording a trajectory (agent runs with `record: true`, the sampled share of chat traffic) needs 'record'.
  Without it the request is still served; nothing is recorded and the agent-run response says why. This is
  what keeps anyone who can reach the API from writing training data with a `ground_truth` of their choosing.
  A `ground_truth` sent without the scope is therefore not an error (no 403): it reaches no training data,
  only the caller's own response, so evaluation clients (`record: false`) need no key.
- Admin endpoints need 'admin': 401 without a valid key, 403 with a key that lacks the scope.
"""

from __future__ import annotations

import hmac

from aiohttp import web

from serve.errors import Forbidden, Unauthorized
from serve.keys import COMMON
from slca.config import CommonSettings, Scope

_RANK: dict[str, int] = {"serve": 0, "record": 1, "admin": 2}

RECORD_REFUSED = "not recorded: recording needs an API key with the 'record' scope (Authorization: Bearer <key>)"


def configured_keys(common: CommonSettings) -> list[tuple[str, frozenset[str]]]:
    """Every configured key with its scopes (a key named twice gets the union)."""
    keys = [(key, frozenset(scopes)) for key, scopes in common.api_keys.items()]
    if common.record_key:
        keys.append((common.record_key, frozenset({"record"})))
    if common.admin_token:
        keys.append((common.admin_token, frozenset({"admin"})))
    return keys


def bearer(request: web.Request) -> str | None:
    given = request.headers.get("Authorization", "")
    if given[:7].lower() != "bearer ":
        return None
    return given[7:].strip() or None


def granted(common: CommonSettings, key: str | None) -> frozenset[str] | None:
    """The scopes `key` holds (nested scopes included); None when it is no configured key."""
    if key is None:
        return None
    given = _bytes(key)
    scopes: set[str] | None = None
    # every key is compared (no early exit), each in constant time: timing tells nothing about which matched
    for candidate, its_scopes in configured_keys(common):
        if hmac.compare_digest(given, _bytes(candidate)):
            scopes = (scopes or set()) | its_scopes
    if scopes is None:
        return None
    top = max(_RANK[s] for s in scopes) if scopes else -1
    return frozenset(s for s, rank in _RANK.items() if rank <= top)


def _bytes(key: str) -> bytes:
    """The key as bytes, for any str. aiohttp decodes headers as UTF-8 with surrogateescape, so a header that is
    not UTF-8 (`Bearer \\xff`) arrives holding a lone surrogate, which a plain `encode()` refuses (that was a 500);
    surrogatepass encodes every surrogate, so such a key simply matches no configured key (401)."""
    return key.encode("utf-8", "surrogatepass")


def has_scope(request: web.Request, scope: Scope) -> bool:
    return scope in (granted(request.app[COMMON], bearer(request)) or ())


def require_scope(request: web.Request, scope: Scope) -> None:
    """Raise Unauthorized (no or unknown key) or Forbidden (key without `scope`, or no such key configured)."""
    common = request.app[COMMON]
    if not any(_RANK[s] >= _RANK[scope] for _, scopes in configured_keys(common) for s in scopes):
        raise Forbidden(
            f"these endpoints are disabled: no key with the {scope!r} scope is configured "
            "(common.api_keys or common.admin_token)"
        )
    scopes = granted(common, bearer(request))
    if scopes is None:
        raise Unauthorized(f"a valid 'Authorization: Bearer <key>' header with the {scope!r} scope is required")
    if scope not in scopes:
        raise Forbidden(f"this API key lacks the {scope!r} scope")


def record_refusal(request: web.Request) -> str | None:
    """None when the request may record training data; else the reason it may not (to tell the client)."""
    return None if has_scope(request, "record") else RECORD_REFUSED


@web.middleware
async def serve_scope_middleware(request: web.Request, handler):
    """With `common.serve_requires_key`, the model endpoints (`/v1/*`) need the 'serve' scope; operational
    endpoints stay open so that probes and scrapers need no key."""
    if request.app[COMMON].serve_requires_key and request.path.startswith("/v1/"):
        require_scope(request, "serve")
    return await handler(request)
