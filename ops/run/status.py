"""`slca status`: the processes of a running `slca up` (from its state file), queue depths, the served version,
the version callers get from each serve process (its `/v1/versions`), every serve replica's version and heartbeat,
and recent rewards (from Redis)."""

from __future__ import annotations

from pathlib import Path

import redis

from ops.observe.probe_report import probe_lines
from ops.observe.redis_view import read_probe_rounds, read_snapshot
from ops.observe.reward_curve import REWARD_HISTORY, by_version, status_lines
from ops.observe.scrape import sample_value, scrape
from ops.run.gate.status import gate_lines
from ops.run.replica_lines import replica_lines
from ops.run.served_versions import SERVE_PROCESSES, read_versions, served_lines
from ops.common.up_state import read_state, state_path, up_redis_url
from ops.observe.memory import memory_lines
from ops.run.supervisor.table import process_table, system_lines
from slca.config import Config
from slca.redaction import redact_url
from slca.replicas import read_replicas


def run_status(args, config: Config) -> int:
    common = config.common
    state = read_state(state_path(Path(common.data_dir)))
    if state is None:
        print(f"no `slca up` state in {common.data_dir} (is it running here?)")
    else:
        alive = "running" if state["alive"] else "NOT running (stale state file)"
        print(f"slca up (pid {state['supervisor_pid']}): {alive}")
        print(process_table(state["processes"]))
        print(memory_lines(state.get("memory")))
    redis_url = common.redis_url or up_redis_url(common.data_dir, state) or common.redis_or_default()
    client = redis.Redis.from_url(redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)
    try:
        snapshot = read_snapshot(client, common.stream_prefix, n_rewards=max(args.window, REWARD_HISTORY), n_learner=1)
        replicas = read_replicas(client, common.stream_prefix)
        gate = gate_lines(client, common.stream_prefix)  # promoted version, gate decisions (ops/run/gate/)
    except redis.RedisError as exc:
        print(f"redis {redact_url(redis_url)}: {exc}")
        return 1
    finally:
        client.close()
    api = next((p["url"] for p in (state or {}).get("processes", []) if p["name"] == "serve"), None)
    text = scrape(api + "/metrics", 1.0) if api and state and state["alive"] else None
    served = sample_value(text, "slca_policy_version") if text else None
    print(f"redis: {redact_url(redis_url)}")
    print(system_lines(snapshot, served, window=args.window))
    print(replica_lines(replicas))
    if state and state["alive"]:  # what callers get: the engines' versions, not the record (one engine: the candidate)
        urls = {p["name"]: p.get("url") for p in state.get("processes", [])}
        served_at = [(name, urls[name]) for name in SERVE_PROCESSES if urls.get(name)]
        print(served_lines([(name, url, read_versions(url)) for name, url in served_at]))
    print(gate)
    print(status_lines(by_version(snapshot.rewards)))
    print(probe_lines(read_probe_rounds(redis_url, common.stream_prefix)))
    return 0
