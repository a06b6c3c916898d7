"""`slca up` on the tiny model with every real component: bring-up, live /metrics cover the Grafana dashboard,
a SIGKILLed process is restarted, and every trajectory the API recorded reaches a rollout group (ids in = out)."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from ops.observe.metrics_check import load_dashboard, missing_metrics
from ops.observe.scrape import scrape
from slca.contracts import RolloutGroup, Streams, decode_entry
from slca.redis_server import free_port
from tests.support.wait import wait_for

REPO = Path(__file__).resolve().parents[4]
PROCESSES = ["serve", "worker", "assembler", "learn", "feed"]
FEED_REQUESTS, GROUP = 6, 2

pytestmark = pytest.mark.slow  # five real processes, two of them loading a model: about two minutes on 2 cores


def write_config(tmp: Path, redis_url: str, model: Path) -> Path:
    ports = {name: free_port() for name in ["worker", "assembler", "learn", "feed"]}
    cfg = tmp / "slca.toml"
    cfg.write_text(f"""
[common]
model = "{model}"
redis_url = "{redis_url}"
data_dir = "{tmp / "var"}"
[serve]
port = {free_port()}
engine = "hf"
[workers]
group_size = {GROUP}
visibility_timeout_s = 10.0
restore_interval_s = 2
restore_lock_s = 3
claim_idle_ms = 3000
# a killed worker's task is back after 10 + 2 (+ 3 if it died inside its restore sweep) s, on a worker that first
# has to restart: the margin is for that restart on a loaded machine
group_timeout_s = 40.0
# keep consumed groups in the stream: the test counts trajectory ids out of it after the learner acknowledged them
trim_consumed_groups = false
[ops]
status_interval_s = 2.0
metrics_ports = {json.dumps(ports).replace(":", " =").replace('"', "")}
restart_backoff_initial_s = 0.5
shutdown_grace_s = 15.0
feed_requests = {FEED_REQUESTS}
feed_concurrency = 2
feed_max_tokens = 24
feed_max_turns = 2
# the held-out probe is a ~300-request evaluation per round: not what this test is about (tests/ops/run/feed)
probe_enabled = false
""")
    return cfg


def read_state(tmp: Path) -> dict:
    try:
        return {p["name"]: p for p in json.loads((tmp / "var" / "up-state.json").read_text())["processes"]}
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def start_up(cfg: Path, tmp_path: Path) -> subprocess.Popen:
    """`slca up` on `cfg` in its own session (as a terminal starts it), output in `tmp_path/up.out`; the
    environment's SLCA_REDIS_URL removed so that only the config names Redis."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SLCA_REDIS_URL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "slca", "--config", str(cfg), "up"],
        cwd=tmp_path,
        env=env,
        stdout=open(tmp_path / "up.out", "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def force_stop(up: subprocess.Popen, tmp_path: Path) -> None:
    """SIGKILL `slca up` and every child group its state file names: each child runs in a session of its own, so
    killing only `slca up`'s group would leave them running (and loading the machine) after a failed test."""
    for pid in [up.pid, *(p.get("pid") for p in read_state(tmp_path).values())]:
        try:
            os.killpg(pid, signal.SIGKILL) if pid else None
        except (ProcessLookupError, PermissionError):
            pass
    try:  # the redis-server it owns is in a session of its own too, and not in the state file
        url = (tmp_path / "var" / "redis-url").read_text().strip()
        redis.Redis.from_url(url, socket_timeout=2).shutdown(nosave=True)
    except (FileNotFoundError, redis.RedisError):
        pass
    up.wait(timeout=10)


def watching(up: subprocess.Popen, out: Path) -> dict:
    """`wait_for`'s keywords for waiting on `slca up`: give up when it exits, show the tail of its output."""
    return {
        "alive": lambda: up.poll() is None,
        "detail": lambda: out.read_text(errors="replace")[-3000:],
        "interval": 0.5,
    }


def ids_in_groups(client: redis.Redis) -> set[str]:
    streams = Streams("slca")
    ids = set()
    for _, fields in client.xrange(streams.groups):
        ids |= {t.id for t in decode_entry(RolloutGroup, fields).trajectories}
    for _, fields in client.xrange(streams.dead):
        ids.add(fields.get(b"id", b"").decode())
    return ids


def test_up_restarts_a_killed_process_and_loses_no_trajectory(redis_url, tiny_model_dir, tmp_path):
    cfg = write_config(tmp_path, redis_url, tiny_model_dir)
    up = start_up(cfg, tmp_path)
    watch = watching(up, tmp_path / "up.out")
    client = redis.Redis.from_url(redis_url)
    ids_file = tmp_path / "var" / "feed-trajectory-ids.log"
    try:
        state = wait_for(
            lambda: (
                (s := read_state(tmp_path)) and all(s.get(n, {}).get("state") == "running" for n in PROCESSES) and s
            ),
            60,
            "bring-up",
            **watch,
        )
        wait_for(
            lambda: ids_file.exists() and len(ids_file.read_text().split()) >= GROUP, 180, "first rollouts", **watch
        )

        pages: dict[str, str] = {}

        def collect_metrics() -> None:
            """Keep each process's latest answer: the feed exits when its budget is spent, the Celery worker's
            multiprocess page fills in as its pool children score, a busy process may miss one scrape. The gate has
            no page of its own (its figures are serve's)."""
            for name, proc in read_state(tmp_path).items():
                if (
                    proc["state"] == "running"
                    and proc["url"]
                    and (page := scrape(proc["url"] + ("/metrics" if name == "serve" else ""), 5.0))
                ):
                    pages[name] = pages.get(name, "") + page

        collect_metrics()
        victim = state["worker"]["pid"]
        os.killpg(victim, signal.SIGKILL)
        wait_for(
            lambda: (
                (w := read_state(tmp_path).get("worker"))
                and w["restarts"] >= 1
                and w["state"] == "running"
                and w["pid"] != victim
            ),
            30,
            "worker restart",
            **watch,
        )

        collect_metrics()
        wait_for(lambda: read_state(tmp_path).get("feed", {}).get("state") == "exited", 300, "feed to finish", **watch)
        ids_in = set(ids_file.read_text().split())
        assert len(ids_in) == FEED_REQUESTS * GROUP
        wait_for(lambda: ids_in <= ids_in_groups(client), 120, "every recorded trajectory in a group", **watch)
        collect_metrics()
        assert set(pages) == set(PROCESSES), f"processes that never answered /metrics: {set(PROCESSES) - set(pages)}"
        gap = missing_metrics(load_dashboard(), list(pages.values()))
        assert gap == set(), f"dashboard metrics that no live /metrics declares: {sorted(gap)}"
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(timeout=60)
        except subprocess.TimeoutExpired:
            force_stop(up, tmp_path)
            raise
    out = (tmp_path / "up.out").read_text()
    assert up.returncode == 0, out[-3000:]
    assert "slca up: stopped" in out and "dashboard:" in out
    final = read_state(tmp_path)
    assert all(p["state"] in ("stopped", "exited") for p in final.values()), final
    for p in final.values():  # no child group left behind
        with pytest.raises(ProcessLookupError):
            os.killpg(p["pid"], 0)
