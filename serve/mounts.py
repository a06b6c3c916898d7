"""Sub-apps other packages plug into the API through the `slca.serve.subapps` entry points (`pyproject.toml`):
each names a callable `(CommonSettings) -> (prefix, aiohttp app)` — ops' dashboard at `/dashboard/` is one.
`slca serve` mounts them (`create_app(subapps=...)`); serve imports none of them by name."""

from __future__ import annotations

import logging
from importlib.metadata import entry_points

from aiohttp import web

from slca.config import CommonSettings

GROUP = "slca.serve.subapps"

log = logging.getLogger(__name__)


def plugged_subapps(common: CommonSettings) -> dict[str, web.Application]:
    """prefix → app of every installed plug-in; one whose package is not installed is skipped (the API works
    without it), any other failure is raised."""
    out: dict[str, web.Application] = {}
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            factory = ep.load()
        except ModuleNotFoundError as exc:
            log.info("sub-app %s not mounted: %s", ep.name, exc)
            continue
        prefix, app = factory(common)
        if prefix in out:
            raise ValueError(f"two sub-apps want {prefix!r}: {ep.name} and another {GROUP} entry point")
        out[prefix] = app
    return out
