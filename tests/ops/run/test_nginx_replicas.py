"""The shipped nginx snippet (ops/run/deploy/nginx-replicas.conf) puts several replicas behind one address: nginx
runs it, with its two `server` lines pointed at two local HTTP servers standing in for replicas; requests reach
both, and with one replica down every request (a POST too: it never reached the dead one) is answered by the other.
Skipped where nginx is not installed (Debian package nginx; or SLCA_NGINX=<path of the binary>)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from slca.redis_server import free_port
from tests.support.processes import REPO
from tests.support.wait import wait_for

SNIPPET = REPO / "ops" / "run" / "deploy" / "nginx-replicas.conf"
NGINX = os.environ.get("SLCA_NGINX") or shutil.which("nginx")
pytestmark = pytest.mark.skipif(not NGINX, reason="no nginx binary (Debian package nginx, or SLCA_NGINX=<path>)")


class Replica:
    """A stand-in replica: answers every GET and POST with its name."""

    def __init__(self, name: str):
        self.name = name

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                body = json.dumps({"replica": name, "path": self.path}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer  # noqa: N815 — the names http.server calls

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def nginx_conf(tmp: Path, replicas: list[Replica], port: int) -> Path:
    snippet = SNIPPET.read_text()
    servers = re.findall(r"^\s*server \S+:\d+ [^;]*;$", snippet, re.M)
    assert len(servers) == len(replicas), "the snippet lists two replicas"
    for line, replica in zip(servers, replicas):
        snippet = snippet.replace(line, re.sub(r"server \S+:\d+", f"server 127.0.0.1:{replica.port}", line))
    assert "listen 8000;" in snippet
    snippet = snippet.replace("listen 8000;", f"listen 127.0.0.1:{port};")
    (tmp / "replicas.conf").write_text(snippet)
    temp_paths = "".join(
        f"{kind}_temp_path {tmp}/{kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    conf = tmp / "nginx.conf"
    conf.write_text(
        f"daemon off;\nmaster_process off;\npid {tmp}/nginx.pid;\nerror_log {tmp}/error.log;\nevents {{}}\n"
        f"http {{\naccess_log off;\n{temp_paths}include {tmp}/replicas.conf;\n}}\n"
    )
    return conf


def get(url: str, data: bytes | None = None) -> dict:
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_the_snippet_spreads_requests_over_replicas_and_skips_a_dead_one(tmp_path):
    replicas = [Replica("serve-1"), Replica("serve-2")]
    port = free_port()
    conf = nginx_conf(tmp_path, replicas, port)
    args = ["-p", str(tmp_path), "-c", str(conf), "-e", str(tmp_path / "error.log")]
    check = subprocess.run([NGINX, "-t", *args], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    proc = subprocess.Popen([NGINX, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(base), 10, "nginx", alive=lambda: proc.poll() is None)
        seen = {get(base + "/v1/models")["replica"] for _ in range(8)}
        assert seen == {"serve-1", "serve-2"}  # one address, both replicas
        replicas[0].stop()  # serve-1 goes down: connections refused
        answers = [get(base + "/v1/models")["replica"] for _ in range(6)]
        answers += [get(base + "/v1/chat/completions", b"{}")["replica"] for _ in range(4)]
        assert set(answers) == {"serve-2"}  # every request answered, by the live replica
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        replicas[1].stop()


def _answers(base: str) -> bool:
    try:
        get(base + "/readyz")
        return True
    except OSError:
        return False
