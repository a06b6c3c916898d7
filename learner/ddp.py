"""The learner's ranks under torchrun and joining their process group (gloo on CPU, NCCL on GPU).

torchrun gives every rank RANK, WORLD_SIZE and the rendezvous address MASTER_ADDR/MASTER_PORT (the `--master-addr`
of `torchrun --nnodes N --node-rank i`); nothing here assumes one machine. Rank 0 is the one that reads groups,
checkpoints, acknowledges and publishes (`learner.loop`); the others train on what it hands them
(`learner.follower`).
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from datetime import timedelta

import torch

log = logging.getLogger("slca.learner")

GLOO_IFNAME = "GLOO_SOCKET_IFNAME"


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world: int = 1

    @classmethod
    def from_env(cls) -> Ranks:
        """torchrun's RANK and WORLD_SIZE; one process without them."""
        return cls(int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1")))

    @property
    def distributed(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def join(device: torch.device, timeout_s: int) -> None:
    """Join the process group once. `timeout_s` bounds every collective: a rank whose peer died (or whose network
    went away) raises after it instead of waiting for ever, so torchrun can restart the group."""
    import torch.distributed as dist

    if dist.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    if backend == "gloo":
        choose_gloo_interface()
    timeout = timedelta(seconds=timeout_s)
    store = attempt_store(timeout)
    if store is None:
        dist.init_process_group(backend=backend, timeout=timeout)
    else:
        ranks = Ranks.from_env()
        dist.init_process_group(backend=backend, store=store, rank=ranks.rank, world_size=ranks.world, timeout=timeout)


def leave() -> None:
    """Leave the process group at the end of `slca learn`. First a moment without the GIL: gloo's worker threads may
    still be dropping the last reference to finished works of DDP's own collectives, which needs the GIL, while the
    group's destructor joins those threads holding it (`learner.ddp_comm` keeps its own works for that reason)."""
    import time

    import torch.distributed as dist

    time.sleep(0.2)
    dist.destroy_process_group()


def attempt_store(timeout: timedelta):
    """Under torchrun on one host, the agent's store with a prefix of its own per start of the ranks; None elsewhere
    (env://: where rank 0 hosts a new store each time, or the agent's store as torch uses it).

    torchrun's static rendezvous (`--master-addr`) keeps one store across the restarts of `--max-restarts`, and the
    process group writes the same keys in it each time: a restarted rank then read the dead ranks' gloo addresses
    and failed to connect (measured, torch 2.13). The restart count (TORCHELASTIC_RESTART_COUNT) keeps each start's
    keys apart — but only one agent's count is sure to be the same on every rank: across hosts an agent that restarts
    its ranks because another host's did does not count it. There, use the c10d rendezvous with
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (a fresh store per round; README "Learner ranks")."""
    one_agent = os.environ.get("LOCAL_WORLD_SIZE") == os.environ.get("WORLD_SIZE")
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True" or not one_agent:
        return None
    from torch.distributed import PrefixStore, TCPStore

    agent = TCPStore(
        host_name=os.environ["MASTER_ADDR"],
        port=int(os.environ["MASTER_PORT"]),
        world_size=Ranks.from_env().world,
        is_master=False,
        timeout=timeout,
    )
    return PrefixStore(f"slca/attempt_{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", agent)


def choose_gloo_interface() -> None:
    """Gloo advertises the address its host name resolves to, which on many hosts is 127.0.1.1 (Debian's
    /etc/hosts) or an address of no interface in a network namespace: peers on other hosts then cannot connect.
    Unless GLOO_SOCKET_IFNAME is set, bind gloo to the interface whose address routes to MASTER_ADDR — the
    one every host can reach rank 0 on (`lo` when the rendezvous is on this machine)."""
    if os.environ.get(GLOO_IFNAME) or not os.environ.get("MASTER_ADDR"):
        return
    name = interface_towards(os.environ["MASTER_ADDR"], int(os.environ.get("MASTER_PORT") or 9))
    if name:
        os.environ[GLOO_IFNAME] = name
        log.info("learner: gloo binds to %s, the interface towards MASTER_ADDR %s", name, os.environ["MASTER_ADDR"])


def interface_towards(host: str, port: int) -> str | None:
    """The name of the local IPv4 interface the kernel would send to `host` from; None when unknown (IPv6, no
    route): gloo's own choice then stands."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, port))  # UDP: picks the route and the source address, sends nothing
            local = probe.getsockname()[0]
    except OSError:
        return None
    for _index, name in socket.if_nameindex():
        if _ipv4_of(name) == local:
            return name
    return None


def _ipv4_of(name: str) -> str | None:
    import fcntl
    import struct

    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            reply = fcntl.ioctl(s.fileno(), siocgifaddr, struct.pack("256s", name.encode()[:15]))
        except OSError:  # no IPv4 address on it
            return None
    return socket.inet_ntoa(reply[20:24])
