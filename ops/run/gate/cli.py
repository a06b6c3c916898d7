"""`slca gate` (the promotion gate, a process of `slca up`) and `slca promote --to vN | --rollback`."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from slca.early_stop import stop_once


def add_promote_arguments(p) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--to", help="the version callers get from now on (vN or N)")
    which.add_argument("--rollback", action="store_true", help="back to the last earlier promoted version")
    p.add_argument("--url", help="serve's base URL (default: ops.feed_url, else serve's host:port)")


def _url(args, config) -> str:
    from ops.run.supervisor.plan import serve_url
    from ops.settings import OpsSettings

    return (getattr(args, "url", None) or config.get(OpsSettings).feed_url or serve_url(config)).rstrip("/")


def _candidate_url(args, config) -> str | None:
    """The candidate replica (`--candidate-url`, else `serve-candidate` with `ops.candidate_replica`), or None: the
    one serve at `_url` answers both roles."""
    from ops.common.serve_urls import candidate_url
    from ops.settings import OpsSettings

    url = getattr(args, "candidate_url", None) or candidate_url(config, config.get(OpsSettings))
    return url.rstrip("/") if url else None


def run_promote(args, config) -> int:
    """Ask serve (admin token) to promote or roll back; print the promotion record or the error."""
    from ops.run.gate.runner import ServeAdmin

    if args.rollback:
        body: dict = {"rollback": True}
    else:
        text = args.to[1:] if args.to[:1] in ("v", "V") else args.to
        if not text.isdigit():
            print(f"slca promote: --to takes a version such as v12, not {args.to!r}", file=sys.stderr)
            return 2
        body = {"version": int(text)}
    admin = ServeAdmin(_url(args, config), config.common.admin_token)
    try:
        status, answer = asyncio.run(admin.send(body))
    except OSError as exc:
        print(f"slca promote: serve not reachable at {admin.url}: {exc}", file=sys.stderr)
        return 1
    if status != 200:
        message = (answer.get("error") or {}).get("message") if isinstance(answer, dict) else answer
        print(f"slca promote: refused ({status}): {message}; nothing changed", file=sys.stderr)
        return 1
    before = answer["history"][-1] if answer["history"] else None
    print(f"callers now get v{answer['promoted']} (before: v{before}; rolled back: {answer['rolled_back']})")
    print(json.dumps(answer))
    return 0


def warm_start_records(config, items: list, plan):
    """The warm start's records across runs (`ops.gate_cache_warm_start`), or None: its version in this run is
    `ops.probe_baseline_version` (set by `slca up` once a warm start trained beside serving is served), its weights
    the served model's directory."""
    from ops.run.feed.baseline_cache import baseline_cache
    from ops.run.gate.warm_records import CACHE_FOLDER, WarmStartRecords
    from ops.settings import OpsSettings

    ops = config.get(OpsSettings)
    if not ops.gate_cache_warm_start:
        return None

    def entry():
        model_dir = config.common.model_path()
        if not model_dir.is_dir():
            return None
        return baseline_cache(Path(config.common.cache_dir), model_dir, items, plan, CACHE_FOLDER)

    return WarmStartRecords(ops.probe_baseline_version, entry)


def run_gate(args, config) -> int:
    """The gate until SIGINT/SIGTERM."""
    from ops.experiments.eval.suite import EvalPlan
    from ops.run.gate.runner import Gate, ServeAdmin, gate_items, pinned_evaluator
    from ops.settings import OpsSettings

    ops = config.get(OpsSettings)
    url = _url(args, config)
    candidate = _candidate_url(args, config)
    plan = EvalPlan(splits=(), pack=ops.feed_pack, bfcl_categories=(), concurrency=ops.gate_concurrency)
    items = gate_items(ops.feed_pack, ops.gate_items)

    async def main() -> None:
        import redis.asyncio as aioredis

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        # not loop.add_signal_handler: the loop's close gives both signals their default action back, and a second
        # one (Ctrl-C after `slca up`'s SIGTERM) would then kill a gate that had stopped cleanly (slca/early_stop.py)
        stop_once(lambda: loop.is_closed() or loop.call_soon_threadsafe(stop.set))
        client = aioredis.Redis.from_url(config.common.redis_or_default())
        try:
            gate = Gate(
                ops,
                items,
                pinned_evaluator(url, config.common.admin_token, plan),
                ServeAdmin(url, config.common.admin_token, candidate),
                Path(config.common.data_dir),
                client,
                config.common.stream_prefix,
                evaluate_candidate=pinned_evaluator(candidate, config.common.admin_token, plan) if candidate else None,
                warm=warm_start_records(config, items, plan),
            )
            await gate.run(stop)
        finally:
            await client.aclose()

    if not ops.gate_enabled:
        print("slca gate: ops.gate_enabled is off", file=sys.stderr)
        return 0
    asyncio.run(main())
    return 0
