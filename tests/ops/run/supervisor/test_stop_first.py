"""A stop with the probe's final round: the feed and the learner are stopped first while the API keeps running (the
feed's last round needs it), for at most the round's bound; then the rest as before."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from ops.run.supervisor import Backoff, ProcessSpec, Supervisor
from tests.support.wait import wait_for

pytestmark = pytest.mark.timed  # stop deadlines: alone, in the serial phase

PY = sys.executable


def _feed_script(api_pid_file: Path, seen: Path) -> str:
    """On SIGTERM: wait a little (the final round), note whether the API process is still alive, exit 0."""
    return (
        "import os, signal, sys, time\n"
        "def stop(*_):\n"
        "    time.sleep(0.5)\n"
        f"    pid = int(open({str(api_pid_file)!r}).read())\n"
        "    try:\n"
        "        os.kill(pid, 0); alive = 'alive'\n"
        "    except ProcessLookupError:\n"
        "        alive = 'gone'\n"
        f"    open({str(seen)!r}, 'w').write(alive); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "while True: time.sleep(0.1)\n"
    )


def test_the_feed_stops_first_while_the_api_keeps_running(tmp_path):
    api_pid, seen = tmp_path / "api.pid", tmp_path / "seen"
    api = f"import os, time; open({str(api_pid)!r}, 'w').write(str(os.getpid())); time.sleep(300)"
    sup = Supervisor(
        [
            ProcessSpec("serve", [PY, "-c", api], tmp_path / "serve.log"),
            ProcessSpec("feed", [PY, "-c", _feed_script(api_pid, seen)], tmp_path / "feed.log", stop_first_s=20.0),
        ],
        Backoff(0.1, 1.0, 60.0),
        grace_s=2.0,
    )
    sup.start_all()
    wait_for(lambda: api_pid.exists() and api_pid.read_text())
    time.sleep(0.5)  # the feed has installed its handler
    sup.stop_all()
    assert seen.read_text() == "alive"  # the API served the feed's last round
    assert sup.get("feed").last_exit == 0 and not sup.get("feed").killed


def test_a_first_stop_is_bounded(tmp_path):
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"
    sup = Supervisor(
        [
            ProcessSpec("serve", [PY, "-c", "import time; time.sleep(300)"], tmp_path / "serve.log"),
            ProcessSpec("feed", [PY, "-c", stubborn], tmp_path / "feed.log", stop_first_s=1.0),
        ],
        Backoff(0.1, 1.0, 60.0),
        grace_s=2.0,
    )
    sup.start_all()
    time.sleep(0.5)
    started = time.monotonic()
    sup.stop_all()
    assert time.monotonic() - started < 8 and sup.get("feed").killed


@pytest.mark.parametrize(
    "sets,expected",
    [
        ([], {"feed": 900.0 + 5.0 + 15.0, "learn": 920.0, "serve": 0.0, "worker": 0.0}),
        (["ops.probe_final_timeout_s=0"], {"feed": 0.0, "learn": 0.0}),
        (["ops.probe_enabled=false"], {"feed": 0.0, "learn": 0.0}),
    ],
)
def test_slca_up_stops_feed_and_learner_first_when_a_final_round_is_on(tmp_path, sets, expected):
    from ops.run.supervisor.plan import build_specs
    from slca.config import load_config

    available = {"serve", "worker", "assembler", "learn", "feed", "gate"}
    specs, _ = build_specs(load_config(None, sets), [], {}, tmp_path, available)
    first = {spec.name: spec.stop_first_s for spec in specs}
    assert {name: first[name] for name in expected} == expected
