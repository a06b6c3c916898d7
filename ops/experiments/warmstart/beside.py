"""`slca sft --publish`: the warm start beside a running system (the `warmstart` process of `slca up`,
`ops.warm_start_beside`): train with its progress on the board (`progress.ProgressBoard`: `<data_dir>/warm-start.json`
and Redis, read by `slca up`, `slca status` and the dashboard), save the model as `slca sft` does, then hand it over
(`handover`: published as the next weight version, promoted for callers, announced, confirmed served). Exit 0 once the
system runs on it (or serve was told and did not confirm in time: said so); non-zero when training or the handover
failed (the processes `slca up` holds for it then start on the base model)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable

from ops.experiments.warmstart.progress import ProgressBoard
from slca.config import Config

log = logging.getLogger("slca.sft")


class WarmStartStopped(BaseException):
    """SIGTERM or SIGINT while `slca sft` runs (`slca up` stopping): nothing more is written (BaseException: no
    `except Exception` on the way out swallows it)."""


OnStep = Callable[[int, float, float, float | None], None]
OnPhase = Callable[[str], None]
Train = Callable[[OnStep, OnPhase], int]
"""(on_step, on_phase) → `slca sft`'s exit status: the training run, reporting each step and each stage outside
training (`learner.sft.run_sft`: 'checking', 'saving')."""


def run_beside(args, config: Config, train: Train, board: ProgressBoard | None = None) -> int:
    import redis

    common = config.common
    client = redis.Redis.from_url(common.redis_or_default(), socket_timeout=5.0, socket_connect_timeout=5.0)
    board = board or ProgressBoard(Path(common.data_dir), client, common.stream_prefix)
    try:
        return _train_and_hand_over(args, config, train, board, client)
    except WarmStartStopped:
        board.update(phase="stopped")
        raise
    except Exception as exc:
        board.update(phase="failed", error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        client.close()


def _train_and_hand_over(args, config: Config, train: Train, board: ProgressBoard, client) -> int:
    import redis

    from ops.experiments.warmstart.handover import HandoverError, ServeAdminClient, hand_over, publish_model_dir
    from ops.settings import OpsSettings
    from slca.contracts import Streams
    from slca.weights import WeightsSettings

    common, ops, weights = config.common, config.get(OpsSettings), config.get(WeightsSettings)
    out = Path(args.out)
    board.update(phase="loading", budget_s=max(0.0, args.minutes) * 60, budget_steps=max(0, args.steps),
                 model_dir=str(out))  # fmt: skip

    def on_step(step: int, loss: float, progress: float, seconds_left: float | None) -> None:
        board.step(step, loss, progress, seconds_left)
        if progress >= 1.0:  # the last step: every stage after it is timed from here
            board.update(trained_at=time.time())

    def on_phase(name: str) -> None:
        board.update(phase=name)

    code = train(on_step, on_phase)
    if code != 0:
        board.update(phase="failed", error=f"training exited with status {code}")
        return code
    now = time.time()
    board.update(phase="publishing", trained_at=board.record.trained_at or now, saved_at=now)
    try:
        manifest = publish_model_dir(out, Path(common.data_dir), weights.key)
        board.update(phase="swapping", version=manifest.version, published_at=time.time())
        served = hand_over(
            manifest,
            ServeAdminClient(args.serve_url or serve_url_of(config), common.admin_token),
            client,
            Streams(common.stream_prefix),
            ops.warm_start_swap_timeout_s,
            follow_candidate=_follows_candidate(config),
            candidate=_candidate_client(args, config),
        )
    except (HandoverError, redis.RedisError, OSError) as exc:
        board.update(phase="failed", error=f"{type(exc).__name__}: {exc}")
        log.error("warm start: not handed over (%s); the model stays in %s for the next `slca up`", exc, out)
        return 1
    if not served:
        board.update(phase="announced")
        log.warning(
            "warm start: v%d published and announced, but serve did not report it served within %.0f s "
            "(ops.warm_start_swap_timeout_s)",
            manifest.version,
            ops.warm_start_swap_timeout_s,
        )
        return 0
    board.update(phase="served", served_at=time.time())
    log.info("warm start: after training, %s", after_training(board.record))
    return 0


def after_training(record) -> str:
    """Where the time between the end of training and the version served went, for the log."""
    marks = [("checked and saved", record.saved_at), ("published", record.published_at), ("served", record.served_at)]
    last, parts = record.trained_at, []
    for name, at in marks:
        if last is not None and at is not None:
            parts.append(f"{name} in {at - last:.1f} s")
            last = at
    return ", ".join(parts) or "no timings"


def serve_url_of(config: Config) -> str:
    """serve's address on this machine: `ops.feed_url`, else serve's port on the loopback (or its host)."""
    from ops.settings import OpsSettings

    if url := config.get(OpsSettings).feed_url:
        return url
    try:
        serve = config.section("serve")
    except ModuleNotFoundError:
        return "http://127.0.0.1:8000"
    host = "127.0.0.1" if serve.host in ("0.0.0.0", "::") else serve.host
    return f"http://{host}:{serve.port}"


def _candidate_client(args, config: Config):
    """The candidate replica the handover also waits for (`--candidate-url`, else `serve-candidate` with
    `ops.candidate_replica`), or None: one serve answers both roles."""
    from ops.common.serve_urls import candidate_url
    from ops.experiments.warmstart.handover import ServeAdminClient
    from ops.settings import OpsSettings

    url = getattr(args, "candidate_url", None) or candidate_url(config, config.get(OpsSettings))
    return ServeAdminClient(url, config.common.admin_token) if url else None


def _follows_candidate(config: Config) -> bool:
    try:
        return bool(getattr(config.section("serve"), "follow_candidate", False))
    except ModuleNotFoundError:
        return False
