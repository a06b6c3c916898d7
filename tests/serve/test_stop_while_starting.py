"""`slca serve` stopped while it is still starting — importing torch and aiohttp, loading the engine — exits with
status 0 like a stop of the running server: nothing was accepted yet, and the stop asked for is what happened
(slca/early_stop.py; the old behaviour: death by SIGTERM, or exit 1 from aiohttp's start-up signal handling)."""

import os
import signal

import pytest

from tests.support.processes import catches_sigterm
from tests.support.serve import ServerProcess
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow  # a real server process loading the tiny model


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_while_serve_starts_is_a_clean_stop(redis_url, tiny_model_dir, tmp_path, sig):
    server = ServerProcess(redis_url, tiny_model_dir, tmp_path / "serve.log")
    try:
        # the first moment a stop can be caught at all: `python -m slca` has just begun its imports
        wait_for(lambda: catches_sigterm(server.proc.pid), 30, "the start-up stop handler")
        os.kill(server.proc.pid, sig)
        rc = server.proc.wait(60)
    finally:
        server.stop()
    log = (tmp_path / "serve.log").read_text()
    assert rc == 0, log
    assert "Traceback" not in log, log
