"""The whole system across machines (issue 23 items 4 and 5): every component on a host of its own — a Linux network
namespace made by the test (tests/support/netns.py), one bridge between them, no shared data dir — configured only by
addresses: Redis (with a password) at the redis host's IP, the weights at learner0's `weights.bind`.

Hosts: `redis` (redis-server, password, bound to its IP), `serve1`/`serve2` (two `slca serve` replicas, hf engine,
`weights.transport=http`), `worker` (`slca worker` + `slca assembler`), `learner0`/`learner1` (one torchrun
node each, one rank each, gloo over the bridge), `client` (the test itself, on a thread inside that namespace).

What it shows, in order:
1. agent runs sent alternately to the two replicas (client-side round robin) are served by both and recorded from
   both; the worker host scores them into groups; a step of the two-rank learner is published by rank 0 (rank 1 in
   the step: a DDP step cannot finish without every rank) and both replicas fetch and load that version over HTTP;
2. the worker host disappears mid-task (its Celery pool process frozen with a task in hand, then every process of
   the host SIGKILLed) and learner rank 1 is SIGKILLed; a new worker host starts, torchrun brings rank 1 back;
3. the system recovers: the frozen task comes back after the (lowered) visibility timeout and its trajectories
   make their groups exactly once; later versions are published and loaded by both replicas;
4. nothing is lost or applied twice: every recorded trajectory is in exactly one group, every group in the stream
   was applied once (the learner's checkpoints' consumed ids), nothing pending, no dead letter.

Run it: `.venv/bin/pytest -m slow tests/ops/run/test_netns_cluster.py` (root: `ip netns add`; skipped elsewhere).
"""

from __future__ import annotations

import json
import re
import secrets
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from slca.contracts import RolloutGroup, Streams, WeightManifest, decode_entry
from slca.contracts.wire import load_json
from tests.support.netns import IFACE, Network, children, cmdline
from tests.support.wait import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(480)]

REDIS_PORT, SERVE_PORT, WEIGHTS_PORT, RDZV_PORT = 6379, 8000, 9200, 29400
"""Each host is a fresh namespace: every port is free there."""
GROUP = 4
"""Rollouts per agent run (= per group): with 4, all members of a group earn the same reward in a few % of groups (the
random model's choices, ALARM), and a step changes the weights unless both its groups do (else `published_after`
sends two more runs)."""
REPLICAS = ("serve1", "serve2")
ADDRESSES = {"redis": 10, "serve1": 11, "serve2": 12, "worker": 13, "worker2": 14, "learner0": 21, "learner1": 22}
"""Last octets. learner0's address must sort before learner1's: torchrun's c10d rendezvous numbers the nodes in the
order of their addresses, and rank 0 (the one that publishes, on `weights.bind`) must be learner0."""
CLIENT = 30
STREAMS = Streams("slca")

WORKER_SETTINGS = {
    "SLCA_WORKERS__GROUP_SIZE": str(GROUP),
    "SLCA_WORKERS__JUDGE": "rule",
    # a vanished worker's task comes back after the visibility timeout + one restore sweep (default 300 s + 10 s);
    # the group timeout must outlast that (workers/settings.py refuses settings where it does not)
    "SLCA_WORKERS__VISIBILITY_TIMEOUT_S": "8",
    "SLCA_WORKERS__RESTORE_INTERVAL_S": "1",
    "SLCA_WORKERS__CLAIM_IDLE_MS": "5000",
    "SLCA_WORKERS__GROUP_TIMEOUT_S": "40",
    "SLCA_WORKERS__CLAIM_STALE_S": "5",
    "SLCA_WORKERS__SWEEP_INTERVAL_S": "0.5",
    "SLCA_WORKERS__READ_BLOCK_MS": "100",
    # keep applied groups in the stream: the test compares them with what the learner consumed
    "SLCA_WORKERS__TRIM_CONSUMED_GROUPS": "false",
}
LEARNER_SETTINGS = {
    "SLCA_LEARNER__PRECISION": "fp32",
    "SLCA_LEARNER__ESTIMATOR": "grpo",  # the advantage on every generated token (ALARM)
    "SLCA_LEARNER__BLOCK_MS": "200",
    "SLCA_LEARNER__LR": "1e-4",
    "SLCA_LEARNER__MAX_STALENESS": "1000",  # no group dropped for its age: every one must be applied
    # one group per rank a step, none screened out (the random model never succeeds): tests.support.learner.MECHANICS
    "SLCA_LEARNER__GROUPS_PER_STEP": "1",
    "SLCA_LEARNER__SCREEN_SUCCESS_VARIANCE": "false",
}
SERVE_SETTINGS = {
    "SLCA_SERVE__ENGINE": "hf",
    "SLCA_SERVE__PORT": str(SERVE_PORT),
    "SLCA_SERVE__TORCH_THREADS": "1",
    "SLCA_SERVE__MAX_MODEL_LEN": "1024",
    "SLCA_WEIGHTS__TRANSPORT": "http",  # never the learner's directory, though this machine could read it
}

ALARM = {
    "type": "function",
    "function": {
        "name": "set_alarm",
        "description": "Set an alarm.",
        "parameters": {
            "type": "object",
            "properties": {
                "day": {"type": "string", "enum": ["mon", "tue"]},
                "hour": {"type": "string", "enum": ["6", "7"]},
                "tone": {"type": "string", "enum": ["bell", "beep"]},
            },
            "required": ["day", "hour", "tone"],
            "additionalProperties": False,
        },
        "x-response-schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    },
}
"""A forced call of three two-way choices, against one gold call: the random tiny model picks each at random, so the
members of a group earn different execution rewards (how many values match) and, with `learner.estimator=grpo`,
every generated token of the unconstrained second turn carries an advantage (the forced call's own tokens are
constrained, hence not trained: a step whose groups had only those would change no weight and publish nothing)."""
GOLD = {"name": "set_alarm", "arguments": {"day": "tue", "hour": "7", "tone": "bell"}}


def run_body(i: int) -> dict:
    return {
        "messages": [{"role": "user", "content": "Wake me on Tuesday at 7 with the bell."}],
        "tools": [ALARM],
        "tool_choice": {"type": "function", "function": {"name": "set_alarm"}},
        "task_id": f"alarm-{i}",
        "ground_truth": {"calls": [GOLD]},
        "n": GROUP,
        "temperature": 1.0,
        "max_tokens": 96,  # the forced call takes up to ~70 tokens (the random model spells it in short pieces)
        "max_turns": 2,
        "record": True,
    }


class Cluster:
    """The hosts, their processes, and the test's client on the `client` host."""

    def __init__(self, net: Network, model: Path):
        self.net = net
        self.model = model
        self.password = secrets.token_urlsafe(18)
        self.weights_key = secrets.token_urlsafe(18)
        self.record_key = secrets.token_urlsafe(18)
        for name in ("redis", *REPLICAS, "worker", "learner0", "learner1"):
            net.add(name, ADDRESSES[name])
        net.add("client", CLIENT)
        self.redis_url = f"redis://:{self.password}@{net['redis'].ip}:{REDIS_PORT}/0"
        self.weights_url = f"http://{net['learner0'].ip}:{WEIGHTS_PORT}"
        self.agents: dict[str, object] = {}
        self.workers: dict[str, object] = {}
        self.runs = 0
        """Agent runs sent so far (each makes one group)."""
        self.recorded: dict[str, set[str]] = {}
        """replica → the trajectory ids it returned, recorded."""
        self._redis = None

    # --- starting hosts ---

    def env(self, host: str, **extra: str) -> dict[str, str]:
        h = self.net[host]
        return {
            "SLCA_REDIS_URL": self.redis_url,
            "SLCA_DATA_DIR": str(h.var),
            "SLCA_MODEL": str(self.model),
            "SLCA_WEIGHTS__KEY": self.weights_key,
            "SLCA_LOG_LEVEL": "INFO",
            "OMP_NUM_THREADS": "1",
            **extra,
        }

    def start_redis(self) -> None:
        h = self.net["redis"]
        conf = "\n".join(
            [
                f"port {REDIS_PORT}",
                f"bind {h.ip}",
                f"requirepass {self.password}",
                f'dir "{h.var}"',
                "appendonly yes",
                "appendfsync everysec",
                'save ""',
                "daemonize no",
                f'logfile "{h.log("redis")}"',
            ]
        )
        self.net.run("redis", ["redis-server", "-"], log="redis-stdout", stdin=conf.encode() + b"\n")

    def start_serve(self, host: str) -> None:
        extra = {**SERVE_SETTINGS, "SLCA_SERVE__HOST": self.net[host].ip, "SLCA_RECORD_KEY": self.record_key}
        extra["SLCA_SERVE__REPLICA_ID"] = host  # on every trajectory it records (`Trajectory.replica`)
        self.net.run(host, [sys.executable, "-m", "slca", "serve"], self.env(host, **extra), log="serve")

    def start_worker_host(self, host: str) -> None:
        env = self.env(host, **WORKER_SETTINGS)
        argv = [sys.executable, "-m", "slca", "worker", "--concurrency", "1", "--name", f"score-{host}@%h"]
        self.workers[host] = self.net.run(host, argv, env, log="worker")
        self.net.run(host, [sys.executable, "-m", "slca", "assembler"], env, log="assembler")

    def start_learner(self, rank: int) -> None:
        host = f"learner{rank}"
        extra = {
            **LEARNER_SETTINGS,
            "GLOO_SOCKET_IFNAME": IFACE,  # gloo's own choice: the address the host name resolves to (127.0.0.1 here)
            # the ranks of each round get a fresh store of their own (on rank 0's node) instead of sharing the
            # rendezvous store, where the last round's keys remain: a restarted rank read the dead rank 0's gloo
            # address from it and failed to connect (measured here, torch 2.13, with --max-restarts 1 spent on it)
            "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        }
        if rank == 0:
            extra["SLCA_WEIGHTS__BIND"] = f"{self.net[host].ip}:{WEIGHTS_PORT}"
        argv = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "2",
            "--nproc-per-node",
            "1",
            "--max-restarts",
            "1",
            # c10d, not the static --master-addr rendezvous: with static, the surviving node's torchrun does not
            # restart its rank when the other node's does (pytorch#146371), and the restarted rank, reading the old
            # round's keys from the one store, connected to the dead rank 0 and failed (measured here)
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            f"{self.net['learner0'].ip}:{RDZV_PORT}",
            "--rdzv-id",
            "slca-netns",
            "--rdzv-conf",
            f"is_host={int(rank == 0)}",
            "--local-addr",
            self.net[host].ip,  # the address the other node reaches this one at (not the host name's 127.0.0.1)
            "-m",
            "slca",
            "learn",
        ]
        self.agents[host] = self.net.run(host, argv, self.env(host, **extra), log="learner")

    def ranks(self, host: str) -> list[int]:
        """The learner rank processes torchrun runs on this host (its children)."""
        return [p for p in children(self.agents[host].pid) if "slca" in cmdline(p)]

    # --- the client ---

    def redis(self, fn):
        """`fn(client)` with one Redis client that lives on the client host."""

        def on_client():
            import redis

            if self._redis is None:
                self._redis = redis.Redis.from_url(self.redis_url, socket_timeout=10)
            return fn(self._redis)

        return self.net.call("client", on_client)

    def http(self, host: str, path: str, body: dict | None = None, timeout: float = 120.0):
        url = f"http://{self.net[host].ip}:{SERVE_PORT}{path}"

        def on_client():
            data = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.record_key}"}
            req = urllib.request.Request(url, data, headers if body is not None else {})
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read()) if "json" in r.headers.get("Content-Type", "") else r.read()

        return self.net.call("client", on_client, timeout=timeout + 10)

    def ready_version(self, host: str) -> int | None:
        try:
            status, body = self.http(host, "/readyz", timeout=5)
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return None
        return body["policy_version"] if status == 200 else None

    def agent_runs(self, count: int) -> dict[str, list[str]]:
        """`count` agent runs of G rollouts, each to the next replica (client-side round robin over all the test
        sends); the trajectory ids each replica returned, all recorded (also kept in `recorded`, per replica)."""
        sent: dict[str, list[str]] = {r: [] for r in REPLICAS}
        for _ in range(count):
            replica = REPLICAS[self.runs % len(REPLICAS)]
            status, body = self.http(replica, "/v1/agent/runs", run_body(self.runs))
            assert status == 200 and len(body["runs"]) == GROUP, body
            assert all(run["recorded"] for run in body["runs"]), body
            sent[replica] += [run["trajectory_id"] for run in body["runs"]]
            self.runs += 1
        for replica, ids in sent.items():
            self.recorded.setdefault(replica, set()).update(ids)
        return sent

    def all_recorded(self) -> set[str]:
        return set().union(*self.recorded.values())

    # --- what Redis holds ---

    def groups(self) -> list[tuple[bytes, RolloutGroup]]:
        return self.redis(lambda r: [(eid, decode_entry(RolloutGroup, f)) for eid, f in r.xrange(STREAMS.groups)])

    def grouped(self) -> dict[str, list[str]]:
        """trajectory id → the ids of the groups holding it (a list, so that a second group would show)."""
        out: dict[str, list[str]] = {}
        for _, g in self.groups():
            for t in g.trajectories:
                out.setdefault(t.id, []).append(g.group_id)
        return out

    def dead(self) -> list[dict]:
        return self.redis(lambda r: [f for _, f in r.xrange(STREAMS.dead)])

    def latest(self) -> WeightManifest | None:
        raw = self.redis(lambda r: r.get(STREAMS.weights_latest))
        return load_json(WeightManifest, raw) if raw else None

    def learner_backlog(self) -> tuple[int, int]:
        """(groups the learner read and has not acknowledged, groups it has not read yet)."""

        def read(r):
            for g in r.xinfo_groups(STREAMS.groups):
                if g["name"] in (b"learner", "learner"):
                    return g["pending"], g["lag"] if g.get("lag") is not None else r.xlen(STREAMS.groups)
            return 0, r.xlen(STREAMS.groups)

        return self.redis(read)

    def learner_consumers(self) -> list[str]:
        def read(r):
            return [c["name"].decode() for c in r.xinfo_consumers(STREAMS.groups, "learner")]

        return self.redis(read)

    # --- diagnostics ---

    def logs(self) -> str:
        parts = []
        for host, log in [
            ("learner0", "learner"),
            ("learner1", "learner"),
            ("worker", "worker"),
            ("worker", "assembler"),
            ("worker2", "worker"),
            ("serve1", "serve"),
            ("serve2", "serve"),
        ]:
            if host in self.net.hosts:
                parts.append(self.net[host].tail(log, 2500))
        return "\n".join(parts)


def applied(cluster: Cluster) -> list[str]:
    """The group ids in the learner's newest checkpoints, in order, over every rank that reads groups (the consumers
    of the `learner` consumer group: `learner-<rank>`, its checkpoint on host learner<rank>)."""
    ids: list[str] = []
    for consumer in cluster.learner_consumers():
        host = cluster.net[f"learner{int(consumer.rsplit('-', 1)[1])}"]
        latest = list(host.var.rglob("checkpoints/LATEST"))
        assert len(latest) == 1, f"{consumer}: checkpoints {latest}"
        state = json.loads((latest[0].parent / latest[0].read_text().strip() / "state.json").read_text())
        ids += state["consumed"]
    return ids


def step_logs(host) -> list[dict]:
    return [json.loads(line) for p in sorted(host.var.rglob("metrics.jsonl")) for line in p.read_text().splitlines()]


def test_the_system_across_namespaces_recovers_from_a_lost_worker_host_and_a_lost_rank(tiny_model_dir, tmp_path):
    started = time.monotonic()
    with Network(tmp_path) as net:
        c = Cluster(net, tiny_model_dir)
        watch = {"detail": c.logs, "interval": 0.5}
        c.start_redis()
        wait_for(lambda: _answers(c), 20, "redis on its host", **watch)
        for replica in REPLICAS:
            c.start_serve(replica)
        c.start_worker_host("worker")
        c.start_learner(0)
        c.start_learner(1)
        wait_for(lambda: all(c.ready_version(r) is not None for r in REPLICAS), 240, "both replicas ready", **watch)
        print(f"replicas ready after {time.monotonic() - started:.0f}s", flush=True)

        # --- 1. round robin over both replicas → scored on the worker host → a two-rank step → loaded by both ---
        sent = c.agent_runs(4)
        assert all(len(ids) == 2 * GROUP for ids in sent.values())  # both replicas served (and recorded) their half
        first_ids = c.all_recorded()
        wait_for(lambda: first_ids <= set(c.grouped()), 120, "the first runs' trajectories in groups", **watch)
        by_id = {t.id: t for _, g in c.groups() for t in g.trajectories}
        for replica, ids in sent.items():  # each replica's trajectories say which replica recorded them
            assert {by_id[t].replica for t in ids} == {replica}
        # and each replica counted its own runs
        for replica in REPLICAS:
            _, page = c.http(replica, "/metrics")
            assert re.search(rb'slca_requests_total\{endpoint="/v1/agent/runs",status="200"\} 2\.0', page), replica
        worker_log = net["worker"].log("worker").read_text()
        assert "succeeded" in worker_log and "workers.score" in worker_log  # scored there (the only worker so far)

        v1 = published_after(c, 0, "the first groups", watch)
        # a DDP step completes only when every rank takes part: rank 1 logged its step and neither rank restarted
        wait_for(lambda: step_logs(net["learner1"]), 30, "rank 1's step log", **watch)
        for host in ("learner0", "learner1"):
            assert [restarts(p) for p in c.ranks(host)] == [0], host  # alive, never restarted
        _loaded_by_both(c, v1.version, watch)
        print(f"v{v1.version} on both replicas after {time.monotonic() - started:.0f}s", flush=True)

        # --- 2. the worker host disappears mid-task; learner rank 1 dies ---
        worker = c.workers["worker"]
        pool = wait_for(lambda: children(worker.pid), 30, "the Celery pool process", **watch)
        log = net["worker"].log("worker")
        received = log.read_text().count("] received")
        net.signal(pool, signal.SIGSTOP)  # the pool takes the next task and never finishes it
        lost = c.agent_runs(1)  # one run: its task reaches the worker at once, well within the visibility timeout
        lost_ids = {t for ids in lost.values() for t in ids}
        wait_for(
            lambda: log.read_text().count("] received") > received, 30, "a task handed to the frozen pool", **watch
        )
        assert not lost_ids & set(c.grouped())  # nothing of it scored
        net.kill("worker")  # every process of the host, at once
        assert c.redis(lambda r: r.hlen("unacked")) >= 1  # its task: delivered, never acknowledged
        rank1 = c.ranks("learner1")
        assert net.signal(rank1, signal.SIGKILL) == rank1
        killed_at = time.monotonic()
        net.add("worker2", ADDRESSES["worker2"])
        c.start_worker_host("worker2")
        c.agent_runs(1)  # with the lost run, the two groups of one two-rank step

        # --- 3. recovery: the task comes back to the new host; torchrun brings rank 1 back; new versions ---
        wait_for(lambda: lost_ids <= set(c.grouped()), 120, "the lost task's trajectories in groups", **watch)
        print(f"lost task regrouped {time.monotonic() - killed_at:.0f}s after the kill", flush=True)
        wait_for(lambda: c.redis(lambda r: r.hlen("unacked")) == 0, 30, "the redelivered task acknowledged", **watch)
        wait_for(lambda: set(c.ranks("learner1")) - set(rank1), 120, "torchrun to restart rank 1", **watch)
        assert [restarts(p) for p in c.ranks("learner1")] == [1]  # its torchrun's one restart (--max-restarts 1)
        v2 = published_after(c, v1.version, "the groups after the kills", watch)
        _loaded_by_both(c, v2.version, watch)
        print(f"v{v2.version} on both replicas after {time.monotonic() - started:.0f}s", flush=True)

        c.agent_runs(2)
        v3 = published_after(c, v2.version, "the last groups", watch)
        _loaded_by_both(c, v3.version, watch)
        assert c.agents["learner1"].poll() is None and c.agents["learner0"].poll() is None

        # --- 4. exactly once: trajectories → groups → steps ---
        recorded = c.all_recorded()
        assert len(recorded) == c.runs * GROUP
        grouped = c.grouped()
        assert set(grouped) == recorded
        assert all(len(gids) == 1 for gids in grouped.values()), {t: g for t, g in grouped.items() if len(g) > 1}
        groups = [g for _, g in c.groups()]
        assert len(groups) == c.runs and len({g.group_id for g in groups}) == c.runs
        assert not any(g.partial for g in groups) and all(g.size == GROUP for g in groups)
        assert c.dead() == []
        consumed = applied(c)
        assert sorted(consumed) == sorted(g.group_id for g in groups), (consumed, [g.group_id for g in groups])
        for name in ("learner0", "learner1"):  # no rank logged a step on a group it had trained already
            # a step line names the groups it trained: "groups" (the loop's line), "trained" (a following rank's)
            trained = [gid for line in step_logs(net[name]) for gid in line.get("trained", line.get("groups"))]
            assert len(trained) == len(set(trained)), (name, trained)
        versions = f"v{v1.version}, v{v2.version}, v{v3.version}"
        print(f"done in {time.monotonic() - started:.0f}s: {c.runs} runs, versions {versions}", flush=True)


def published_after(c: Cluster, above: int, what: str, watch: dict) -> WeightManifest:
    """The version the learner publishes from the groups of the runs sent so far, once it has applied them all, >
    `above` and published by rank 0 on learner0. A step whose groups all had equal rewards changes no weight and
    publishes nothing (rare: ALARM): then two more runs (one step), at most twice."""
    for attempt in range(3):
        wait_for(lambda: c.all_recorded() <= set(c.grouped()), 120, f"{what}: trajectories in groups", **watch)
        wait_for(lambda: c.learner_backlog() == (0, 0), 240, f"{what}: applied by the learner", **watch)
        latest = c.latest()
        if latest is not None and latest.version > above:
            assert latest.url.startswith(c.weights_url), latest.url  # rank 0's, on learner0, over HTTP
            return latest
        print(f"{what}: no new version (equal rewards in every group of the step); two more runs", flush=True)
        c.agent_runs(2)
    raise AssertionError(f"{what}: no version above v{above} after {c.runs} runs\n{c.logs()}")


def restarts(pid: int) -> int:
    """TORCHELASTIC_RESTART_COUNT of a rank process: how many times its node's torchrun restarted it."""
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return int(next(v for v in environ if v.startswith(b"TORCHELASTIC_RESTART_COUNT=")).split(b"=", 1)[1])


def _answers(c: Cluster) -> bool:
    import redis

    try:
        return bool(c.redis(lambda r: r.ping()))
    except redis.RedisError:
        c._redis = None  # a fresh client (and connection) next time
        return False


def _loaded_by_both(c: Cluster, version: int, watch: dict) -> None:
    """Both replicas serve `version`, each from its own copy fetched over HTTP (in its own data dir)."""
    wait_for(lambda: all(c.ready_version(r) == version for r in REPLICAS), 120, f"v{version} on both replicas", **watch)
    for replica in REPLICAS:
        copy = c.net[replica].var / "serve-weights" / str(SERVE_PORT) / f"v{version}" / "model.safetensors"
        assert copy.is_file(), f"{replica}: no fetched copy of v{version} in its own data dir"
