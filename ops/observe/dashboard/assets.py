"""The dashboard's files, read once from the installed package: the page, its script and style, vendored uPlot.

Served from memory with a content type per suffix and an ETag. The page and our own script change with the code,
so browsers revalidate them every time (`no-cache`: a 304 when unchanged); the vendored library only changes with
its VERSION, so it may be cached for a day.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

CONTENT_TYPES = {
    ".html": ("text/html", "utf-8"),
    ".js": ("text/javascript", "utf-8"),
    ".css": ("text/css", "utf-8"),
    ".png": ("image/png", None),
    ".svg": ("image/svg+xml", "utf-8"),
}
"""Only these suffixes are served; LICENSE and VERSION notes ship in the package but are not web files."""
VENDOR_CACHE = "public, max-age=86400"
OWN_CACHE = "no-cache"


@dataclass(frozen=True)
class Asset:
    name: str
    """Path under static/, with '/' separators."""
    body: bytes
    content_type: str
    charset: str | None
    cache_control: str

    @property
    def etag(self) -> str:
        return '"' + hashlib.sha256(self.body).hexdigest()[:16] + '"'


def _walk(folder: Traversable, prefix: str = ""):
    for item in folder.iterdir():
        if item.is_dir():
            yield from _walk(item, f"{prefix}{item.name}/")
        else:
            yield f"{prefix}{item.name}", item


def load_assets() -> dict[str, Asset]:
    """name under static/ → Asset; raises FileNotFoundError when the package was installed without its page."""
    root = resources.files("ops.observe.dashboard").joinpath("static")
    assets = {}
    for name, item in _walk(root):
        suffix = name[name.rfind(".") :] if "." in name else ""
        if suffix not in CONTENT_TYPES:
            continue
        content_type, charset = CONTENT_TYPES[suffix]
        cache = VENDOR_CACHE if name.startswith("vendor/") else OWN_CACHE
        assets[name] = Asset(name, item.read_bytes(), content_type, charset, cache)
    if "index.html" not in assets:
        raise FileNotFoundError("ops/observe/dashboard/static/index.html is missing from the installed package")
    return assets
