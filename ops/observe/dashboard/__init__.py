"""The built-in dashboard: `make_app(redis_url, prefix)` is an aiohttp sub-app (serve mounts it at /dashboard/)."""

from ops.observe.dashboard.app import make_app

__all__ = ["make_app"]
