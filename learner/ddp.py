"""The learner's ranks under torchrun and joining their process group (gloo on CPU, NCCL on GPU).

torchrun gives every rank RANK, WORLD_SIZE and the rendezvous address MASTER_ADDR/MASTER_PORT (the `--master-addr`
of `torchrun --nnodes N --node-rank i`); nothing here assumes one machine. Rank 0 is the one that reads groups,
checkpoints, acknowledges and publishes (`learner.loop`); the others train on what it hands them
(`learner.follower`).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
from dataclasses import dataclass
from datetime import timedelta

import torch

log = logging.getLogger("slca.learner")

GLOO_IFNAME = "GLOO_SOCKET_IFNAME"
PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "fc00::/7", "fe80::/10")
)
"""Where a rendezvous may be (loopback aside): RFC 1918, IPv6 unique-local, link-local."""


class RendezvousRefused(RuntimeError):
    """MASTER_ADDR is reachable from outside a private network (`learner.ddp_allow_public_rendezvous` off)."""


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


def join(device: torch.device, timeout_s: int, allow_public_rendezvous: bool = False) -> None:
    """Join the process group once. `timeout_s` bounds every collective: a rank whose peer died (or whose network
    went away) raises after it instead of waiting for ever, so torchrun can restart the group. A MASTER_ADDR
    outside private networks is refused (`check_rendezvous_address`) unless `allow_public_rendezvous`."""
    import torch.distributed as dist

    if dist.is_initialized():
        return
    if os.environ.get("MASTER_ADDR"):
        check_rendezvous_address(os.environ["MASTER_ADDR"], allow_public_rendezvous)
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


def check_rendezvous_address(host: str, allow_public: bool = False) -> None:
    """RendezvousRefused when `host` resolves to an address outside loopback and private networks: torch's TCP
    store (where rank 0 binds it) and the c10d rendezvous authenticate no one and unpickle what they are sent, so
    whoever reaches that port runs code in every rank. A name that does not resolve is left to torch."""
    if allow_public:
        return
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return
    public = sorted({info[4][0] for info in infos if not _private(info[4][0])})
    if public:
        raise RendezvousRefused(
            f"MASTER_ADDR {host!r} is a public address ({', '.join(public)}): the torch.distributed rendezvous is "
            'unauthenticated and unpickles what it receives. Put it on a private interface (README "Learner '
            'ranks"), or set learner.ddp_allow_public_rendezvous=true behind a firewall of your own'
        )


def _private(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])  # an IPv6 scope id (fe80::1%eth0) is no part of the address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or any(ip in net for net in PRIVATE_NETWORKS)


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
