"""One optimizer step over a list of rollout groups: advantages, packed forward/backward per group
(gradient accumulation), clipping, AdamW. No Redis, no files: the loop and the CLI drive it."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from learner.ddp_comm import gather_ints
from learner.ddp_report import StepShare, gather_step
from learner.interrupt import StepInterrupted, stop_between_layers
from learner.model import Policy
from learner.settings import LearnerSettings
from learner.step import PreparedGroup, group_loss, member_successes, prepare_group, uniform_success
from learner.step_stats import EstimatorStats, GroupCounts, LossSums, StepStats
from slca.contracts import RolloutGroup


@dataclass
class StepReport:
    step: int
    loss: float
    tokens: int
    """Generated tokens trained on (all groups of the step)."""
    row_tokens: int
    """Tokens the model actually ran (packed rows: shared prompts counted once)."""
    seconds: float
    advantage_seconds: float
    group_ids: list[str]
    skipped_zero: int
    stats: StepStats
    updated: bool = True
    """False when every group of the step had zero advantage: the weights did not change."""

    @property
    def tokens_per_second(self) -> float:
        return self.row_tokens / self.seconds if self.seconds > 0 else 0.0


class Trainer:
    def __init__(self, policy: Policy, settings: LearnerSettings, ref_model=None):
        self.policy = policy
        self.settings = settings
        self.ref_model = ref_model
        params = [p for p in policy.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=settings.lr, weight_decay=settings.weight_decay)
        self.step = 0

    def prepare(self, groups: list[RolloutGroup]) -> tuple[list[PreparedGroup], float]:
        t0 = time.perf_counter()
        prepared = [prepare_group(g, self.settings.estimator, self.settings.advantage) for g in groups]
        return prepared, time.perf_counter() - t0

    def screen(self, groups: list[RolloutGroup]) -> list[RolloutGroup]:
        """The groups difficulty screening keeps: all of them, unless `learner.screen_success_variance`, which leaves
        out those whose members all have the same success (`learner.step.uniform_success`)."""
        if not self.settings.screen_success_variance:
            return list(groups)
        return [g for g in groups if not uniform_success(g)]

    def train_step(self, groups: list[RolloutGroup], should_stop=None) -> StepReport:
        """`should_stop` (a callable) is asked before each group's forward, before its backward, and at every decoder
        layer inside both (`learner.interrupt`); when it says yes, the step is abandoned before any weight changes
        (StepInterrupted) and its partial gradients dropped. Not under DDP: every rank must run the same forwards,
        so a rank cannot leave on its own.

        Under DDP `groups` is this rank's share of the step, and the step is the one a single process would take
        on every rank's groups: the loss is divided by the step's totals over all ranks and multiplied by the
        number of ranks (DDP averages the gradients), and the report sums every rank's figures."""
        t0 = time.perf_counter()
        kept = self.screen(groups)
        prepared, adv_seconds = self.prepare(kept)
        distributed = self.policy.distributed
        totals = (sum(p.num_tokens for p in prepared), sum(len(p.tokens) for p in prepared))
        skip = self.settings.skip_zero_advantage_groups
        work = [p for p in prepared if p.num_tokens and not (skip and p.all_zero)]
        forwards, scale = len(work), 1
        if distributed:
            totals, forwards = _step_totals(totals, len(work), self.policy.device)
            scale = dist.get_world_size()
        self.optimizer.zero_grad(set_to_none=True)
        stop = None if distributed else should_stop
        try:
            total_loss, row_tokens, sums = self._accumulate(work, forwards, totals, scale, stop)
        except StepInterrupted:
            self.optimizer.zero_grad(set_to_none=True)
            raise
        grad_norm = self._apply()
        self.step += 1
        share = StepShare(
            loss=total_loss,
            row_tokens=row_tokens,
            skipped_zero=len(prepared) - len(work),
            constrained_excluded=sum(p.constrained_excluded for p in prepared),
            group_ids=[g.group_id for g in groups],
            sums=sums,
            estimator=sum((p.estimator_stats for p in prepared), EstimatorStats()),
            groups=group_counts(groups, len(kept), work),
        )
        if distributed:
            share = gather_step(share, self.policy.device)
        stats = StepStats(
            loss=None if share.sums is None else share.sums.means(),
            estimator=share.estimator,
            grad_norm=grad_norm,
            constrained_excluded=share.constrained_excluded,
            groups=share.groups,
            lr=self.optimizer.param_groups[0]["lr"],
        )
        return StepReport(
            step=self.step,
            loss=share.loss,
            tokens=totals[0],
            row_tokens=share.row_tokens,
            seconds=time.perf_counter() - t0,
            advantage_seconds=adv_seconds,
            group_ids=share.group_ids,
            skipped_zero=share.skipped_zero,
            stats=stats,
            updated=grad_norm > 0.0,
        )

    def _accumulate(
        self, work: list[PreparedGroup], forwards: int, totals: tuple[int, int], scale: int, should_stop
    ) -> tuple[float, int, LossSums | None]:
        """Forward and backward of every group (gradients accumulate); (loss, row tokens, loss sums). `should_stop`
        (None under DDP) is asked before each forward, before each backward and inside both at every layer."""
        distributed = self.policy.distributed
        total_loss, row_tokens, seq_offset = 0.0, 0, 0
        sums: LossSums | None = None
        for k in range(forwards):
            where = f"group {k + 1} of {len(work)}"
            if should_stop is not None and should_stop():
                raise StepInterrupted(f"stopped before {where}")
            # DDP reduces the gradients in the last backward only; every rank runs `forwards` of them (a rank
            # with fewer groups, or none, runs empty ones), so every rank reduces exactly once and together
            sync = k == forwards - 1 or not distributed
            ctx = contextlib.nullcontext() if sync else self.policy.runner.no_sync()
            with ctx, stop_between_layers(self.policy.model, should_stop, where):
                if k >= len(work):
                    _empty_loss(self.policy).backward()
                    continue
                group = work[k]
                loss, group_sums, _ = group_loss(
                    self.policy.runner,
                    group,
                    self.settings.loss,
                    totals,
                    self.policy.autocast,
                    self.ref_model,
                    seq_offset,
                    self.settings.share_prefix,
                )
                if should_stop is not None and should_stop():
                    raise StepInterrupted(f"stopped after the forward of {where}")
                (loss * scale).backward()
            total_loss += float(loss.detach())
            sums = group_sums if sums is None else sums.merge(group_sums)
            shared = _prefix(group) if self.settings.share_prefix else 0
            row_tokens += sum(len(t) for t in group.tokens) - (len(group.tokens) - 1) * shared
            seq_offset += len(group.tokens)
        return total_loss, row_tokens, sums

    def _apply(self) -> float:
        params = [p for p in self.policy.model.parameters() if p.requires_grad]
        if not any(p.grad is not None for p in params):
            return 0.0
        norm = torch.nn.utils.clip_grad_norm_(params, self.settings.max_grad_norm or float("inf"))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(norm)


def group_counts(given: list[RolloutGroup], kept: int, work: list[PreparedGroup]) -> GroupCounts:
    """What became of a step's `given` groups: `kept` after screening, `work` trained; and their members' success."""
    successes = [v for g in given for v in member_successes(g)]
    return GroupCounts(
        given=len(given),
        screened=len(given) - kept,
        trained=len(work),
        trajectories=sum(len(p.tokens) for p in work),
        success_sum=float(sum(successes)),
        success_members=len(successes),
    )


def _step_totals(totals: tuple[int, int], forwards: int, device) -> tuple[tuple[int, int], int]:
    """The step's generated tokens and trajectories over every rank, and the most forwards any rank runs."""
    ranks = gather_ints([*totals, forwards], device)
    return (sum(r[0] for r in ranks), sum(r[1] for r in ranks)), max(r[2] for r in ranks)


def _empty_loss(policy: Policy) -> torch.Tensor:
    """A forward of one token whose loss is 0: its backward gives every parameter a zero gradient, so a rank with
    nothing (more) to train takes part in DDP's gradient average, adding nothing to it."""
    from learner.forward import select_rows
    from learner.packing import pack_group

    tokens = [[0, 0]]
    packed = pack_group(tokens, False)
    rows, targets = select_rows(packed, tokens, [torch.tensor([1])])
    return policy.runner(packed, rows, targets, policy.autocast).logprobs.sum() * 0.0


def _prefix(group: PreparedGroup) -> int:
    from learner.packing import common_prefix_len

    return common_prefix_len(group.tokens)
