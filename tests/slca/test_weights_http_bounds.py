"""The learner's weight server and a server's fetch under hostile peers (issue 36): a bounded version number, a
socket timeout, a cap on threads, and a fetch that follows no redirect (so the token never reaches another host)."""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import SimpleNamespace

import pytest

from slca.weights import HttpTransport, WeightLoadError, fetch_token

KEY = "test-weights-key"


@pytest.fixture
def learner(tmp_path):
    transport = HttpTransport(tmp_path / "weights", bind="127.0.0.1:0", key=KEY, serve_threads=2, serve_timeout_s=1.0)
    (tmp_path / "weights").mkdir()
    transport.connect()
    yield transport
    transport.close()


def _get(url: str) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {fetch_token(KEY)}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_5000_digit_version_is_a_400_without_a_traceback(learner, capfd):
    assert _get(learner.base_url + "/v" + "9" * 5000 + "/manifest.json") == 400
    assert _get(learner.base_url + "/v" + "9" * 18 + "/manifest.json") == 404  # in bounds, not published
    time.sleep(0.1)
    assert "Traceback" not in capfd.readouterr().err


def _address(learner) -> tuple[str, int]:
    host, port = learner._server.server_address[:2]
    return host, port


def test_a_silent_client_is_dropped_after_the_socket_timeout(learner):
    with socket.create_connection(_address(learner), timeout=5) as silent:
        started = time.monotonic()
        assert silent.recv(1024) == b""  # closed by the server, not by our own timeout
        assert time.monotonic() - started < 3.0


def test_connections_past_the_thread_cap_get_a_503(learner):
    held = [socket.create_connection(_address(learner), timeout=5) for _ in range(2)]  # both threads wait on them
    try:
        time.sleep(0.1)
        assert _get(learner.base_url + "/v1/manifest.json") == 503
    finally:
        for s in held:
            s.close()
    time.sleep(1.3)  # their threads end (the socket timeout at the latest)
    assert _get(learner.base_url + "/v1/manifest.json") == 404  # served again


class _Recorder(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        self.server.seen.append(dict(self.headers))
        target = getattr(self.server, "redirect_to", None)
        if target:
            self.send_response(302)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def _recording_server(redirect_to: str | None = None) -> HTTPServer:
    server = HTTPServer(("127.0.0.1", 0), _Recorder)
    server.seen, server.redirect_to = [], redirect_to
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_fetch_follows_no_redirect_and_the_token_stays_home(tmp_path):
    elsewhere = _recording_server()
    origin = _recording_server(redirect_to=f"http://127.0.0.1:{elsewhere.server_port}/stolen")
    manifest = SimpleNamespace(
        version=1, url=f"http://127.0.0.1:{origin.server_port}/v1/", sha256={"model.safetensors": "0" * 64}
    )
    try:
        with pytest.raises(WeightLoadError, match="redirect"):
            HttpTransport(mirror_dir=tmp_path / "mirror", key=KEY, timeout_s=5).fetch(manifest)
    finally:
        origin.shutdown()
        elsewhere.shutdown()
    assert len(origin.seen) == 1 and origin.seen[0]["Authorization"] == f"Bearer {fetch_token(KEY)}"
    assert elsewhere.seen == []  # never asked, so never handed the token
