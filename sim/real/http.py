"""Real HTTP tools: JSON POST/GET to configured endpoints, only to allowlisted hosts, bounded in time and size."""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from sim.real.registry import RealPack, RealTool, ToolError

log = logging.getLogger(__name__)


def allowed(url: str, allowlist: list[str]) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and (parts.hostname or "") in set(allowlist)


def http_tool(name: str, spec: dict[str, Any], timeout_s: float, max_bytes: int) -> RealTool:
    url, method = spec["url"], spec.get("method", "POST").upper()

    async def run(arguments: dict[str, Any], _state: Any) -> Any:
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        kwargs = {"json": arguments} if method != "GET" else {"params": {k: str(v) for k, v in arguments.items()}}
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with session.request(method, url, allow_redirects=False, **kwargs) as resp:
                    body = await resp.content.read(max_bytes + 1)
                    if len(body) > max_bytes:
                        raise ToolError(f"response larger than {max_bytes} bytes", 502)
                    if resp.status >= 400:
                        raise ToolError(f"upstream answered HTTP {resp.status}", resp.status)
        except aiohttp.ClientError as exc:  # refused connection, reset, bad response: a gateway error
            raise ToolError(f"upstream unreachable: {type(exc).__name__}", 502) from None
        try:
            return json.loads(body)
        except ValueError:
            return body.decode("utf-8", errors="replace")

    params = spec.get("parameters") or {"type": "object", "properties": {}}
    return RealTool(name, spec.get("description", ""), params, run, spec.get("response_schema"), timeout_s=timeout_s)


def http_pack(tools: dict[str, dict[str, Any]], allowlist: list[str], timeout_s: float, max_bytes: int) -> RealPack:
    """Configured HTTP tools whose host is allowlisted; the others are left out (calls to them are refused)."""
    pack = RealPack("http")
    for name, spec in tools.items():
        if not allowed(spec.get("url", ""), allowlist):
            log.warning("real HTTP tool %s refused: host of %r not in sim.http_allowlist", name, spec.get("url"))
            continue
        pack.add(http_tool(name, spec, timeout_s, max_bytes))
    return pack
