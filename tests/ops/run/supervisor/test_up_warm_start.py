"""`slca up` on a fresh machine (no warm start in the model cache) answers at once and trains the warm start beside
serving (ops/run/supervisor/warm_stage.py): serve answers while the warm start still trains, the feed and the learner
are held; the warm start arrives as a hot swap (the next version, promoted for callers, the candidate's too) and
only then do the feed and the learner start, on the warm-started model. A later run finds the warm start cached and
starts everything at once, as before.

The "embedded" model of this machine's cache is the tiny model (a link in a cache of the test's own), so the fresh
machine's path runs as a new user's does, on a model that loads in seconds."""

import json
import os
import signal
import time
import urllib.request
from pathlib import Path

import pytest
import redis

from ops.experiments.warmstart.progress import read_record, record_key
from slca.models.paths import EMBEDDED_NAME
from slca.redis_server import free_port
from slca.weights.publish import next_version
from tests.ops.run.supervisor.test_up_integration import force_stop, read_state, start_up, watching
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow  # a warm start of a minute beside five real processes, then a second bring-up

WARM_MINUTES = 0.5
"""Whatever it is, serve answers before the warm start is swapped in: the handover waits for serve's readiness."""
WARMING = ("loading", "checking", "training", "saving", "publishing", "swapping")
"""The warm start's phases before its version is served (ops/experiments/warmstart/progress.py)."""


def write_config(tmp: Path, redis_url: str) -> Path:
    ports = {name: free_port() for name in ["worker", "assembler", "learn", "feed"]}
    cfg = tmp / "slca.toml"
    cfg.write_text(f"""
[common]
cache_dir = "{tmp / "cache"}"
redis_url = "{redis_url}"
data_dir = "{tmp / "var"}"
[serve]
port = {free_port()}
engine = "hf"
[learner]
precision = "fp32"
[workers]
group_size = 2
[ops]
processes = ["serve", "worker", "assembler", "learn", "feed"]
status_interval_s = 2.0
metrics_ports = {json.dumps(ports).replace(":", " =").replace('"', "")}
warm_start_minutes = {WARM_MINUTES}
warm_start_eval_tasks = 0
warm_start_swap_timeout_s = 120.0
feed_requests = 2
feed_concurrency = 1
feed_max_tokens = 16
feed_max_turns = 1
probe_enabled = false
""")
    return cfg


def http(url: str, body: dict | None = None, token: str | None = None) -> tuple[dict, dict]:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    data = json.dumps(body).encode() if body is not None else None
    with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers), timeout=60) as resp:
        return json.loads(resp.read()), dict(resp.headers)


def chat(api: str) -> tuple[dict, dict]:
    """A caller's request (no key: the promoted version answers)."""
    model = http(api + "/v1/models")[0]["data"][0]["id"]
    body = {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    return http(api + "/v1/chat/completions", body)


def ready(api: str) -> bool:
    try:
        with urllib.request.urlopen(api + "/readyz", timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode(errors="replace").partition("=")[::2] for item in raw if b"=" in item)


def stop(up, tmp_path: Path) -> None:
    up.send_signal(signal.SIGTERM)
    try:
        up.wait(timeout=90)
    except Exception:
        force_stop(up, tmp_path)
        raise


def test_a_fresh_machine_answers_first_then_swaps_the_warm_start_in(tiny_model_dir, redis_url, tmp_path):
    models = tmp_path / "cache" / "models"
    models.mkdir(parents=True)
    (models / EMBEDDED_NAME).symlink_to(tiny_model_dir, target_is_directory=True)  # this machine's embedded model
    warm = models / f"{EMBEDDED_NAME}-sft"
    cfg = write_config(tmp_path, redis_url)
    client = redis.Redis.from_url(redis_url)

    up = start_up(cfg, tmp_path)
    watch = watching(up, tmp_path / "up.out")
    t0 = time.monotonic()
    try:
        state = wait_for(lambda: read_state(tmp_path).get("serve", {}).get("url") and read_state(tmp_path), 60,
                         "the state file", **watch)  # fmt: skip
        api = state["serve"]["url"]
        assert state["learn"]["state"] == "held" and state["feed"]["state"] == "held"
        wait_for(lambda: ready(api), 240, "serve ready", **watch)
        answer, headers = chat(api)
        first_answer_s = time.monotonic() - t0
        record = read_record(tmp_path / "var")
        state = read_state(tmp_path)
        # serve answered the base model (v0) before the warm start finished, the feed and the learner held
        assert answer["choices"][0]["message"] is not None and headers["X-SLCA-Policy-Version"] == "0"
        assert state["warmstart"]["state"] == "running" and record.phase in WARMING
        assert state["learn"]["state"] == "held" and state["feed"]["state"] == "held" and state["learn"]["pid"] is None
        assert not warm.exists()
        # its progress is visible: the table's line (`slca status`), the dashboard's Redis record, its log
        line = wait_for(lambda: (read_state(tmp_path).get("warmstart") or {}).get("detail"), 60, "progress", **watch)
        assert line.startswith(("loading", "training", "checking", "saving", "publishing", "v1 published")), line
        assert json.loads(client.get(record_key("slca")))["phase"] in WARMING

        wait_for(lambda: read_state(tmp_path)["warmstart"]["state"] != "running", 60 * WARM_MINUTES + 300,
                 "the warm start to finish", **watch)  # fmt: skip
        swapped_s = time.monotonic() - t0
        state = read_state(tmp_path)
        assert state["warmstart"]["last_exit"] == 0, (tmp_path / "var" / "logs" / "warmstart.log").read_text()[-3000:]
        record = read_record(tmp_path / "var")
        assert record.phase == "served" and record.version == 1 and record.model_dir == str(warm)
        assert (warm / "model.safetensors").is_file()
        versions, _ = http(api + "/v1/versions")
        assert versions["promoted"] == 1 and versions["candidate"] == 1 and versions["record"]["reason"] == "operator"
        answer, headers = chat(api)  # callers now get the warm start: the served version advanced
        assert headers["X-SLCA-Policy-Version"] == "1" and answer["policy_version"] == 1
        # only now the feed and the learner, on the warm-started model; the learner's versions come after v1
        state = wait_for(
            lambda: (s := read_state(tmp_path)) and all(s[n]["pid"] for n in ("learn", "feed")) and s, 30, **watch
        )
        assert environ_of(state["learn"]["pid"])["SLCA_MODEL"] == str(warm)
        feed_env = environ_of(state["feed"]["pid"]) if state["feed"]["state"] == "running" else None
        assert feed_env is None or feed_env["SLCA_OPS__PROBE_BASELINE_VERSION"] == "1"
        assert next_version(tmp_path / "var" / "weights", 0) == 2
        log = (tmp_path / "var" / "logs" / "warmstart.log").read_text()
        assert "warm start: training" in log and "warm start: v1 served" in log and "Traceback" not in log
        print(f"first answer after {first_answer_s:.0f} s, the warm start served after {swapped_s:.0f} s")
    finally:
        if up.poll() is None:
            stop(up, tmp_path)
    assert up.returncode == 0 and "slca up: clean stop" in (tmp_path / "up.out").read_text()

    # a later run: the warm start is cached, so everything starts at once on it (as before)
    (tmp_path / "up.out").rename(tmp_path / "up-first.out")
    up = start_up(cfg, tmp_path)
    watch = watching(up, tmp_path / "up.out")
    try:
        state = wait_for(
            lambda: (s := read_state(tmp_path)) and s.get("learn", {}).get("state") == "running" and s, 60, **watch
        )
        assert "warmstart" not in state and state["feed"]["state"] in ("running", "exited")
        assert f"{warm} (warm start written by `slca sft`)" in (tmp_path / "up.out").read_text()
    finally:
        if up.poll() is None:
            stop(up, tmp_path)
    assert up.returncode == 0


@pytest.fixture(autouse=True)
def _no_inherited_model(monkeypatch):
    """The environment must not choose the model (an exported SLCA_MODEL is an explicit model: no warm start)."""
    for name in ("SLCA_MODEL", "SLCA_COMMON__MODEL"):
        monkeypatch.delenv(name, raising=False)
    assert "SLCA_MODEL" not in os.environ
