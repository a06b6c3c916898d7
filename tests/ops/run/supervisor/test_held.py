"""Held and one-shot processes (the warm start beside serving): a held process starts only once what it waits for
has finished, with the spec `prepare` makes; a one-shot process is never restarted, and its failure releases what
waits for it too. Small real child processes."""

import sys
import time
from dataclasses import replace

from ops.run.supervisor import Backoff, ProcessSpec, ProcessState, Supervisor

PY = sys.executable


def _tick_until(sup: Supervisor, done, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        sup.tick()
        time.sleep(0.02)
    assert done(), [(p.spec.name, p.state) for p in sup.processes]


def _plan(tmp_path, first_code: str) -> tuple[Supervisor, list]:
    marker = tmp_path / "held.out"
    first = ProcessSpec("first", [PY, "-c", first_code], tmp_path / "first.log", restart=False)
    held = ProcessSpec(
        "held",
        [PY, "-c", f"import os; open({str(marker)!r}, 'w').write(os.environ.get('GIVEN', 'none'))"],
        tmp_path / "held.log",
        after=("first",),
    )
    seen: list = []

    def prepare(spec: ProcessSpec) -> ProcessSpec:
        seen.append(first_state(sup))
        return replace(spec, env={**spec.env, "GIVEN": "prepared"})

    sup = Supervisor([first, held], Backoff(0.05, 0.1, 60.0), grace_s=2.0, poll_interval_s=0.01, prepare=prepare)
    return sup, seen


def first_state(sup: Supervisor) -> ProcessState:
    return sup.get("first").state


def test_a_held_process_starts_after_what_it_waits_for_with_the_prepared_spec(tmp_path):
    sup, seen = _plan(tmp_path, "import time; time.sleep(0.5)")
    sup.start_all()
    try:
        assert sup.get("held").state == ProcessState.HELD and sup.get("held").pid is None
        _tick_until(sup, lambda: sup.get("held").state in (ProcessState.RUNNING, ProcessState.EXITED))
        _tick_until(sup, lambda: sup.get("held").state == ProcessState.EXITED)
    finally:
        sup.stop_all()
    assert seen == [ProcessState.EXITED]  # released only once the first one had finished
    assert (tmp_path / "held.out").read_text() == "prepared"
    assert sup.get("first").restarts == 0 and sup.clean_stop()


def test_a_failed_one_shot_is_final_and_releases_what_waits_for_it(tmp_path):
    sup, seen = _plan(tmp_path, "raise SystemExit(3)")
    sup.start_all()
    try:
        _tick_until(sup, lambda: sup.get("held").state == ProcessState.EXITED)
        time.sleep(0.3)  # past the back-off a crash would have had
        sup.tick()
    finally:
        sup.stop_all()
    first = sup.get("first")
    assert seen == [ProcessState.FAILED] and first.restarts == 0 and first.last_exit == 3
    assert not sup.clean_stop()  # a failed warm start is not hidden


def test_a_stop_while_held_signals_nothing(tmp_path):
    sup, seen = _plan(tmp_path, "import time; time.sleep(30)")
    sup.start_all()
    sup.stop_all()
    held = sup.get("held")
    assert held.state == ProcessState.STOPPED and held.pid is None and not seen
    assert sup.get("first").state == ProcessState.STOPPED
