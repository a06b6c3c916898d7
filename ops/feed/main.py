"""`slca feed`: load the pack, open the id log and metrics port, run the feeder until stopped or done."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

from ops.feed.feeder import Feeder, FeedPlan
from ops.feed.metrics import FeedMetrics
from ops.feed.pacing import GroupBacklog
from ops.feed.tasks import load_pack
from ops.settings import OpsSettings
from ops.supervisor.plan import serve_url
from slca.config import Config
from slca.contracts import Streams

log = logging.getLogger("slca.feed")


def group_size(config: Config, ops: OpsSettings) -> int:
    if ops.feed_group_size:
        return ops.feed_group_size
    try:
        return int(getattr(config.section("workers"), "group_size", 4))
    except ModuleNotFoundError:
        return 4


def make_plan(args, config: Config) -> FeedPlan:
    ops = config.get(OpsSettings)
    return FeedPlan(
        url=args.url or ops.feed_url or serve_url(config), group_size=group_size(config, ops),
        concurrency=args.concurrency or ops.feed_concurrency, max_tokens=ops.feed_max_tokens,
        max_turns=ops.feed_max_turns, temperature=ops.feed_temperature, top_p=ops.feed_top_p,
        retry_initial_s=ops.feed_retry_initial_s, retry_max_s=ops.feed_retry_max_s,
        requests=ops.feed_requests if args.requests is None else args.requests,
        seed=ops.feed_seed, api_key=config.common.record_key, max_group_backlog=ops.feed_max_group_backlog,
    )  # fmt: skip


def run_feed(args, config: Config) -> int:
    ops = config.get(OpsSettings)
    plan = make_plan(args, config)
    tasks = load_pack(args.pack or ops.feed_pack, "train", seed=ops.feed_seed)
    if port := ops.metrics_ports.get("feed", 0):
        from prometheus_client import start_http_server

        start_http_server(port)
    ids_path = args.ids_out or Path(config.common.data_dir) / "feed-trajectory-ids.log"
    ids_path.parent.mkdir(parents=True, exist_ok=True)
    log.info("feeding %s with %d %s tasks, n=%d, concurrency %d; trajectory ids → %s",
             plan.url, len(tasks), args.pack or ops.feed_pack, plan.group_size, plan.concurrency, ids_path)  # fmt: skip
    report = asyncio.run(_feed(plan, tasks, ids_path, config))
    print(f"feed: {report.sent} requests sent, {report.ok} ok, {report.failed} failed, {report.retries} retries, "
          f"{report.abandoned} abandoned at stop, "
          f"{len(report.trajectory_ids)} trajectories recorded")  # fmt: skip
    return 0 if report.failed == 0 or report.ok else 1


async def _feed(plan: FeedPlan, tasks, ids_path: Path, config: Config):
    from tqdm import tqdm

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # a bar with ETA when the number of requests is known; a rate counter otherwise (off when not a terminal)
    bar = tqdm(total=plan.requests or None, unit="req", desc="feed", disable=None)
    with open(ids_path, "a", buffering=1) as ids_log:

        def record(ids: list[str]) -> None:
            ids_log.write("".join(i + "\n" for i in ids))

        backlog = GroupBacklog(config.common.redis_or_default(), Streams(config.common.stream_prefix).groups) \
            if plan.max_group_backlog > 0 else None  # fmt: skip
        try:
            report = await Feeder(plan, tasks, FeedMetrics.create(), on_ids=record, on_done=bar.update,
                                  backlog=backlog).run(stop)  # fmt: skip
        finally:
            if backlog is not None:
                await backlog.close()
    bar.close()
    return report
