"""A stop before a command has its own stop handling (slca/early_stop.py): status 0 for a service, Python's
default actions back for any other command. Real signals to this process, handlers restored after each test."""

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import slca.cli
from slca.cli import main
from slca.early_stop import SIGNALS, StoppedBeforeStart, install, stop_once


@pytest.fixture
def saved_handlers():
    saved = {sig: signal.getsignal(sig) for sig in SIGNALS}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _one_command_parser(service: bool, func) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="slca")
    parser.add_argument("--config")
    parser.add_argument("--set", action="append", default=[])
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("cmd").set_defaults(func=func, service=service)
    return parser


def _signal_self_and_wait(sig: int) -> None:
    os.kill(os.getpid(), sig)
    time.sleep(5)  # the handler runs at the next bytecode of the main thread: long before this ends
    raise AssertionError(f"{signal.Signals(sig).name} was not handled")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_after_install_raises_stopped_before_start(saved_handlers, sig):
    install()
    with pytest.raises(StoppedBeforeStart) as stop:
        _signal_self_and_wait(sig)
    assert stop.value.signal_name == signal.Signals(sig).name


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_service_stopped_while_it_starts_exits_0_and_says_so(saved_handlers, monkeypatch, capsys, sig):
    install()
    monkeypatch.setattr(
        slca.cli, "build_parser", lambda: _one_command_parser(True, lambda a, c: _signal_self_and_wait(sig))
    )
    assert main(["cmd"]) == 0
    assert f"stopped by {signal.Signals(sig).name} while starting" in capsys.readouterr().err


def _handlers_seen_by_command(service: bool, monkeypatch) -> dict:
    """The SIGTERM/SIGINT handlers in place when a command (a service or not) begins, after `install`."""
    install()
    seen = {}

    def run(args, config):
        seen.update({sig: signal.getsignal(sig) for sig in SIGNALS})
        return 0

    monkeypatch.setattr(slca.cli, "build_parser", lambda: _one_command_parser(service, run))
    assert main(["cmd"]) == 0
    return seen


def test_any_other_command_gets_pythons_default_stop_actions_back(saved_handlers, monkeypatch):
    seen = _handlers_seen_by_command(False, monkeypatch)
    assert seen == {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}


def test_a_service_keeps_the_stop_handling_until_it_installs_its_own(saved_handlers, monkeypatch):
    seen = _handlers_seen_by_command(True, monkeypatch)
    assert all(handler not in (signal.SIG_DFL, signal.default_int_handler) for handler in seen.values()), seen


def test_stop_once_calls_back_on_the_first_signal_only(saved_handlers):
    calls = []
    stop_once(lambda: calls.append(1))
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.05)  # the handler runs at the next bytecode of the main thread
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)
    assert calls == [1]


def test_a_second_signal_while_the_first_stop_unwinds_raises_nothing_more(saved_handlers):
    install()
    with pytest.raises(StoppedBeforeStart):
        try:
            _signal_self_and_wait(signal.SIGTERM)
        finally:  # the way out of a stopped start: a Ctrl-C now must not raise inside it
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)


TEARDOWN_CHILD = """
import os, signal, sys, time
from slca.early_stop import stop_once
if sys.argv[1] == "stop_once":
    stop_once(lambda: None)
else:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)

class SlowTeardown:
    def __del__(self):
        print("finalizing", flush=True)
        time.sleep(3.0)  # a loaded machine may take a while to send the second signal

kept = SlowTeardown()
os.kill(os.getpid(), signal.SIGTERM)  # the stop: handled, the process ends
"""


@pytest.mark.parametrize("handling, status", [("stop_once", 0), ("plain handler", -signal.SIGINT)])
def test_a_second_signal_while_the_interpreter_finalizes_cannot_kill_a_clean_stop(handling, status):
    """Ctrl-C after `slca up`'s SIGTERM: Python gives handled signals their default action back as it finalizes, so a
    plain handler's process dies of the late SIGINT (the -2 `slca up` reported); stop_once's ignores it."""
    child = subprocess.Popen(
        [sys.executable, "-c", TEARDOWN_CHILD, handling.replace(" ", "_")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.stdout.readline().strip() == "finalizing"
    time.sleep(0.2)  # past the signal module's own teardown, inside the slow one
    child.send_signal(signal.SIGINT)
    assert child.wait(timeout=10) == status


def test_a_stop_wrapped_by_a_library_on_its_way_out_is_still_a_stop():
    from slca.early_stop import StoppedBeforeStart, stop_in

    try:
        try:
            raise StoppedBeforeStart(15)
        except StoppedBeforeStart as inner:  # as pydantic's __set_name__ re-raises it
            raise RuntimeError("Error calling __set_name__ on 'PydanticDescriptorProxy'") from inner
    except RuntimeError as wrapped:
        found = stop_in(wrapped)
    assert found is not None and found.signum == 15
    assert stop_in(RuntimeError("unrelated")) is None
