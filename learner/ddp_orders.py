"""Rank 0's orders to the other ranks under torchrun: wait, train on these groups, or stop.

Rank 0 is the one consumer of the group stream: it reads a step's groups (`groups_per_step` per rank), drops
stale and already-applied ones, and hands every rank its share in one broadcast; then each rank trains on its
share and DDP averages the gradients. While it waits for groups it sends `wait` at least every `block_ms`, so the
others' wait is a sequence of short collectives, each bounded by `learner.ddp_timeout_s`: a dead rank 0 is noticed.

The groups travel as the contract's JSON (`RolloutGroup`, validated again on arrival), not as stream entry ids for
each rank to XRANGE: the other ranks then need no Redis (another host, no password), and they train on exactly the
groups rank 0 checked — an entry trimmed from the stream meanwhile, or changed, cannot make the ranks differ.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from learner.ddp import Ranks
from learner.ddp_comm import broadcast_bytes
from slca.contracts import RolloutGroup
from slca.contracts.wire import validate

Kind = Literal["wait", "step", "stop"]


@dataclass
class Order:
    kind: Kind
    groups: list[RolloutGroup] = field(default_factory=list)
    """This rank's share of the step (`step` only)."""


def shares(groups: list[RolloutGroup], world: int) -> list[list[RolloutGroup]]:
    """Rank r trains the r-th contiguous run of the step's groups (equal runs: rank 0 collects world × per rank)."""
    per = -(-len(groups) // world)
    return [groups[r * per : (r + 1) * per] for r in range(world)]


class Orders:
    """Both ends: rank 0 calls `wait`, `step` and `stop`; the others call `receive`."""

    def __init__(self, ranks: Ranks, device):
        self.ranks = ranks
        self.device = device

    def wait(self) -> None:
        self._send({"kind": "wait"})

    def step(self, groups: list[RolloutGroup]) -> list[RolloutGroup]:
        """Hand out the step's groups; returns rank 0's own share."""
        split = shares(groups, self.ranks.world)
        self._send({"kind": "step", "shares": [[g.model_dump(mode="json") for g in s] for s in split]})
        return split[0]

    def stop(self) -> None:
        self._send({"kind": "stop"})

    def receive(self) -> Order:
        message = json.loads(broadcast_bytes(None, self.device))
        if message["kind"] != "step":
            return Order(message["kind"])
        return Order("step", [validate(RolloutGroup, g) for g in message["shares"][self.ranks.rank]])

    def _send(self, message: dict) -> None:
        broadcast_bytes(json.dumps(message).encode(), self.device)
