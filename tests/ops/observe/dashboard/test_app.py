"""The sub-app over HTTP: the stats JSON (with the chart series, the held-out probe's among them), its 400/503
answers, the static files."""

import asyncio
import re
from pathlib import Path

import pytest
import redis
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from multidict import CIMultiDict

from ops.observe.dashboard import make_app
from slca.contracts import Streams
from slca.redis_server import free_port
from tests.ops.observe.dashboard.system import probe_rounds, write_probe_rounds

STATIC = Path(__file__).resolve().parents[4] / "ops" / "observe" / "dashboard" / "static"


def call(redis_url: str, *requests: tuple[str, dict]) -> list[tuple[int, dict, bytes]]:
    """GET each (path, headers) on the sub-app mounted at /dashboard/ as serve mounts it."""

    async def main():
        root = web.Application()
        root.add_subapp("/dashboard/", make_app(redis_url))
        async with TestClient(TestServer(root)) as client:
            out = []
            for path, headers in requests:
                resp = await client.get(path, headers=headers)
                out.append((resp.status, CIMultiDict(resp.headers), await resp.read()))
            return out

    return asyncio.run(main())


def test_stats_json_carries_snapshot_and_charts(redis_url, history):
    import json

    ((status, headers, body),) = call(redis_url, ("/dashboard/api/stats?limit=1000", {}))
    data = json.loads(body)
    assert status == 200 and headers["Cache-Control"] == "no-store"
    assert data["published_version"] == history.versions and len(data["rewards"]) == history.trajectories
    charts = data["charts"]
    by_version = charts["reward_by_version"]
    assert by_version["x"] == [float(v) for v in range(history.versions)]
    assert sum(by_version["extra"]["n"]) == history.trajectories
    # later versions sample better episodes (the history's design): the curve that matters rises
    assert by_version["ys"]["execution"][-1] > by_version["ys"]["execution"][0] + 0.3
    zero_var = charts["zero_variance"]
    assert set(zero_var["ys"]) == {"exec", "pref"} and len(zero_var["x"]) == history.learner_steps
    assert set(charts["staleness"]["ys"]["staleness"]) == {0.0, 1.0}  # a group per version lags one swap
    for name, series in charts.items():
        assert all(len(col) == len(series["x"]) for col in series["ys"].values()), name
        if name in ("gate", "scored_success"):  # no version roles in this history: test_versions_stats.py
            continue
        if name not in ("reward_by_version", "probe"):  # version charts; the rest are on time
            assert series["x"] == sorted(series["x"]) and history.start - 60 <= series["x"][0] <= history.end, name


def test_stats_carry_probe_rounds_as_the_probe_publishes_them(redis_url):
    import json

    from ops.observe.probe_rounds import PROBE_SUFFIX
    from ops.observe.redis_view import read_rounds

    ((_, _, before),) = call(redis_url, ("/dashboard/api/stats", {}))
    assert json.loads(before)["probe"] == [] and json.loads(before)["charts"]["probe"]["x"] == []
    written = write_probe_rounds(redis_url, probe_rounds(1000.0))
    ((status, _, body),) = call(redis_url, ("/dashboard/api/stats", {}))
    data = json.loads(body)
    # the dashboard's async read returns what `slca status` reads with read_rounds, oldest first
    sync_read = read_rounds(redis.Redis.from_url(redis_url), Streams().stats(PROBE_SUFFIX))
    assert status == 200 and data["probe"] == sync_read == written
    chart = data["charts"]["probe"]
    assert chart["x"] == [0.0, 2.0, 4.0] and chart["ys"]["held-out success"] == pytest.approx([4 / 12, 7 / 12, 10 / 12])
    assert chart["extra"]["version_min"] == [0, 2, 3] and chart["extra"]["version_max"] == [1, 2, 4]
    headline = chart["meta"]["vs_v0"]["held_out"]
    assert chart["meta"]["baseline_version"] == 0 and headline["diff"] == pytest.approx(0.5) and headline["b_only"] == 6


def test_stats_limit_and_bad_limit(redis_url, history):
    import json

    (ok, _, ok_body), (bad, _, bad_body) = call(
        redis_url, ("/dashboard/api/stats?limit=5", {}), ("/dashboard/api/stats?limit=x", {})
    )
    rows = json.loads(ok_body)["rewards"]
    assert ok == 200 and len(rows) == 5 and [r["ts"] for r in rows] == sorted(r["ts"] for r in rows)  # oldest first
    assert bad == 400 and "limit" in json.loads(bad_body)["error"]


def test_stats_without_redis_is_503():
    import json

    ((status, _, body),) = call(f"redis://127.0.0.1:{free_port()}/0", ("/dashboard/api/stats", {}))
    assert status == 503 and "redis unavailable" in json.loads(body)["error"]


def test_queue_backlog_in_stats(redis_url):
    import json

    client = redis.Redis.from_url(redis_url)
    for i in range(7):
        client.xadd(Streams().trajectories, {"data": b"x", "id": str(i)})
    ((_, _, body),) = call(redis_url, ("/dashboard/api/stats", {}))
    assert {q["stream"]: q["backlog"] for q in json.loads(body)["queues"]}["slca:trajectories"] == 7


def test_static_files_types_and_caching(redis_url):
    paths = [
        "/dashboard/",
        "/dashboard/static/dashboard.js",
        "/dashboard/static/dashboard.css",
        "/dashboard/static/vendor/uplot/uPlot.iife.min.js",
        "/dashboard/static/vendor/uplot/uPlot.min.css",
        "/dashboard/static/vendor/uplot/LICENSE",
        "/dashboard/static/index.html",
        "/dashboard/static/../app.py",
    ]
    answers = call(redis_url, *[(p, {}) for p in paths])
    (page, js, css, lib, lib_css, lic, index, escape) = answers
    assert page[0] == 200 and page[1]["Content-Type"].startswith("text/html") and page[1]["Cache-Control"] == "no-cache"
    assert js[1]["Content-Type"].startswith("text/javascript") and css[1]["Content-Type"].startswith("text/css")
    assert lib[0] == 200 and lib[1]["Content-Type"].startswith("text/javascript")
    assert "max-age=86400" in lib[1]["Cache-Control"]
    assert lib[2] == (STATIC / "vendor/uplot/uPlot.iife.min.js").read_bytes() and lib_css[0] == 200
    assert lic[0] == 404 and index[0] == 404 and escape[0] == 404  # only web files, only under static/
    ((again, _, again_body),) = call(
        redis_url, ("/dashboard/static/vendor/uplot/uPlot.iife.min.js", {"If-None-Match": lib[1]["ETag"]})
    )
    assert again == 304 and again_body == b""


def test_page_loads_everything_from_the_sub_app():
    """No CDN: every URL the page and our script load is relative (served by the sub-app)."""
    page = (STATIC / "index.html").read_text()
    refs = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert refs and all(not re.match(r"^[a-z]+:|^//|^/", r) for r in refs), refs
    assert all((STATIC / r.removeprefix("static/")).is_file() for r in refs), refs
    for path in STATIC.rglob("*"):
        if path.suffix in {".html", ".js", ".css"} and "vendor" not in path.parts:
            assert not re.search(r"https?://", path.read_text()), path
    vendor = STATIC / "vendor" / "uplot"
    assert (vendor / "LICENSE").is_file() and "MIT" in (vendor / "LICENSE").read_text()
    assert re.search(r"uPlot \d+\.\d+\.\d+", (vendor / "VERSION").read_text())
