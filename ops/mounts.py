"""What ops plugs into the API process (`slca.serve.subapps` entry points, mounted by `slca serve`)."""

from __future__ import annotations

from slca.config import CommonSettings


def dashboard(common: CommonSettings):
    """The built-in dashboard at `/dashboard/`, reading the stats of this deployment's Redis and prefix."""
    from ops.observe.dashboard import make_app

    keys = [common.admin_token or "", *common.api_keys]  # any configured key may read the stats
    return "/dashboard/", make_app(common.redis_or_default(), common.stream_prefix, keys)
