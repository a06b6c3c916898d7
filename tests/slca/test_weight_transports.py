"""The weight transport registry (slca/weights/transports.py): a server's transport is looked up by name, an unknown
name is refused listing the registered ones, and a transport registered from any module is what `for_server` builds
for its name, with the server's options."""

from __future__ import annotations

from pathlib import Path

import pytest

from slca.weights import (
    TRANSPORTS,
    AutoTransport,
    DiskTransport,
    HttpTransport,
    ServerOptions,
    UnknownTransportError,
    for_server,
    register_transport,
    transport_names,
)


def test_the_shipped_transports_are_registered_and_built_by_name(tmp_path):
    assert {"auto", "disk", "http"} <= set(transport_names())
    assert isinstance(for_server("disk"), DiskTransport)
    http = for_server("http", tmp_path / "mirror", "key", timeout_s=7, max_bytes=9)
    assert isinstance(http, HttpTransport) and (http.timeout_s, http.max_bytes) == (7, 9)
    assert isinstance(for_server("auto", tmp_path / "mirror"), AutoTransport)


def test_an_unknown_transport_is_refused_listing_the_registered_ones():
    with pytest.raises(UnknownTransportError, match=r"unknown weight transport 'carrier-pigeon'; registered: auto, "):
        for_server("carrier-pigeon")


class _Toy:
    name = "toy"

    def __init__(self, options: ServerOptions) -> None:
        self.options = options


@pytest.fixture
def toy_transport():
    register_transport("toy")(_Toy)
    yield
    TRANSPORTS.pop("toy")


def test_a_registered_transport_is_built_by_name_with_the_servers_options(toy_transport, tmp_path):
    toy = for_server("toy", tmp_path, "the key", timeout_s=3)
    assert isinstance(toy, _Toy) and toy.options == ServerOptions(Path(tmp_path), "the key", 3.0, 64 << 30, None)
    with pytest.raises(ValueError, match="registered twice"):
        register_transport("toy")(_Toy)


def test_the_learner_side_is_looked_up_by_the_same_name(tmp_path):
    from slca.weights import LEARNER_TRANSPORTS, LearnerOptions, for_learner

    assert {"auto", "disk", "http"} <= set(LEARNER_TRANSPORTS)
    assert isinstance(for_learner("disk", LearnerOptions(tmp_path)), DiskTransport)
    http = for_learner("http", LearnerOptions(tmp_path, bind="127.0.0.1:0", url="http://learner:1", key="k"))
    assert isinstance(http, HttpTransport) and (http.weights_dir, http.bind, http.key) == (tmp_path, "127.0.0.1:0", "k")
    assert isinstance(for_learner("auto", LearnerOptions(tmp_path)), DiskTransport)
    with pytest.raises(UnknownTransportError, match="unknown weight transport 'pigeon'"):
        for_learner("pigeon", LearnerOptions(tmp_path))


def test_a_transport_with_no_learner_side_is_refused_naming_those_with_one(toy_transport, tmp_path):
    from slca.weights import LearnerOptions, for_learner

    with pytest.raises(UnknownTransportError, match="'toy' has no learner side; with one: auto, disk, http"):
        for_learner("toy", LearnerOptions(tmp_path))
