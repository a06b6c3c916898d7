"""`slca up` (tiny model, its own Redis, every real component) stops cleanly on Ctrl-C while rollouts are in
flight: every child exits with status 0 within 10 s, nothing is SIGKILLed, `slca up` exits 0.

Two forms of Ctrl-C: a terminal signals its foreground process group — `slca up` (its children and its Redis
are in sessions of their own, so they hear of it only through `slca up`'s SIGTERM) — and, where a launcher puts
every process in one group (or signals them all), SIGINT reaches each child directly as well."""

import os
import signal
import time

import pytest

from tests.ops.run.supervisor.test_up_integration import (
    GROUP,
    PROCESSES as SERVICES,
    force_stop,
    read_state,
    start_up,
    watching,
    write_config,
)
from tests.support.processes import catches_sigterm
from tests.support.wait import wait_for

PROCESSES = [*SERVICES, "gate"]
"""Every process `slca up` runs by default: the pipeline's five and the promotion gate (ops/run/gate/)."""


# five real processes, two of them loading a model: about a minute each on 2 cores; `timed`: it asserts a 10 s stop
# deadline, which a neighbour on the other core would make flaky
pytestmark = [pytest.mark.slow, pytest.mark.timed]


@pytest.mark.parametrize("reach", ["up-only", "every-process"])
def test_ctrl_c_stops_every_child_with_status_0_within_10s(tiny_model_dir, tmp_path, reach):
    # no redis_url: `slca up` starts and owns its redis-server, the path a new user takes
    cfg = write_config(tmp_path, "unused", tiny_model_dir)
    text = cfg.read_text().replace('redis_url = "unused"\n', "").replace("feed_requests = 6", "feed_requests = 0")
    cfg.write_text(text)
    up = start_up(cfg, tmp_path)
    watch = watching(up, tmp_path / "up.out")
    ids_file = tmp_path / "var" / "feed-trajectory-ids.log"
    try:
        state = wait_for(
            lambda: (
                (s := read_state(tmp_path)) and all(s.get(n, {}).get("state") == "running" for n in PROCESSES) and s
            ),
            90,
            "bring-up",
            **watch,
        )
        # rollouts are flowing (the feed never stops on its own here): a stop now catches work in flight
        wait_for(lambda: ids_file.exists() and len(ids_file.read_text().split()) >= 2 * GROUP, 240, "rollouts", **watch)
        # every process past the interpreter's own start-up, where a signal still gets the default action (a stop
        # while a service imports and loads is a clean stop too: tests/serve/test_stop_while_starting.py)
        state = wait_for(
            lambda: (s := read_state(tmp_path)) and all(catches_sigterm(p["pid"]) for p in s.values()) and s,
            120,
            "stop handlers",
            **watch,
        )
        t0 = time.monotonic()
        os.killpg(up.pid, signal.SIGINT)  # a terminal's Ctrl-C: the foreground group
        if reach == "every-process":
            for p in state.values():
                try:
                    os.killpg(p["pid"], signal.SIGINT)
                except ProcessLookupError:
                    pass
        up.wait(timeout=60)
        took = time.monotonic() - t0
    finally:
        if up.poll() is None:
            force_stop(up, tmp_path)
    out = (tmp_path / "up.out").read_text()
    logs = {n: (tmp_path / "var" / "logs" / f"{n}.log").read_text(errors="replace")[-1500:] for n in PROCESSES}
    final = read_state(tmp_path)
    print(
        f"{reach}: slca up exited {up.returncode} {took:.1f}s after SIGINT; children:",
        {n: (p["last_exit"], p["stop_s"], p["killed"]) for n, p in final.items()},
    )
    assert up.returncode == 0, out[-3000:]
    assert "slca up: clean stop" in out, out[-3000:]
    for name, p in final.items():
        assert p["state"] in ("stopped", "exited"), (name, p)
        assert p["last_exit"] == 0 and not p["killed"], (name, p, logs[name])
        assert p["stop_s"] is None or p["stop_s"] < 10.0, (name, p, logs[name])
        assert "Traceback" not in logs[name], (name, logs[name])
    assert took < 15.0  # children within 10 s, then Redis's shutdown and the final report
    for p in final.values():  # no child group left behind
        with pytest.raises(ProcessLookupError):
            os.killpg(p["pid"], 0)
