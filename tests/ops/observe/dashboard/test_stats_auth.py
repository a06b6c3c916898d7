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


def test_the_page_signs_in_with_a_header_for_an_httponly_samesite_cookie_never_a_url(redis_url):
    """The key once in an Authorization header (`api/login`), then an HttpOnly SameSite=Strict cookie that is not
    the key: no token in any URL (URLs end up in logs and browser history)."""
    from pathlib import Path

    import ops.observe.dashboard as dashboard_pkg

    app = make_app(redis_url, keys=["adm-key"])

    async def main():
        root = web.Application()
        root.add_subapp("/dashboard/", app)
        async with TestClient(TestServer(root)) as client:
            wrong = await client.post("/dashboard/api/login", headers={"Authorization": "Bearer nope"})
            assert wrong.status == 401 and "Set-Cookie" not in wrong.headers
            ok = await client.post("/dashboard/api/login", headers={"Authorization": "Bearer adm-key"})
            assert ok.status == 204, await ok.text()
            cookie = ok.headers["Set-Cookie"]
            attributes = {a.strip().split("=")[0].lower() for a in cookie.split(";")}
            assert {"httponly", "samesite", "path"} <= attributes and "samesite=strict" in cookie.lower()
            assert "adm-key" not in cookie and "Path=/dashboard/" in cookie
            stats = await client.get("/dashboard/api/stats")  # the client jar sends the cookie back
            assert stats.status == 200
            out = await client.post("/dashboard/api/logout")
            assert out.status == 204
            client.session.cookie_jar.clear()
            return (await client.get("/dashboard/api/stats")).status

    assert asyncio.run(main()) == 401
    script = (Path(dashboard_pkg.__file__).parent / "static" / "dashboard.js").read_text()
    assert "token=" not in script and "sessionStorage" not in script  # the page reads no key from its URL
