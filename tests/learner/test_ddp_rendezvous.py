"""The ranks meet only on private networks (issue 36): torch's rendezvous store authenticates no one and unpickles
what it is sent, so a MASTER_ADDR reachable from the internet is refused unless a setting allows it."""

from __future__ import annotations

import pytest
import torch

from learner.ddp import RendezvousRefused, check_rendezvous_address, join


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost", "::1", "10.231.0.2", "172.20.1.1", "192.168.1.10", "fd00::5", "fe80::1%lo"]
)
def test_private_addresses_are_accepted(host):
    check_rendezvous_address(host)


@pytest.mark.parametrize("host", ["8.8.8.8", "2001:4860:4860::8888", "100.64.0.1", "172.32.0.1", "::ffff:8.8.8.8"])
def test_public_addresses_are_refused_unless_allowed(host):
    with pytest.raises(RendezvousRefused, match="ddp_allow_public_rendezvous"):
        check_rendezvous_address(host)
    check_rendezvous_address(host, allow_public=True)


def test_a_name_that_does_not_resolve_is_left_to_torch():
    check_rendezvous_address("no-such-host.invalid")


def test_join_refuses_a_public_master_addr_before_it_touches_the_network(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "8.8.8.8")
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RendezvousRefused):
        join(torch.device("cpu"), 5)


def test_the_setting_exists_and_is_off_by_default():
    from learner.settings import LearnerSettings

    assert LearnerSettings().ddp_allow_public_rendezvous is False
