"""`slca serve` stops with status 0 when a terminal's Ctrl-C (SIGINT) and then `slca up`'s SIGTERM both reach it:
only the first signal counts (aiohttp's own handler would raise its GracefulExit, status 1, for the second)."""

import os
import signal
import time

import pytest

from tests.support.serve import ServerProcess

pytestmark = pytest.mark.timed  # stop deadlines and latency bounds: alone, in the serial phase


def test_sigint_then_sigterm_is_one_clean_stop(serve_redis, tiny_model_dir, tmp_path):
    server = ServerProcess(serve_redis.url, tiny_model_dir, tmp_path / "server.log", "weights.follow=false")
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


def test_a_request_still_in_flight_holds_the_stop_for_the_drain_only(serve_redis, tiny_model_dir, tmp_path):
    """A client that sent its headers and half its body is a request in flight: aiohttp's own default waits 60 s
    for it, past `slca up`'s grace (then SIGKILL); serve waits `serve.stop_drain_s`, closes it, exits 0."""
    import socket

    server = ServerProcess(
        serve_redis.url,
        tiny_model_dir,
        tmp_path / "server.log",
        "weights.follow=false",
        "serve.stop_drain_s=1",
    )
    client = None
    try:
        server.wait_ready()
        client = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        body = b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}'
        head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        client.sendall((head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body[:10])
        time.sleep(0.5)  # the server has read the headers and waits for the rest of the body
        t0 = time.monotonic()
        os.killpg(server.proc.pid, signal.SIGTERM)
        rc = server.proc.wait(timeout=30)
        took = time.monotonic() - t0
        assert client.recv(65536) == b""  # the half-sent request's connection was closed, not answered later
    finally:
        if client is not None:
            client.close()
        server.stop()
    text = server.log_path.read_text(errors="replace")
    assert rc == 0 and "Traceback" not in text, text[-3000:]
    assert 0.9 < took < 8.0, took
