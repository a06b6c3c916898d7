"""`slca sft` run in this process installs its stop handling (`slca.early_stop.stop_once`): each test gets the
test process's own SIGTERM/SIGINT handlers back."""

import signal

import pytest


@pytest.fixture(autouse=True)
def _signal_handlers_restored():
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)
