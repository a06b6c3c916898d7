"""`api/stats` needs a configured key when the deployment has keys; the page and its files stay open; the
mount passes serve's keys."""

import asyncio

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from ops.observe.dashboard import make_app
from ops.observe.dashboard.app import KEYS
from ops.mounts import dashboard
from slca.config import CommonSettings


def statuses(app: web.Application, *requests: tuple[str, dict]) -> list[int]:
    async def main():
        root = web.Application()
        root.add_subapp("/dashboard/", app)
        async with TestClient(TestServer(root)) as client:
            return [(await client.get(path, headers=headers)).status for path, headers in requests]

    return asyncio.run(main())


def test_stats_need_a_configured_key(redis_url):
    app = make_app(redis_url, keys=["adm-key", "api-key"])
    stats = "/dashboard/api/stats"
    got = statuses(
        app,
        (stats, {}),
        (stats, {"Authorization": "Bearer wrong"}),
        (stats, {"Authorization": "Bearer adm-key"}),
        (stats + "?limit=5", {"Authorization": "Bearer api-key"}),
        ("/dashboard/", {}),
    )
    assert got == [401, 401, 200, 200, 200]


def test_stats_are_open_without_keys(redis_url):
    assert statuses(make_app(redis_url), ("/dashboard/api/stats", {})) == [200]


def test_the_mount_passes_serves_keys():
    common = CommonSettings(admin_token="adm", api_keys={"k1": ["serve"]})
    _, app = dashboard(common)
    assert set(app[KEYS]) == {b"adm", b"k1"}
    assert dashboard(CommonSettings())[1][KEYS] == ()
