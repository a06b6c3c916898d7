"""Requests from web pages: any page a browser shows can send requests to a local API (fetch, forms). A request
that carries a foreign `Origin` is refused (403) unless `serve.allowed_origins` lists it.

Allowed without listing: no `Origin` at all (every non-browser client) and same-origin requests to a host named
by an IP literal or `localhost`. A same-origin request to any other host name is refused too, because that is
what DNS rebinding looks like (a page on attacker.example whose name now resolves to 127.0.0.1); list the
origin when the API really is used from pages under that name.
"""

from __future__ import annotations

import ipaddress
from typing import Collection
from urllib.parse import urlsplit

from aiohttp import web

from serve.errors import Forbidden
from serve.keys import SETTINGS


def origin_refusal(origin: str | None, host: str | None, allowed: Collection[str]) -> str | None:
    """Why a request with `Origin: origin` to `Host: host` is refused, or None when it is let through."""
    if origin is None:
        return None
    if origin.rstrip("/") in allowed:
        return None
    try:
        parts = urlsplit(origin)
        same = parts.scheme in ("http", "https") and parts.netloc.lower() == (host or "").lower()
        local = same and _local_name(parts.hostname or "")
    except ValueError:  # a malformed Origin (bad port, brackets) is foreign
        local = False
    if local:
        return None
    return (
        f"requests from the web origin {origin[:100]!r} are not allowed (list it in serve.allowed_origins to allow it)"
    )


def _local_name(hostname: str) -> bool:
    if hostname == "localhost":
        return True
    try:
        ipaddress.ip_address(hostname)
    except ValueError:
        return False
    return True


@web.middleware
async def origin_middleware(request: web.Request, handler):
    reason = origin_refusal(
        request.headers.get("Origin"), request.headers.get("Host"), request.config_dict[SETTINGS].allowed_origins
    )
    if reason:
        raise Forbidden(reason, code="origin_not_allowed")
    return await handler(request)
