"""DNS rebinding: a web page on `attacker.example` whose name the attacker then points at 127.0.0.1 is, to the
browser, same-origin with this server, and may read what its GET endpoints answer (a same-origin GET carries no
`Origin`, so `serve.origin` cannot tell). The browser still sends `Host: attacker.example`, so the read-only
endpoints that tell about this server answer only under a known host name (`serve.allowed_hosts`), else 421.

Always allowed: an IP literal (a page served from an address is not a rebound name), `localhost`, `serve.host`,
this machine's host name and the host of `serve.advertise_url`. The API itself (POST, JSON) is guarded by the
origin check instead, so clients and proxies may reach it under any name.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from aiohttp import web

from serve.errors import MisdirectedRequest
from serve.keys import HOSTS

CHECKED_PATHS = frozenset({"/metrics", "/v1/models", "/openapi.json", "/readyz"})
CHECKED_PREFIXES = ("/dashboard/",)


def allowed_hosts(settings) -> frozenset[str] | None:
    """The host names the checked endpoints answer under (IP literals aside); None: any (`["*"]`)."""
    if "*" in settings.allowed_hosts:
        return None
    names = {"localhost", settings.host, socket.gethostname(), *settings.allowed_hosts}
    if settings.advertise_url:
        names.add(urlsplit(settings.advertise_url).hostname or "")
    return frozenset(_normal(n) for n in names if n)


def _normal(name: str) -> str:
    return name.strip("[]").rstrip(".").lower()


def host_refusal(host: str | None, allowed: frozenset[str] | None) -> str | None:
    """Why a checked endpoint refuses `Host: host`, or None when it answers."""
    if allowed is None or host is None:  # no Host at all: no browser sent it
        return None
    name = _host_name(host)
    if name is not None and (name in allowed or _ip_literal(name)):
        return None
    return (
        f"this server does not answer to the host name {host[:100]!r} here (list it in serve.allowed_hosts to allow "
        "it; an IP address or localhost always works)"
    )


def _host_name(host: str) -> str | None:
    if "@" in host or "/" in host:
        return None
    try:
        name = urlsplit("//" + host).hostname
    except ValueError:  # a bad port, unbalanced brackets
        return None
    return _normal(name) if name else None


def _ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def checked(path: str) -> bool:
    return path in CHECKED_PATHS or path.startswith(CHECKED_PREFIXES)


@web.middleware
async def host_middleware(request: web.Request, handler):
    if checked(request.path):
        reason = host_refusal(request.headers.get("Host"), request.config_dict[HOSTS])
        if reason:
            raise MisdirectedRequest(reason)
    return await handler(request)
