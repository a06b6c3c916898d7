"""`slca bench online`: the reward-per-served-version curve of the running (or last) `slca up` and its probe rounds,
written as files (results.json, results.md, curve.png, probe_summary.json, probe/, learner_metrics.jsonl). The last
served version is always judged: by the feed's final round, else here, pinned (`ops.observe.final_round`)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from typing import Iterator

from pathlib import Path

import redis

from ops.observe.gate_report import gate_lines, gate_summary
from ops.observe.final_round import judge_last_version, last_served_version
from ops.observe.probe_report import SUMMARY_FILE, probe_lines, rounds_of
from ops.observe.redis_view import read_probe_rounds, read_snapshot
from ops.observe.reward_curve import REWARD_HISTORY, by_version, status_lines, write_curve
from ops.observe.memory import memory_lines
from ops.common.up_state import read_state, state_path, up_redis_url
from slca.config import Config
from slca.redaction import redact_url


@contextlib.contextmanager
def run_redis(redis_url: str, data_dir: Path) -> Iterator[str]:
    """The URL to read the run's streams from: the running `slca up`'s Redis, or — when its owned Redis stopped
    with it (`make run`, Ctrl-C, then this command) — a redis-server of its own on a copy of that Redis's
    append-only file in a temporary directory, for as long as the block runs: the run's files are read, never
    written."""
    client = redis.Redis.from_url(redis_url, socket_timeout=5.0, socket_connect_timeout=2.0)
    aof = data_dir / "redis" / "appendonlydir"
    try:
        client.ping()
        alive = True
    except redis.ConnectionError:
        alive = not aof.is_dir()  # nothing to read instead: the caller reports the connection error
    finally:
        client.close()
    if alive:
        yield redis_url
        return
    from slca.redis_server import RedisServer

    with tempfile.TemporaryDirectory(prefix="slca-online-") as tmp:
        shutil.copytree(aof, Path(tmp) / "appendonlydir")
        print(f"the run's Redis is stopped: reading a copy of its append-only file ({aof})")
        server = RedisServer(Path(tmp), appendonly=True).start(timeout=60.0)
        try:
            yield server.url
        finally:
            server.stop()


def run_online_export(args, config: Config) -> int:
    """`slca bench online`: the reward-per-served-version curve of the running (or last) `slca up`, written
    under `--out` (results.json, results.md, curve.png), with the held-out probe's rounds, the per-item files of
    its v0 and latest rounds (probe/) and their paired comparison per suite (probe_summary.json)."""
    import time

    common = config.common
    state = read_state(state_path(Path(common.data_dir)))
    redis_url = common.redis_url or up_redis_url(common.data_dir, state) or common.redis_or_default()
    with run_redis(redis_url, Path(common.data_dir)) as url:
        client = redis.Redis.from_url(url, socket_timeout=5.0, socket_connect_timeout=2.0)
        try:
            snapshot = read_snapshot(client, common.stream_prefix, n_rewards=REWARD_HISTORY, n_learner=REWARD_HISTORY)
        except redis.RedisError as exc:
            print(f"redis {redact_url(redis_url)}: {exc}")
            return 1
        finally:
            client.close()
        rounds = read_probe_rounds(url, common.stream_prefix)
    stats = by_version(snapshot.rewards)
    if not stats:
        print("no scored trajectory in the rewards stats stream yet")
        return 1
    from slca.models.precision import cpu_flags

    extra = {
        "trajectories": sum(s.n for s in stats),
        "versions_seen": len(stats),
        "minutes": round(
            (
                max(r["ts"] for r in snapshot.rewards if r.get("ts"))
                - min(r["ts"] for r in snapshot.rewards if r.get("ts"))
            )
            / 60,
            1,
        ),
        "learner_steps": int(snapshot.learner[-1]["step"] or 0) if snapshot.learner else 0,
        "cpu_flags": " ".join(sorted(f for f in cpu_flags() if f.startswith(("avx", "amx")))),
        # the whole system's memory as slca up sampled it (ops.observe.memory): peak of the sum, shares
        "memory": (state or {}).get("memory"),
        "note": args.note or "",
        "exported_at": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }
    last_served = last_served_version(snapshot.rewards, rounds_of(rounds))
    final = judge_last_version(config, rounds_of(rounds), last_served)
    if final is not None:
        rounds.append(final.to_json())
        publish_round(redis_url, common.stream_prefix, final)
    extra["learner_metrics"] = copy_learner_metrics(config, args.out)
    stamps = [r["ts"] for r in snapshot.rewards if r.get("ts")]
    gate = gate_summary(Path(common.data_dir), args.out, min(stamps), 60 * extra["minutes"])
    write_curve(
        stats,
        args.out,
        args.command or "make run; slca bench online --out " + str(args.out),
        extra,
        probe=rounds,
        data_dir=Path(common.data_dir),
        last_served=last_served,
        gate=gate,
    )
    print(status_lines(stats, last=len(stats)))
    running = any(p.get("state") == "running" for p in (state or {}).get("processes", []))
    print(memory_lines((state or {}).get("memory"), running=running))
    print(probe_lines(rounds, last=len(rounds)))
    print(gate_lines(gate))
    print(
        f"wrote {args.out}/results.json, results.md, curve.png"
        + (f", {SUMMARY_FILE}, probe/" if rounds_of(rounds) else "")
        + (f", {LEARNER_METRICS}" if extra["learner_metrics"] else "")
    )
    return 0


LEARNER_METRICS = "learner_metrics.jsonl"
"""The learner's per-step log (`<run_dir>/metrics.jsonl`: loss, KL, clip fraction, advantages, timings per step),
copied under `--out` so the committed result carries it."""


def learner_metrics_path(config: Config) -> Path:
    """`slca learn`'s per-step file: `<learner.run_dir>/metrics.jsonl`, by default `<data_dir>/learner/`."""
    try:
        run_dir = config.section("learner").run_dir
    except (ModuleNotFoundError, AttributeError):
        run_dir = None
    return Path(run_dir or Path(config.common.data_dir) / "learner") / "metrics.jsonl"


def copy_learner_metrics(config: Config, out: Path) -> str | None:
    """The learner's metrics.jsonl copied to `out/learner_metrics.jsonl`; its name there, None when there is none."""
    src = learner_metrics_path(config)
    if not src.is_file():
        return None
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, out / LEARNER_METRICS)
    return LEARNER_METRICS


def publish_round(redis_url: str, prefix: str, round_) -> None:
    """The pinned final round on the probe stream too, so `slca status` and the dashboard show it."""
    from ops.observe.probe_rounds import PROBE_SUFFIX
    from slca.contracts import Streams
    from slca.contracts.stats import PROBE_MAXLEN

    client = redis.Redis.from_url(redis_url, socket_timeout=5.0, socket_connect_timeout=2.0)
    try:
        client.xadd(Streams(prefix).stats(PROBE_SUFFIX), round_.to_fields(), maxlen=PROBE_MAXLEN, approximate=True)
    except redis.RedisError as exc:
        print(f"the final round was not published on the probe stream: {exc}")
    finally:
        client.close()
