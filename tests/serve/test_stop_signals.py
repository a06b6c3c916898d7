"""`slca serve` stops with status 0 when a terminal's Ctrl-C (SIGINT) and then `slca up`'s SIGTERM both reach it:
only the first signal counts (aiohttp's own handler would raise its GracefulExit, status 1, for the second)."""

import os
import signal
import time

import pytest

from tests.support.serve import ServerProcess

pytestmark = pytest.mark.timed  # stop deadlines and latency bounds: alone, in the serial phase


def test_sigint_then_sigterm_is_one_clean_stop(serve_redis, tiny_model_dir, tmp_path):
    server = ServerProcess(serve_redis.url, tiny_model_dir, tmp_path / "server.log", "serve.subscribe_weights=false")
    try:
        server.wait_ready()
        t0 = time.monotonic()
        os.killpg(server.proc.pid, signal.SIGINT)
        time.sleep(0.05)
        os.killpg(server.proc.pid, signal.SIGTERM)
        rc = server.proc.wait(timeout=15)
        took = time.monotonic() - t0
    finally:
        server.stop()
    text = server.log_path.read_text(errors="replace")
    assert rc == 0 and "Traceback" not in text, text[-3000:]
    assert took < 10.0
