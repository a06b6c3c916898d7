"""Hosts for tests of the system across machines: Linux network namespaces that the test makes and removes.

`Network(root)` is a context manager. On entry it removes namespaces a crashed earlier run left behind (their
owner pid is gone), picks a private /24 (10.231.<x>.0/24, not one the root namespace uses) and makes a "switch"
namespace holding a bridge; `add(name)` makes one host: a namespace with loopback up and one veth pair whose
other end is a port of that bridge, an address of the subnet, and a directory of its own under `root`
(`host.var`: its data dir, so hosts share no state through the disk). Traffic between hosts stays on the bridge:
nothing touches the root namespace's interfaces or routes. On exit (also after a failure) every process in every
namespace is SIGKILLed and the namespaces are deleted.

Processes: `run(host, argv, env, log)` starts `ip netns exec <ns> argv` in its own session, cwd `host.dir`, output in
`host.dir/<log>.log`, with the test's environment minus `SLCA_*` and torchrun's variables (a host is configured
only by what the test passes). `kill(host)` SIGKILLs every process in the host's namespace (`ip netns pids`), as a
host that loses power; `signal(pids, sig)` and `children(pid)` reach single processes. `call(host, fn)` runs `fn`
on a thread that lives in the host's namespace (its sockets are that host's): how the test itself acts as a client.

Needs root, `ip` (iproute2) and a kernel that lets us make namespaces; `Network` skips the test (with the reason)
where any is missing.
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import re
import shutil
import signal as signals
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TypeVar

import pytest

from ops.common.up_state import pid_alive
from tests.support.processes import REPO

T = TypeVar("T")
PREFIX = "slcat"
"""Namespace names are `<PREFIX><owner pid>-<host>`: the owner pid tells a live run's namespaces from stale ones."""
CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/var/run/netns")
DROPPED_ENV = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME")
IFACE = "eth0"
"""The name of every host's one interface (inside its namespace), e.g. for GLOO_SOCKET_IFNAME."""


@dataclass
class Host:
    name: str
    ns: str
    ip: str
    dir: Path
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def var(self) -> Path:
        """The host's own data dir (`common.data_dir`)."""
        return self.dir / "var"

    def log(self, name: str) -> Path:
        return self.dir / f"{name}.log"

    def tail(self, name: str, chars: int = 3000) -> str:
        path = self.log(name)
        return f"--- {self.name}/{name}.log ---\n" + (
            path.read_text(errors="replace")[-chars:] if path.exists() else ""
        )


class Network:
    def __init__(self, root: Path, prefix: str = PREFIX):
        self.root = Path(root)
        self.prefix = prefix
        self.owner = f"{prefix}{os.getpid()}"
        self.hosts: dict[str, Host] = {}
        self.switch = f"{self.owner}-switch"
        self.subnet: ipaddress.IPv4Network | None = None
        self._ports = 0
        self._threads: dict[str, ThreadPoolExecutor] = {}
        self._made: list[str] = []

    # --- lifetime ---

    def __enter__(self) -> "Network":
        require_namespaces()
        remove_stale(self.prefix)
        self.subnet = pick_subnet()
        try:
            self._netns_add(self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for executor in self._threads.values():
            executor.shutdown(wait=False, cancel_futures=True)
        for name in reversed(list(self.hosts)):  # the last added first: clients go before the servers they use
            self.kill(name, timeout=20)
        for ns in reversed(self._made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self._made.clear()

    def _netns_add(self, ns: str) -> None:
        _ip("netns", "add", ns)
        self._made.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")

    # --- hosts ---

    def add(self, name: str, last_octet: int | None = None) -> Host:
        """A new host `name` on the bridge, at `<subnet>.<last_octet>` (default: the next free one from .10)."""
        if name in self.hosts:
            raise ValueError(f"host {name!r} exists")
        self._ports += 1
        octet = last_octet or 9 + self._ports
        ip = str(self.subnet.network_address + octet)
        if any(h.ip == ip for h in self.hosts.values()):
            raise ValueError(f"address {ip} is taken")
        ns = f"{self.owner}-{name}"
        port = f"p{self._ports}"  # the bridge's end, in the switch namespace (interface names: 15 characters)
        self._netns_add(ns)
        _ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", IFACE, "netns", ns)
        _ip("-n", self.switch, "link", "set", port, "master", "br0")
        _ip("-n", self.switch, "link", "set", port, "up")
        _ip("-n", ns, "addr", "add", f"{ip}/{self.subnet.prefixlen}", "dev", IFACE)
        _ip("-n", ns, "link", "set", IFACE, "up")
        host = Host(name, ns, ip, self.root / name)
        host.var.mkdir(parents=True, exist_ok=True)
        self.hosts[name] = host
        return host

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    # --- processes ---

    def run(
        self,
        host: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        log: str | None = None,
        stdin: bytes | None = None,
    ) -> subprocess.Popen:
        """Start `argv` inside the host's namespace (own session; `ip netns exec` execs, so the pid is argv's)."""
        h = self.hosts[host]
        base = {k: v for k, v in os.environ.items() if not k.startswith("SLCA_") and k not in DROPPED_ENV}
        full_env = {**base, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **(env or {})}
        out = open(h.log(log or Path(argv[0]).name), "ab")
        proc = subprocess.Popen(
            ["ip", "netns", "exec", h.ns, *argv],
            cwd=h.dir,
            env=full_env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()  # the child holds its own descriptor
        if stdin is not None:
            proc.stdin.write(stdin)
            proc.stdin.close()
        h.procs.append(proc)
        return proc

    def pids(self, host: str) -> list[int]:
        """Every process in the host's namespace now."""
        out = subprocess.run(["ip", "netns", "pids", self.hosts[host].ns], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def kill(self, host: str, sig: int = signals.SIGKILL, timeout: float = 30.0) -> list[int]:
        """Send `sig` to every process in the host's namespace until none is left (SIGKILL: a host that lost
        power; nothing runs its shutdown). Returns the pids it signalled."""
        signalled: set[int] = set()
        deadline = time.monotonic() + timeout
        while pids := self.pids(host):
            signalled.update(self.signal(pids, sig))
            if time.monotonic() > deadline:
                raise TimeoutError(f"processes {pids} of host {host} still alive after {timeout:g}s")
            time.sleep(0.05)
        for proc in self.hosts[host].procs:
            if proc.poll() is None:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        return sorted(signalled)

    @staticmethod
    def signal(pids: list[int], sig: int) -> list[int]:
        """Send `sig` to each pid that still exists; returns those."""
        sent = []
        for pid in pids:
            try:
                os.kill(pid, sig)
                sent.append(pid)
            except ProcessLookupError:
                pass
        return sent

    # --- the test as a client on a host ---

    def call(self, host: str, fn: Callable[..., T], *args, timeout: float = 120.0, **kwargs) -> T:
        """`fn(*args, **kwargs)` on this host's thread, which lives in its namespace: every socket it opens is the
        host's. One thread per host, so objects that keep connections (a Redis client) stay on it."""
        h = self.hosts[host]
        if host not in self._threads:
            self._threads[host] = ThreadPoolExecutor(1, f"netns-{host}", initializer=_enter, initargs=(h.ns,))
        return self._threads[host].submit(fn, *args, **kwargs).result(timeout=timeout)


def children(pid: int) -> list[int]:
    """The pids whose parent is `pid` (read from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # the command name is in parentheses and may hold spaces: the parent pid is the 2nd field after it
        if int(text.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def require_namespaces() -> None:
    """Skip the calling test, with the reason, where this machine cannot make network namespaces."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("network namespaces need root (ip netns add)")
    if shutil.which("ip") is None:
        pytest.skip("no `ip` command (iproute2)")
    probe = f"{PREFIX}{os.getpid()}-probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make a network namespace: {made.stderr.strip()}")
    try:
        ran = subprocess.run(["ip", "netns", "exec", probe, "true"], capture_output=True, text=True)
        if ran.returncode != 0:
            pytest.skip(f"cannot run a process in a network namespace: {ran.stderr.strip()}")
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)


def remove_stale(prefix: str = PREFIX) -> list[str]:
    """Delete namespaces `<prefix><pid>-*` whose owner pid no longer runs (a run that was killed before its
    cleanup), killing whatever still runs in them. Returns their names."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    stale = []
    for line in listed.splitlines():
        name = line.split()[0] if line.strip() else ""
        m = re.fullmatch(rf"{re.escape(prefix)}(\d+)-.+", name)
        if not m or pid_alive(int(m.group(1))):
            continue
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split()
        Network.signal([int(p) for p in pids], signals.SIGKILL)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
        stale.append(name)
    return stale


def pick_subnet() -> ipaddress.IPv4Network:
    """10.231.<x>.0/24 with x from our pid, moved on past any the root namespace has an address or route in (our
    bridge is isolated, so only a clash there could confuse a reader of the logs or a tool run by hand)."""
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    used += subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
    x = os.getpid() % 250 + 1
    for _ in range(250):
        if f"10.231.{x}." not in used:
            return ipaddress.IPv4Network(f"10.231.{x}.0/24")
        x = x % 250 + 1
    raise RuntimeError("no free 10.231.<x>.0/24 subnet")


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


_libc = ctypes.CDLL(None, use_errno=True)


def _enter(ns: str) -> None:
    """Move the calling thread (only it) into the namespace `ns` (setns(2) on its /var/run/netns file)."""
    fd = os.open(NETNS_DIR / ns, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {ns}: {os.strerror(err)}")
    finally:
        os.close(fd)
