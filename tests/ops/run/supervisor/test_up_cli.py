"""`slca up` as a command, quickly: an owned Redis when none is configured, the banner, the state file,
`slca status`, and SIGTERM stopping children and Redis."""

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import redis

from ops.run.supervisor.redis_budget import redis_budget
from slca.config import load_config
from slca.redaction import redact_url
from slca.redis_server import free_port

REPO = Path(__file__).resolve().parents[4]


def test_up_owns_redis_reports_state_and_stops_cleanly(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "SLCA_DATA_DIR": str(tmp_path / "var")}
    env.pop("SLCA_REDIS_URL", None)
    sets = [
        "--set",
        'ops.processes=["feed"]',
        "--set",
        f'ops.metrics_ports={{"feed": {free_port()}}}',
        "--set",
        f"serve.port={free_port()}",
        "--set",
        "ops.status_interval_s=0.5",
        "--set",
        "ops.warm_start_minutes=0",
    ]
    up = subprocess.Popen(
        [sys.executable, "-m", "slca", *sets, "up"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    state_file = tmp_path / "var" / "up-state.json"
    try:
        deadline = time.monotonic() + 30
        while not (state_file.exists() and json.loads(state_file.read_text())["processes"][0]["state"] == "running"):
            assert time.monotonic() < deadline and up.poll() is None
            time.sleep(0.1)
        state = json.loads(state_file.read_text())
        url = (tmp_path / "var" / "redis-url").read_text().strip()
        assert state["redis_url"] == redact_url(url) != url  # the state file hides the generated password
        assert stat.S_IMODE((tmp_path / "var" / "redis-url").stat().st_mode) == 0o600
        owned = redis.Redis.from_url(url)
        assert owned.ping()
        # bounded by the sum of the configured bounds, and evicting nothing: the exactly-once markers carry TTLs
        budget = redis_budget(load_config(overrides=[x for x in sets if x != "--set"]))
        assert owned.config_get("maxmemory")["maxmemory"] == str(budget.total)
        assert owned.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
        # supervised: killed, it is started again on its append-only file, with what it acknowledged
        owned.set("slca:w:member:t1", "bucket", ex=3600)
        os.kill(int(owned.info("server")["process_id"]), signal.SIGKILL)
        deadline = time.monotonic() + 30
        while True:
            try:
                again = redis.Redis.from_url(url, socket_connect_timeout=1)
                if again.ping():
                    break
            except redis.ConnectionError:
                pass
            assert time.monotonic() < deadline and up.poll() is None, "the owned redis was not started again"
            time.sleep(0.2)
        assert again.get("slca:w:member:t1") == b"bucket"
        try:
            redis.Redis.from_url(state["redis_url"].replace(":***@", "@")).ping()
            raise AssertionError("the owned redis answers without its password")
        except (redis.AuthenticationError, redis.ResponseError):
            pass
        status = subprocess.run(
            [sys.executable, "-m", "slca", "status"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
        assert status.returncode == 0, status.stderr
        assert "feed" in status.stdout and "running" in status.stdout and "slca:trajectories 0" in status.stdout
    finally:
        up.send_signal(signal.SIGTERM)
        out, _ = up.communicate(timeout=60)
    out = out.decode()
    assert up.returncode == 0, out
    assert "owned redis-server" in out and "feed.log" in out and "slca up: stopped" in out
    assert url.split(":")[2].split("@")[0] not in out and ":***@" in out  # the banner shows no password
    assert "skipping" not in out or "feed" not in out.split("skipping")[1][:20]
    assert (tmp_path / "var" / "redis" / "appendonlydir").exists()  # AOF on
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
        raise AssertionError("owned redis still answers after slca up stopped")
    except redis.ConnectionError:
        pass
    final = json.loads(state_file.read_text())
    assert final["processes"][0]["state"] == "stopped"


def test_warm_start_stage_runs_only_without_a_warm_model_and_explicit_model(tmp_path):
    from ops.experiments.warmstart.model import needs_warm_start, warm_model_dir
    from slca.config import load_config

    base = [f"common.cache_dir={tmp_path}"]
    assert needs_warm_start(load_config(overrides=base))  # fresh machine: no warm start yet
    assert not needs_warm_start(load_config(overrides=base + ["ops.warm_start_minutes=0"]))
    assert not needs_warm_start(load_config(overrides=base + ["common.model=tiny"]))  # the user chose a model
    warm = warm_model_dir(load_config(overrides=base))
    warm.mkdir(parents=True)
    (warm / "config.json").write_text("{}")
    assert not needs_warm_start(load_config(overrides=base))  # later runs find it
