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
    bench = next(a for a in parser._subparsers._group_actions[0].choices["bench"]._actions if a.dest == "bench")
    wrapped = {
        name: p.get_default("func").__name__
        for name, p in bench.choices.items()
        if p.get_default("func").__module__ == "ops.bench.cli"
    }
    assert {"serve", "rl", "sft", "swap", "queue"} <= set(wrapped) and set(wrapped.values()) == {"run"}
