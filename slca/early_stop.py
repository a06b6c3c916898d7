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
"""

from __future__ import annotations

import signal
import sys
import threading

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


def _raise_stop(signum, frame) -> None:
    raise StoppedBeforeStart(signum)


def install() -> None:
    """SIGTERM and SIGINT raise `StoppedBeforeStart` from here on (main thread only: Python's rule)."""
    if threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, _raise_stop)


def release() -> None:
    """Python's default actions back wherever this module's handler is still installed (a command that is not a
    service)."""
    if threading.current_thread() is not threading.main_thread():
        return
    defaults = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}
    for sig, default in defaults.items():
        if signal.getsignal(sig) is _raise_stop:
            signal.signal(sig, default)
