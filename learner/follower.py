"""A rank other than 0 under torchrun: it trains on the groups rank 0 hands it, and nothing else.

It reads no stream, keeps no checkpoint, acknowledges and publishes nothing: rank 0 does all of that for the
step as a whole (`learner.loop`), so a rank that dies can lose nothing and make nothing count twice — its
replacement starts from rank 0's checkpoint like every other rank. It stops when rank 0 says so (its own SIGTERM
only marks the stop: leaving alone would leave the others waiting in the next collective). Its step log,
`<run_dir>/rank<N>/metrics.jsonl`, says which groups it trained.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from learner.checkpoint import LearnerState
from learner.ddp_orders import Orders
from learner.step_line import FollowerLine, append_line
from learner.trainer import Trainer

log = logging.getLogger("slca.learner")


def follow(trainer: Trainer, orders: Orders, run_dir: Path) -> LearnerState:
    log.info("learner rank %d: following rank 0 from step %d", orders.ranks.rank, trainer.step)
    while True:
        order = orders.receive()
        if order.kind == "stop":
            break
        if order.kind == "wait":
            continue
        report = trainer.train_step(order.groups)
        trained = [g.group_id for g in order.groups]
        append_line(run_dir, FollowerLine(report.step, orders.ranks.rank, trained, report.loss, time.time()))
    return LearnerState(step=trainer.step)
