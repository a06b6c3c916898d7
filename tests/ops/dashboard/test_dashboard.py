"""The dashboard in headless Chromium: with stats in Redis every chart draws its series; without, none does."""

import asyncio
import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import redis
from aiohttp import web

from ops.dashboard import make_app
from slca.contracts import Streams
from slca.contracts.queues import STATS_LEARNER, STATS_REWARDS
from slca.redis_server import free_port

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian package chromium not installed")

CHARTS = {  # canvas id → series colours that must be drawn
    "chart-reward": ["#1f77b4", "#ff7f0e"],
    "chart-turns": ["#2ca02c"],
    "chart-version": ["#9467bd", "#8c564b"],
    "chart-queue": ["#d62728"],
    "chart-throughput": ["#e377c2"],
    "chart-learner": ["#bcbd22"],
}


def fill_stats(client: redis.Redis, prefix: str = "slca", n: int = 120) -> None:
    streams = Streams(prefix)
    t0 = time.time() - 600
    for i in range(n):
        client.xadd(streams.stats(STATS_REWARDS), {"exec": 0.2 + 0.6 * i / n, "pref": 0.5 + 0.3 * ((i % 7) / 7),
                    "tool_turns": 1 + i % 3, "policy_version": i // 30, "task_id": f"t{i % 9}", "ts": t0 + 5 * i})
    for step in range(1, 5):
        client.xadd(streams.stats(STATS_LEARNER), {"step": step, "version": step, "loss": 0.5 / step,
                    "kl": 0.01 * step, "clip_frac": 0.1, "ts": t0 + 150 * step})
    client.set(streams.weights_latest, json.dumps({"version": 4, "path": "/w/v4"}))
    for i in range(7):
        client.xadd(streams.trajectories, {"data": b"x", "id": str(i)})


class DashboardServer:
    """The sub-app mounted at /dashboard/ as serve mounts it, in a thread with its own event loop."""

    def __init__(self, redis_url: str):
        self.port = free_port()
        self.redis_url = redis_url
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        asyncio.set_event_loop(self.loop)
        root = web.Application()
        root.add_subapp("/dashboard/", make_app(self.redis_url))
        self.runner = web.AppRunner(root)
        self.loop.run_until_complete(self.runner.setup())
        self.loop.run_until_complete(web.TCPSite(self.runner, "127.0.0.1", self.port).start())
        self.ready.set()
        self.loop.run_forever()

    def __enter__(self):
        self.thread.start()
        assert self.ready.wait(10)
        return f"http://127.0.0.1:{self.port}/dashboard/"

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def chromium(url: str, tmp: Path, *mode: str) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
             "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={tmp}",
             "--force-device-scale-factor=1", "--hide-scrollbars", "--virtual-time-budget=4000"]  # fmt: skip
    tmp.mkdir(parents=True, exist_ok=True)
    return subprocess.run([CHROMIUM, *flags, *mode, url], capture_output=True, timeout=90, cwd=tmp)


def screenshot(url: str, tmp: Path):
    from matplotlib.image import imread

    png = tmp / "shot.png"
    proc = chromium(url, tmp / "profile-shot", f"--screenshot={png}", "--window-size=1300,900")
    assert png.exists(), proc.stderr.decode()[-2000:]
    return (imread(png)[:, :, :3] * 255).round().astype(int)


def count_colour(pixels, box, hex_colour: str, tol: int = 30) -> int:
    x, y, w, h = box
    region = pixels[y : y + h, x : x + w]
    rgb = [int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)]
    return int((abs(region - rgb).max(axis=2) <= tol).sum())


# layout from index.html: header 48 px + 1 px border, grid padding 16, 600×240 canvases (+1 px border),
# figcaption ≈ 22 px above each canvas, gap 16
def chart_box(index: int, caption_px: int) -> tuple[int, int, int, int]:
    col, row = index % 2, index // 2
    x = 16 + col * (602 + 16) + 1
    y = 49 + 16 + row * (caption_px + 242 + 16) + caption_px + 1
    return (x, y, 600, 240)


def _boxes(pixels) -> dict[str, tuple]:
    """Locate each canvas by its 1-px border: the first canvas's top border row is found by scanning."""
    grey = (abs(pixels - [229, 231, 235]).max(axis=2) <= 3)
    col = grey[:, 16]  # left border column of the first canvas column
    rows = [y for y in range(len(col)) if col[y]]
    assert rows, "canvas border not found"
    caption_px = rows[0] - (49 + 16)
    return {name: chart_box(i, caption_px) for i, name in enumerate(CHARTS)}


def test_charts_render_with_data(redis_url, tmp_path):
    fill_stats(redis.Redis.from_url(redis_url))
    with DashboardServer(redis_url) as url:
        pixels = screenshot(url, tmp_path)
        dom = chromium(url, tmp_path / "profile-dom", "--dump-dom").stdout.decode()
    boxes = _boxes(pixels)
    for name, colours in CHARTS.items():
        for colour in colours:
            assert count_colour(pixels, boxes[name], colour) > 40, f"{name}: no {colour} pixels drawn"
    assert 'data-fetches="' in dom and 'id="published">v4<' in dom and 'id="scored">120<' in dom


def test_charts_stay_empty_without_data(redis_url, tmp_path):
    with DashboardServer(redis_url) as url:
        pixels = screenshot(url, tmp_path)
    boxes = _boxes(pixels)
    for name, colours in CHARTS.items():
        if name == "chart-queue":
            continue  # queue depth 0 is data: it is drawn
        for colour in colours:
            assert count_colour(pixels, boxes[name], colour) == 0, f"{name}: {colour} drawn without data"


def test_stats_endpoint(redis_url):
    fill_stats(redis.Redis.from_url(redis_url), n=10)

    async def main():
        from aiohttp.test_utils import TestClient, TestServer

        root = web.Application()
        root.add_subapp("/dashboard/", make_app(redis_url))
        async with TestClient(TestServer(root)) as client:
            ok = await client.get("/dashboard/api/stats?limit=5")
            bad = await client.get("/dashboard/api/stats?limit=x")
            page = await client.get("/dashboard/")
            return ok.status, await ok.json(), bad.status, await bad.json(), page.status, await page.text()

    status, data, bad_status, bad, page_status, page = asyncio.run(main())
    assert status == 200 and len(data["rewards"]) == 5 and data["published_version"] == 4
    assert [r["exec"] for r in data["rewards"]] == sorted(r["exec"] for r in data["rewards"])  # oldest first
    assert {q["stream"]: q["backlog"] for q in data["queues"]}["slca:trajectories"] == 7
    assert bad_status == 400 and "limit" in bad["error"]
    assert page_status == 200 and "<canvas" in page and "http" not in page.split("<script>")[1].split("statsUrl")[0]
