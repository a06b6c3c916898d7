"""`slca feed`: load the pack, open the id log and metrics port, run the feeder until stopped or done."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import aiohttp

from ops.run.feed.feeder import Feeder, FeedPlan
from ops.run.feed.gate_hold import GateHold
from ops.run.feed.metrics import FeedMetrics
from ops.run.feed.pacing import GroupBacklog
from ops.run.feed.probe import ProbePlan
from ops.run.feed.selective import TaskOutcomes, TaskSkipper
from ops.common.tasks import load_pack
from ops.experiments.eval.probe_plan import probe_eval_plan
from ops.settings import OpsSettings
from ops.common.serve_urls import candidate_url, serve_url
from slca.config import Config
from slca.contracts import Streams
from slca.early_stop import stop_once

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
        # the feed and its probe get the candidate: from `serve-candidate` when `slca up` runs one
        url=args.url or ops.feed_url or candidate_url(config, ops) or serve_url(config),
        group_size=group_size(config, ops),
        concurrency=args.concurrency or ops.feed_concurrency,
        max_tokens=ops.feed_max_tokens,
        max_turns=ops.feed_max_turns,
        temperature=ops.feed_temperature,
        top_p=ops.feed_top_p,
        retry_initial_s=ops.feed_retry_initial_s,
        retry_max_s=ops.feed_retry_max_s,
        requests=ops.feed_requests if args.requests is None else args.requests,
        seed=ops.feed_seed,
        api_key=config.common.record_key,
        max_group_backlog=ops.feed_max_group_backlog,
        stop_grace_s=ops.feed_stop_grace_s,
    )


def run_feed(args, config: Config) -> int:
    ops = config.get(OpsSettings)
    plan = make_plan(args, config)
    tasks = load_pack(args.pack or ops.feed_pack, "train", seed=ops.feed_seed)
    if port := ops.metrics_ports.get("feed", 0):
        from prometheus_client import start_http_server

        start_http_server(port)
    ids_path = args.ids_out or Path(config.common.data_dir) / "feed-trajectory-ids.log"
    ids_path.parent.mkdir(parents=True, exist_ok=True)
    log.info(
        "feeding %s with %d %s tasks, n=%d, concurrency %d; trajectory ids → %s",
        plan.url,
        len(tasks),
        args.pack or ops.feed_pack,
        plan.group_size,
        plan.concurrency,
        ids_path,
    )
    report = asyncio.run(_feed(plan, tasks, ids_path, config))
    print(
        f"feed: {report.sent} requests sent, {report.ok} ok, {report.failed} failed, {report.retries} retries, "
        f"{report.abandoned} abandoned at stop, {report.skipped} tasks skipped as uniform, "
        f"{len(report.trajectory_ids)} trajectories recorded"
    )
    return 0 if report.failed == 0 or report.ok else 1


async def _feed(plan: FeedPlan, tasks, ids_path: Path, config: Config):
    from tqdm import tqdm

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # not loop.add_signal_handler: the loop's close gives both signals their default action back, and a second one
    # (Ctrl-C after `slca up`'s SIGTERM) would then kill a feed that had stopped cleanly (slca/early_stop.py)
    stop_once(lambda: loop.is_closed() or loop.call_soon_threadsafe(stop.set))
    # a bar with ETA when the number of requests is known; a rate counter otherwise (off when not a terminal)
    bar = tqdm(total=plan.requests or None, unit="req", desc="feed", disable=None)
    with open(ids_path, "a", buffering=1) as ids_log:

        def record(ids: list[str]) -> None:
            ids_log.write("".join(i + "\n" for i in ids))

        backlog = (
            GroupBacklog(config.common.redis_or_default(), Streams(config.common.stream_prefix).groups)
            if plan.max_group_backlog > 0
            else None
        )
        gate_hold = make_gate_hold(config)
        skipper = make_skipper(plan, tasks, config)
        feeder = Feeder(
            plan,
            tasks,
            FeedMetrics.create(),
            on_ids=record,
            on_done=bar.update,
            backlog=backlog,
            gate_hold=gate_hold,
            skipper=skipper,
        )
        prober = make_prober(plan, config)
        if prober is not None and gate_hold is not None:
            prober.gate_open = gate_hold.open  # periodic rounds wait while the gate judges, as the feed does
        try:
            report = await feed_with_probe(feeder, prober, stop)
        finally:
            if backlog is not None:
                await backlog.close()
            if gate_hold is not None:
                await gate_hold.close()
            if skipper is not None:
                await skipper.outcomes.close()
    bar.close()
    return report


def make_gate_hold(config: Config) -> GateHold | None:
    """The gate's hold on the feed (`ops.gate_holds_feed`), read from the run's Redis; None when off."""
    if not config.get(OpsSettings).gate_holds_feed:
        return None
    return GateHold.from_url(config.common.redis_or_default(), config.common.stream_prefix)


def make_skipper(plan: FeedPlan, tasks, config: Config) -> TaskSkipper | None:
    """Selective rollouts (`ops.feed_skip_uniform_p`), their outcomes read from the run's Redis; None when off."""
    p = config.get(OpsSettings).feed_skip_uniform_p
    if p <= 0:
        return None
    outcomes = TaskOutcomes.from_url(
        config.common.redis_or_default(), config.common.stream_prefix, plan.group_size, {t.task_id for t in tasks}
    )
    return TaskSkipper(outcomes, p, seed=plan.seed)


async def feed_with_probe(feeder: Feeder, prober, stop: asyncio.Event):
    """Run `feeder` beside `prober` (None: no probe): the feed sends its first request once the probe has decided
    whether its baseline holds the feed (`Prober.feed_may_start`), then waits while it is held (`feed_open`); when
    the feed is done the probe's schedule stops and its final round runs. A probe that fails during the run is
    logged (one error line, when it fails) and the feed goes on and ends as it would: its report is returned, and
    the final round is skipped (said so in the log)."""
    probing = asyncio.create_task(prober.run(stop)) if prober is not None else None
    if probing is not None:
        feeder.hold, feeder.start = prober.feed_open, prober.feed_may_start
        probing.add_done_callback(_log_probe_failure)
    try:
        return await feeder.run(stop)
    finally:
        stop.set()  # the feed is done (request budget spent or stopped): so is the probe's schedule
        if probing is not None:
            # a round in flight is abandoned, not waited for: its file is written only once complete
            # (atomically), and a partial round would not be comparable anyway; the final round follows
            probing.cancel()
            failed = False
            try:
                await probing
            except asyncio.CancelledError:
                pass
            except Exception:  # logged when it happened (`_log_probe_failure`)
                failed = True
            if failed:
                log.warning("probe: the final round is skipped (the probe failed during the run)")
            else:
                await final_round(prober)


def _log_probe_failure(probing: asyncio.Task) -> None:
    """The probe's task ended: one error line when it died of an exception (the feed goes on without it)."""
    if not probing.cancelled() and (exc := probing.exception()) is not None:
        log.error("probe: failed during the run, the feed goes on without it: %r", exc)


async def final_round(prober) -> None:
    """The probe's final round on the last served version, within `ops.probe_final_timeout_s` (0: none)."""
    timeout = prober.plan.final_timeout_s
    if timeout <= 0:
        return
    try:
        await asyncio.wait_for(prober.final_round(), timeout=timeout)
    except asyncio.TimeoutError:
        log.warning("probe: the final round did not finish within %.0f s (ops.probe_final_timeout_s)", timeout)
    except (aiohttp.ClientError, OSError) as exc:
        log.warning("probe: the final round failed: %s", exc)


def round_items(items: list, suites: list[str]) -> list:
    """A periodic round's items: those of `suites` ('bfcl': every BFCL item; []: every item)."""
    from ops.experiments.eval.stats import BFCL, pool_of

    if not suites:
        return list(items)
    return [i for i in items if i.suite in suites or (BFCL in suites and pool_of(i.suite) == BFCL)]


def probe_plan(plan: FeedPlan, config: Config, eval_plan) -> ProbePlan:
    ops = config.get(OpsSettings)
    return ProbePlan(
        url=plan.url,
        eval=eval_plan,
        data_dir=Path(config.common.data_dir),
        every_versions=ops.probe_every_versions,
        every_s=60 * ops.probe_every_minutes,
        budget_share=ops.probe_budget_share,
        item_seconds=ops.probe_item_seconds,
        final_timeout_s=ops.probe_final_timeout_s,
        api_key=config.common.record_key,
        holds_feed=ops.probe_holds_feed,
        baseline_version=ops.probe_baseline_version,
        baseline_hold_s=ops.probe_baseline_hold_s,
    )


def warm_start_cache(config: Config, items: list, eval_plan):
    """() → the cache entry of the served warm start's baseline (None when `ops.probe_cache_baseline` is off or
    the model is not a directory here)."""
    if not config.get(OpsSettings).probe_cache_baseline:
        return None
    from ops.run.feed.baseline_cache import baseline_cache

    def entry():
        model_dir = config.common.model_path()
        if not model_dir.is_dir():
            return None
        return baseline_cache(Path(config.common.cache_dir), model_dir, items, eval_plan)

    return entry


def make_prober(plan: FeedPlan, config: Config):
    """The held-out probe (ops/run/feed/probe.py), or None when `ops.probe_enabled` is off, the scorer is missing or
    the items cannot be planned (an unknown split)."""
    ops = config.get(OpsSettings)
    if not ops.probe_enabled:
        return None
    try:
        import workers.scoring  # noqa: F401 — the eval scores task items with the workers' HierR
    except ImportError:
        log.warning("probe off: workers (the HierR scorer) are not installed")
        return None
    from ops.experiments.eval.suite import plan_items
    from ops.observe.probe_rounds import PROBE_SUFFIX
    from ops.run.feed.probe import Prober, redis_publisher

    eval_plan = probe_eval_plan(ops)
    try:
        items = plan_items(eval_plan)
    except (ValueError, ImportError, OSError) as exc:
        log.error("probe off: its items cannot be planned: %s", exc)
        return None
    periodic = round_items(items, ops.probe_round_suites)
    stream = Streams(config.common.stream_prefix).stats(PROBE_SUFFIX)
    log.info(
        "probe: %d items (%s, BFCL %d per category), %s; periodic rounds of %d items (%s) every %.0f min within "
        "%.0f%% of serving time → %s and %s/probe/",
        len(items),
        "+".join(eval_plan.splits),
        ops.probe_bfcl_per_category,
        eval_plan.mode,
        len(periodic),
        "+".join(ops.probe_round_suites) or "all",
        ops.probe_every_minutes,
        100 * ops.probe_budget_share,
        stream,
        config.common.data_dir,
    )
    return Prober(
        probe_plan(plan, config, eval_plan),
        items,
        redis_publisher(config.common.redis_or_default(), stream),
        round_items=periodic,
        cache=warm_start_cache(config, items, eval_plan),
    )
