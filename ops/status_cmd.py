"""`slca status`: the processes of a running `slca up` (from its state file), queue depths, the served version
and recent rewards (from Redis)."""

from __future__ import annotations

from pathlib import Path

import redis

from ops.online_curve import by_version, status_lines, write_curve
from ops.online_probe import SUMMARY_FILE, probe_lines, rounds_of
from ops.probe import sample_value, scrape
from ops.redis_view import read_snapshot
from ops.supervisor.state import owned_redis_url, read_state, state_path
from ops.supervisor.table import process_table, system_lines
from slca.config import Config
from slca.redaction import redact_url

REWARD_HISTORY = 2000
"""Rows of the rewards stats stream read for the per-version curve (the workers keep about this many)."""


def run_status(args, config: Config) -> int:
    common = config.common
    state = read_state(state_path(Path(common.data_dir)))
    if state is None:
        print(f"no `slca up` state in {common.data_dir} (is it running here?)")
    else:
        alive = "running" if state["alive"] else "NOT running (stale state file)"
        print(f"slca up (pid {state['supervisor_pid']}): {alive}")
        print(process_table(state["processes"]))
    redis_url = common.redis_url or up_redis_url(common.data_dir, state) or common.redis_or_default()
    client = redis.Redis.from_url(redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)
    try:
        snapshot = read_snapshot(client, common.stream_prefix, n_rewards=max(args.window, REWARD_HISTORY), n_learner=1)
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
    print(status_lines(by_version(snapshot.rewards)))
    print(probe_lines(probe_rounds(redis_url, common.stream_prefix)))
    return 0


def up_redis_url(data_dir: str, state: dict | None) -> str | None:
    """The Redis of a `slca up` in `data_dir`: the owned one's URL file (it has the password the state file hides),
    else the state file's URL."""
    return owned_redis_url(data_dir) or (state or {}).get("redis_url")


def probe_rounds(redis_url: str, prefix: str) -> list[dict]:
    """The feed's held-out probe rounds (ops/feed/probe.py), oldest first; [] when Redis can't be read."""
    from ops.feed.probe import PROBE_SUFFIX, read_rounds
    from slca.contracts import Streams

    client = redis.Redis.from_url(redis_url, socket_timeout=5.0, socket_connect_timeout=2.0)
    try:
        return read_rounds(client, Streams(prefix).stats(PROBE_SUFFIX))
    except redis.RedisError:
        return []
    finally:
        client.close()


def run_online_export(args, config: Config) -> int:
    """`slca bench online`: the reward-per-served-version curve of the running (or last) `slca up`, written
    under `--out` (results.json, results.md, curve.png), with the held-out probe's rounds, the per-item files of
    its v0 and latest rounds (probe/) and their paired comparison per suite (probe_summary.json)."""
    import time

    common = config.common
    state = read_state(state_path(Path(common.data_dir)))
    redis_url = common.redis_url or up_redis_url(common.data_dir, state) or common.redis_or_default()
    client = redis.Redis.from_url(redis_url, socket_timeout=5.0, socket_connect_timeout=2.0)
    try:
        snapshot = read_snapshot(client, common.stream_prefix, n_rewards=REWARD_HISTORY, n_learner=REWARD_HISTORY)
    except redis.RedisError as exc:
        print(f"redis {redact_url(redis_url)}: {exc}")
        return 1
    finally:
        client.close()
    stats = by_version(snapshot.rewards)
    if not stats:
        print("no scored trajectory in the rewards stats stream yet")
        return 1
    from slca.models.precision import cpu_flags

    extra = {"trajectories": sum(s.n for s in stats), "versions_seen": len(stats),
             "minutes": round((max(r["ts"] for r in snapshot.rewards if r.get("ts")) -
                               min(r["ts"] for r in snapshot.rewards if r.get("ts"))) / 60, 1),
             "learner_steps": int(snapshot.learner[-1]["step"] or 0) if snapshot.learner else 0,
             "cpu_flags": " ".join(sorted(f for f in cpu_flags() if f.startswith(("avx", "amx")))),
             "note": args.note or "", "exported_at": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}  # fmt: skip
    rounds = probe_rounds(redis_url, common.stream_prefix)
    write_curve(stats, args.out, args.command or "make run; slca bench online --out " + str(args.out), extra,
                probe=rounds, data_dir=Path(common.data_dir))  # fmt: skip
    print(status_lines(stats, last=len(stats)))
    print(probe_lines(rounds, last=len(rounds)))
    print(f"wrote {args.out}/results.json, results.md, curve.png" +
          (f", {SUMMARY_FILE}, probe/" if rounds_of(rounds) else ""))  # fmt: skip
    return 0
