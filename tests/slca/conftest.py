"""Fixtures of the shared-package tests."""

import pytest

from slca.weights import HttpTransport
from tests.support.weights import WEIGHTS_KEY


@pytest.fixture
def learner_http(tmp_path):
    """The learner's side on "another host": its versions directory, served on a free port of this machine."""
    transport = HttpTransport(tmp_path / "learner-host" / "weights", bind="127.0.0.1:0", key=WEIGHTS_KEY)
    transport.connect()
    try:
        yield transport
    finally:
        transport.close()
