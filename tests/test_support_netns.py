"""The network-namespace hosts of tests/support/netns.py: hosts reach each other over the bridge only, processes die
with their host, nothing is left behind, and a crashed run's namespaces are removed by the next one."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request

from tests.support.netns import PREFIX, Network, remove_stale, require_namespaces
from tests.support.wait import wait_for


def namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in listed.splitlines() if line.strip()}


def root_links() -> set[str]:
    return set(subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.split("\n"))


def test_hosts_reach_each_other_over_the_bridge_and_leave_nothing_behind(tmp_path):
    require_namespaces()
    links = root_links()
    with Network(tmp_path) as net:
        a, b = net.add("a"), net.add("b")
        assert a.ip != b.ip and a.ip.startswith("10.231.") and a.var.is_dir() and a.var != b.var
        server = net.run("a", [sys.executable, "-m", "http.server", "8000", "--bind", a.ip], log="http")

        def get(url: str) -> int:
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    return r.status
            except OSError:
                return 0

        assert wait_for(lambda: net.call("b", get, f"http://{a.ip}:8000/"), 20, "a's server from b") == 200
        assert net.pids("a") == [server.pid]  # `ip netns exec` execs: the pid is the server's
        assert root_links() == links  # no interface of ours in the root namespace
        assert net.kill("a") == [server.pid] and server.returncode == -9 and net.pids("a") == []
        owned = {ns for ns in namespaces() if ns.startswith(net.owner + "-")}
        assert owned == {f"{net.owner}-switch", f"{net.owner}-a", f"{net.owner}-b"}
    assert not {ns for ns in namespaces() if ns.startswith(net.owner + "-")}


def test_a_crashed_runs_namespaces_are_removed_and_a_live_ones_kept():
    require_namespaces()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that no longer runs: the owner of a run that died before its cleanup
    stale, live = f"{PREFIX}{gone.pid}-worker", f"{PREFIX}{os.getpid()}-kept"
    for ns in (stale, live):
        subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        assert stale in remove_stale()
        assert stale not in namespaces() and live in namespaces()
    finally:
        for ns in (stale, live):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
