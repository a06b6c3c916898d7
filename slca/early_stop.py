"""A stop that reaches a service before it has installed its own stop handling is a clean stop.

A service (`slca serve`, `learn`, `worker`, `assembler`, `feed`: commands registered with `service=True`) turns
SIGTERM and SIGINT into a graceful stop with exit status 0 once it has started. Before that — while Python imports
torch, vLLM or Celery, which takes seconds — the default actions apply: SIGTERM kills the process (`slca up` then
reports -15) and SIGINT raises KeyboardInterrupt wherever it lands (exit 1 or a traceback). A Ctrl-C or `slca up`'s
stop in those seconds would then read as a failure although nothing had been accepted yet.

`install` (the first thing `python -m slca` does) makes both signals raise `StoppedBeforeStart`; the command line
answers it with status 0. A service replaces these handlers with its own as it starts; any other command gets
Python's defaults back as soon as its arguments are parsed (`release`), so that a stop in the middle of, say, a
training run still reads as one.

One stop, however many signals: a terminal's Ctrl-C and `slca up`'s SIGTERM often both reach a service, a moment
apart. The first one stops it and every later one changes nothing (`stop_once`, and `install`'s handler raises only
once). And both signals are ignored from the moment the interpreter exits (an `atexit` hook): Python gives every
signal with a Python handler its default action back as it finalizes, so the second signal, landing in that last
half second of a service that stopped quickly, would otherwise kill it (exit status -2 or -15 after a clean stop).
"""

from __future__ import annotations

import atexit
import signal
import sys
import threading
from typing import Callable

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StoppedBeforeStart(BaseException):
    """SIGTERM or SIGINT arrived before the command had its own stop handling (BaseException: no `except
    Exception` on the way out swallows it)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    def report(self) -> int:
        """Say so on stderr; the exit status: 0, nothing was accepted yet and the stop asked for is what happened."""
        print(f"slca: stopped by {self.signal_name} while starting", file=sys.stderr)
        return 0


def stop_in(exc: BaseException) -> "StoppedBeforeStart | None":
    """The `StoppedBeforeStart` `exc` is or was raised from (its cause or context chain), else None. Why: the signal
    lands at whatever line the import runs, and some callers wrap what they catch — pydantic re-raises an exception in
    a class body's `__set_name__` as RuntimeError ('Error calling __set_name__'): the feed then exited 1 on a stop
    `slca up` sent while it imported (CI, 2026-12-06)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, StoppedBeforeStart):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


_stopping = False
"""A stop was asked for: a later signal is a no-op (it must not raise again while the first one unwinds)."""


def _raise_stop(signum, frame) -> None:
    global _stopping
    if not _stopping:
        _stopping = True
        raise StoppedBeforeStart(signum)


def _ignore_at_exit() -> None:
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


_ignoring_at_exit = False


def ignore_at_exit() -> None:
    """SIGTERM and SIGINT ignored from the interpreter's exit on (`atexit`, which runs before Python resets its
    handlers to the defaults; once only). Main thread only."""
    global _ignoring_at_exit
    if not _ignoring_at_exit:
        _ignoring_at_exit = True
        atexit.register(_ignore_at_exit)


def install() -> None:
    """SIGTERM and SIGINT raise `StoppedBeforeStart` from here on, the first of them only (main thread only:
    Python's rule)."""
    global _stopping
    _stopping = False
    if threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, _raise_stop)
        ignore_at_exit()


def release() -> None:
    """Python's default actions back wherever this module's handler is still installed (a command that is not a
    service)."""
    if threading.current_thread() is not threading.main_thread():
        return
    defaults = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}
    for sig, default in defaults.items():
        if signal.getsignal(sig) is _raise_stop:
            signal.signal(sig, default)


def stop_once(on_stop: Callable[[], None]) -> None:
    """A service's stop handling: the first SIGTERM or SIGINT calls `on_stop` (in the main thread, between two
    bytecodes: keep it short, e.g. `event.set` or `loop.call_soon_threadsafe(stop.set)`); later ones do nothing —
    not even when one lands inside the first's `on_stop` (a second `threading.Event.set` there would wait forever
    for the lock the first holds) — and from the interpreter's exit on both are ignored (`ignore_at_exit`). Still
    handled, not ignored, until then: a signal the C level has taken but Python has not run yet would be reported
    as "ignored due to race condition" (a traceback in the log) if its handler became SIG_IGN meanwhile. Main
    thread only (Python's rule)."""
    fired = False

    def on_signal(signum, frame) -> None:
        nonlocal fired
        if not fired:
            fired = True
            on_stop()

    for sig in SIGNALS:
        signal.signal(sig, on_signal)
    ignore_at_exit()
