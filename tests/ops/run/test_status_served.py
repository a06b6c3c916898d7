"""`slca status` says what callers get from what each serve process of `slca up` serves (its `/v1/versions`
engines), not from the promotion record alone: with one engine per process (vLLM, role "both") callers follow the
candidate whatever the record's promoted version; with `ops.candidate_replica` both replicas' versions are shown."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from ops.common.up_state import state_path, write_state
from ops.run.served_versions import callers_version, served_lines
from ops.run.status import run_status
from slca.config import load_config
from slca.contracts import Streams
from slca.contracts.versions import Promotion, promotion_key

ONE_ENGINE = {"promoted": 10, "candidate": 12, "engines": {"candidate": 12}, "canary_share": 0.0,
              "follow_candidate": False, "one_engine": True, "role": "both"}  # fmt: skip
TWO_ENGINES = {**ONE_ENGINE, "engines": {"candidate": 12, "promoted": 10}, "one_engine": False, "canary_share": 0.05}
PROMOTED = {**ONE_ENGINE, "candidate": 10, "engines": {"promoted": 10}, "role": "promoted"}
CANDIDATE = {**ONE_ENGINE, "engines": {"candidate": 12}, "role": "candidate"}


def test_callers_get_what_the_engines_hold():
    assert callers_version(ONE_ENGINE) == 12  # one engine: the candidate's, whatever the record says
    assert callers_version(TWO_ENGINES) == 10  # the promoted engine
    assert callers_version({**TWO_ENGINES, "engines": {"candidate": 10}}) == 10  # roles the same: they share it
    assert callers_version(PROMOTED) == 10 and callers_version(CANDIDATE) == 12
    assert callers_version({"promoted": 3, "candidate": 3}) == 3  # no version roles


def test_the_lines_name_the_version_callers_get_and_why():
    one = served_lines([("serve", "http://h:8000", ONE_ENGINE)])
    assert one.startswith("serve: callers get v12; one engine per process: callers follow the candidate")
    assert "the record's promoted v10 is not what callers get" in one
    two = served_lines([("serve", "http://h:8000", TWO_ENGINES)])
    assert two.startswith("serve: callers get v10;") and "5% of callers get the candidate v12" in two
    assert "the feed and the probe get the candidate v12" in two and "not what callers get" not in two
    assert served_lines([("serve", "http://h:8000", None)]) == "serve: /v1/versions did not answer (http://h:8000)"


def test_a_held_candidate_is_shown_with_the_time_its_hold_has_left():
    held = {**CANDIDATE, "hold": {"version": 12, "left_s": 840.0}}
    line = served_lines([("serve-candidate", "http://h:8001", held)])
    assert "held at v12 while the gate judges it (840.0 s left at most)" in line
    assert "held" not in served_lines([("serve-candidate", "http://h:8001", CANDIDATE)])


class Versions(BaseHTTPRequestHandler):
    bodies: dict[int, dict] = {}

    def do_GET(self):  # noqa: N802 - http.server's name
        body = self.bodies.get(self.server.server_address[1]) if self.path == "/v1/versions" else None
        raw = json.dumps(body).encode()
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args):
        pass


@pytest.fixture
def serve_processes():
    """Serve processes answering `/v1/versions`: `start(body)` → its base URL."""
    servers = []

    def start(body: dict) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), Versions)
        Versions.bodies[server.server_address[1]] = body
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _status(redis_url, redis_client, tmp_path, capsys, processes: dict[str, str]) -> str:
    prefix = "servedstatus"
    record = Promotion(promoted=10, history=[8], rolled_back=[], reason="gate", at=1000.0)
    redis_client.set(promotion_key(Streams(prefix)), record.model_dump_json())
    rows = [{"name": n, "pid": 1, "state": "running", "restarts": 0, "uptime_s": 1.0, "url": u}
            for n, u in processes.items()]  # fmt: skip
    write_state(state_path(tmp_path), {"supervisor_pid": os.getpid(), "processes": rows})
    config = load_config(
        None, [f"common.redis_url={redis_url}", f"common.data_dir={tmp_path}", f"common.stream_prefix={prefix}"]
    )
    assert run_status(SimpleNamespace(window=50), config) == 0
    return capsys.readouterr().out


def test_with_one_engine_per_process_status_says_callers_get_the_candidate(
    redis_url, redis_client, tmp_path, capsys, serve_processes
):
    out = _status(redis_url, redis_client, tmp_path, capsys, {"serve": serve_processes(ONE_ENGINE)})
    assert "serve: callers get v12; one engine per process: callers follow the candidate" in out
    assert "promotion record: promoted v10 (gate," in out and "\npromoted: v10" not in out


def test_with_a_candidate_replica_status_shows_both_replicas(
    redis_url, redis_client, tmp_path, capsys, serve_processes
):
    serve, candidate = serve_processes(PROMOTED), serve_processes(CANDIDATE)
    out = _status(redis_url, redis_client, tmp_path, capsys, {"serve": serve, "serve-candidate": candidate})
    lines = out.splitlines()
    assert f"serve [promoted]: callers get v10 ({serve})" in lines
    assert any(
        line.startswith("serve-candidate [candidate]: serves the candidate v12 to every request") for line in lines
    )
