"""`slca bench …` handlers stop what they started when SIGTERMed (a bench run in the background ignores SIGINT)."""

import os
import signal

import pytest

from ops.bench.cli import _stopping_on_sigterm


def test_sigterm_inside_a_bench_unwinds_its_cleanup():
    cleaned = []

    def bench(args, config) -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0.0)  # let the handler run here, inside the bench
            return 0
        finally:
            cleaned.append("servers stopped")

    previous = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(KeyboardInterrupt):
            _stopping_on_sigterm(bench)(None, None)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert cleaned == ["servers stopped"]


def test_every_bench_of_ops_bench_is_wrapped():
    from slca.cli import build_parser

    parser = build_parser()
    for name in ("serve", "rl", "sft", "swap", "queue", "soak", "table"):
        assert parser.parse_args(["bench", name]).func.__qualname__ == "_stopping_on_sigterm.<locals>.run", name
