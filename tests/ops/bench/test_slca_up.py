"""ops/bench/slca_up: a bench that holds a started `slca up` stops it when the bench itself is terminated."""

import os
import signal

import pytest

from ops.bench.slca_up import sigterm_as_interrupt


def test_sigterm_runs_the_benchs_cleanup_and_the_handler_is_restored():
    before = signal.getsignal(signal.SIGTERM)
    cleaned = []
    with pytest.raises(KeyboardInterrupt):
        with sigterm_as_interrupt():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                signal.sigtimedwait([], 0.5)  # Python runs the handler before the next bytecode; this only bounds it
            finally:
                cleaned.append("stopped slca up")
    assert cleaned == ["stopped slca up"]
    assert signal.getsignal(signal.SIGTERM) is before
