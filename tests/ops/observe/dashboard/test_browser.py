"""The dashboard in headless Chromium: with a system's history in Redis every chart is drawn by uPlot, time axes
read as clock times of that history, legends show the latest version; the held-out probe's chart waits for its
first round, then draws the rounds with their 95% interval and the latest one's paired difference from v0; with an
empty Redis every chart says "no data yet". Skipped
where no Chromium is installed (`SLCA_INSTALL_BROWSER=1 scripts/install.sh` adds it).

Set SLCA_DASHBOARD_SCREENSHOT=<path.png> to keep the screenshot of the dashboard with data: that is how
bench/online/dashboard.png is made, from this test's synthetic history (tests/ops/observe/dashboard/system.py), not from
a measured run.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest
from aiohttp import web

from ops.observe.dashboard import make_app
from slca.redis_server import free_port
from tests.ops.observe.dashboard.system import probe_rounds, write_probe_rounds

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (Debian package chromium)")

CHARTS = [
    "chart-reward",
    "chart-probe",
    "chart-turns",
    "chart-zerovar",
    "chart-staleness",
    "chart-queue",
    "chart-versions",
    "chart-throughput",
    "chart-learner",
]
TIME_CHARTS = ["chart-turns", "chart-zerovar", "chart-staleness", "chart-versions", "chart-throughput", "chart-learner"]
EXEC_BLUE, PREF_ORANGE = "#1f77b4", "#ff7f0e"


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

    def __enter__(self) -> str:
        self.thread.start()
        assert self.ready.wait(10)
        return f"http://127.0.0.1:{self.port}/dashboard/"

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def chromium(url: str, profile: Path, *mode: str) -> subprocess.CompletedProcess:
    """One headless run; virtual time lets the page's fetch and first poll finish before the dump."""
    flags = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--force-device-scale-factor=1",
        "--hide-scrollbars",
        "--virtual-time-budget=5000",
    ]
    profile.mkdir(parents=True, exist_ok=True)
    # the page prints local times: pin the browser's zone so the test knows which clock times to expect
    env = {**os.environ, "TZ": "UTC"}
    return subprocess.run([CHROMIUM, *flags, *mode, url], capture_output=True, timeout=120, cwd=profile, env=env)


def dump_dom(url: str, tmp: Path) -> str:
    proc = chromium(url, tmp / "profile-dom", "--dump-dom")
    assert proc.returncode == 0 and "<body" in proc.stdout.decode(), proc.stderr.decode()[-2000:]
    return proc.stdout.decode()


def screenshot(url: str, tmp: Path, size: str = "1330,1990"):
    from matplotlib.image import imread

    png = tmp / "dashboard.png"
    proc = chromium(url, tmp / "profile-shot", f"--screenshot={png}", f"--window-size={size}")
    assert png.exists(), proc.stderr.decode()[-2000:]
    return png, (imread(png)[:, :, :3] * 255).round().astype(int)


def colour_pixels(pixels, hex_colour: str, tol: int = 12) -> int:
    rgb = [int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)]
    return int((abs(pixels - rgb).max(axis=2) <= tol).sum())


def figure(dom: str, chart_id: str) -> str:
    """The <figure> of one chart, as Chromium serialised it (figures do not nest)."""
    match = re.search(rf'<figure[^>]*id="{chart_id}"[^>]*>.*?</figure>', dom, re.S)
    assert match, f"{chart_id} missing from the page"
    return match.group(0)


def clock_times(start: float, end: float) -> set[str]:
    """Every HH:MM (UTC) from a minute before `start` to a minute after `end`."""
    minute = int(start // 60) - 1
    return {datetime.fromtimestamp(m * 60, timezone.utc).strftime("%H:%M") for m in range(minute, int(end // 60) + 2)}


def test_charts_render_a_history(redis_url, history, tmp_path):
    with DashboardServer(redis_url) as url:
        before_probe = dump_dom(url, tmp_path / "before-probe")
        rounds = write_probe_rounds(redis_url, probe_rounds(history.start))
        dom = dump_dom(url, tmp_path)
        png, pixels = screenshot(url, tmp_path)
    # a system whose feed runs no probe: every other chart, and the probe's says it has nothing yet
    assert 'data-rendered="8"' in before_probe, re.search(r"<body[^>]*>", before_probe).group(0)
    waiting = figure(before_probe, "chart-probe")
    assert 'data-empty="1"' in waiting and "no data yet" in waiting and "uplot" not in waiting
    assert re.search(r'class="headline"></span>', waiting)
    assert 'data-rendered="9"' in dom, re.search(r"<body[^>]*>", dom).group(0)
    assert 'id="published">v5<' in dom and f'id="scored">{history.trajectories}<' in dom and 'id="served">v4<' in dom
    expected_times = clock_times(history.start, history.end)
    for chart_id in CHARTS:
        fig = figure(dom, chart_id)
        assert "data-empty" not in fig and 'class="uplot' in fig and fig.count("<canvas") >= 1, chart_id
    for chart_id in TIME_CHARTS:
        ticks = re.search(r'data-x-ticks="([^"]*)"', figure(dom, chart_id)).group(1).split()
        assert ticks and all(re.fullmatch(r"\d\d:\d\d(:\d\d)?", t) for t in ticks), (chart_id, ticks)
        assert {t[:5] for t in ticks} <= expected_times, (chart_id, ticks, sorted(expected_times))
    # the legend holds the latest point: the last served version with its trajectory count, both reward channels
    reward = figure(dom, "chart-reward")
    assert re.search(r'u-value">v4 \(n=\d+\)<', reward) and "execution" in reward and "preference" in reward
    versions = figure(dom, "chart-versions")  # the learner after step 5, the newest sampler (held across gaps)
    assert re.search(r'u-value">5\.000<', versions) and re.search(r'u-value">4\.000<', versions)
    assert "exec" in figure(dom, "chart-zerovar") and "pref" in figure(dom, "chart-zerovar")
    assert_probe_chart(figure(dom, "chart-probe"), rounds)
    # canvases are not in the DOM: the screenshot shows the reward lines were drawn
    assert colour_pixels(pixels, EXEC_BLUE) > 300 and colour_pixels(pixels, PREF_ORANGE) > 300
    if os.environ.get("SLCA_DASHBOARD_SCREENSHOT"):
        shutil.copyfile(png, os.environ["SLCA_DASHBOARD_SCREENSHOT"])


def assert_probe_chart(fig: str, rounds: list[dict]) -> None:
    """Drawn on its own version axis; the legend holds the latest round (its median version, the versions it
    spanned, its held-out size, its paired difference from v0, success with both interval edges); the caption's
    headline is that round against v0 per suite, paired, as `slca status` and `slca bench online` report it."""
    assert "Held-out probe: success with its 95% interval" in fig
    ticks = re.search(r'data-x-ticks="([^"]*)"', fig).group(1).split()
    assert ticks and all(re.fullmatch(r"v\d+", t) for t in ticks) and {"v0", "v4"} <= set(ticks), ticks
    last = rounds[-1]
    head, d = last["suites"]["held_out"], last["vs_v0"]["held_out"]
    # a literal match: the signed figures carry "+", which a regex would read as a quantifier
    legend = (
        f'u-value">v{last["version"]} (v{last["version_min"]}–v{last["version_max"]}, n={head["n"]}, '
        f"vs v0 {d['diff']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}])<"
    )
    assert legend in fig, (legend, fig)
    for value in (head["success"], head["ci_low"], head["ci_high"], head["exec"], head["pref"]):
        assert f'u-value">{value:.3f}<' in fig, value
    caption = re.search(r'class="headline">([^<]*)<', fig).group(1)
    assert caption.startswith(f"— v0 → v{last['version']}, paired (bootstrap 95%, McNemar p): "), caption
    assert (
        f"held-out {d['a']:.3f} → {d['b']:.3f}, {d['diff']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}] "
        f"p={d['mcnemar_p']:.2g} (n={d['n']})"
    ) in caption, caption
    assert "; test " in caption and "; BFCL " in caption, caption


def test_empty_system_says_no_data_yet(redis_url, tmp_path):
    with DashboardServer(redis_url) as url:
        dom = dump_dom(url, tmp_path)
        _, pixels = screenshot(url, tmp_path)
    assert 'data-rendered="0"' in dom and 'data-fetches="' in dom and 'data-fetches="0"' not in dom
    for chart_id in CHARTS:
        fig = figure(dom, chart_id)
        assert 'data-empty="1"' in fig and "no data yet" in fig and "uplot" not in fig, chart_id
    assert re.search(r'class="headline"></span>', figure(dom, "chart-probe"))  # no headline without rounds
    assert colour_pixels(pixels, EXEC_BLUE) == 0 and colour_pixels(pixels, PREF_ORANGE) == 0
