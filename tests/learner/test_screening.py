"""Difficulty screening (`learner.screen_success_variance`): a group whose members all have the same task success
runs no forward or backward, and the step's line counts it."""

from __future__ import annotations

import pytest

from learner.model import load_policy
from learner.settings import LearnerSettings
from learner.step import uniform_success
from learner.trainer import Trainer
from tests.learner.advantages.groups import K, reward, rollout_group
from tests.support.trajectories import trajectory

SPEC = [(K.SYSTEM, 2), (K.USER, 1), (K.TOOL_CALL, 3), (K.TOOL_RESULT, 1), (K.SUMMARY, 2)]


def group(successes: list[float | None], execs=(1.0, 0.0)):
    """Two members with different r_exec (so non-zero advantages) and the given success (None: no component)."""
    rewards = [
        reward(i, e, 0.5, components={} if s is None else {"success": s})
        for i, (e, s) in enumerate(zip(execs, successes))
    ]
    return rollout_group([trajectory(SPEC, member=i) for i in range(len(rewards))], rewards)


def test_uniform_success_is_judged_only_where_every_member_carries_one():
    assert uniform_success(group([1.0, 1.0])) and uniform_success(group([0.0, 0.0]))
    assert not uniform_success(group([1.0, 0.0]))
    assert not uniform_success(group([None, 0.0])) and not uniform_success(group([None, None]))


@pytest.fixture
def trainer(tiny_model_dir):
    def make(**overrides) -> Trainer:
        settings = LearnerSettings(precision="fp32", lr=1e-4, estimator="grpo", **overrides)
        return Trainer(load_policy(tiny_model_dir, settings), settings)

    return make


def test_screening_skips_groups_of_equal_success_and_counts_them(trainer, monkeypatch):
    import learner.trainer

    forwards = []
    real = learner.trainer.group_loss
    monkeypatch.setattr(
        learner.trainer, "group_loss", lambda *a, **kw: forwards.append(a[1].group_id) or real(*a, **kw)
    )
    mixed, solved, failed = group([1.0, 0.0]), group([1.0, 1.0]), group([0.0, 0.0])
    report = trainer(screen_success_variance=True).train_step([mixed, solved, failed])
    assert forwards == [mixed.group_id] and report.updated
    counts = report.stats.groups
    assert (counts.given, counts.screened, counts.trained, counts.trajectories) == (3, 2, 1, 2)
    line = report.stats.to_log()
    assert (line["groups_in"], line["groups_screened"], line["success_mean"]) == (3, 2, 0.5)
    assert line["estimator/zero_variance_share/scalar"] == 0.0  # one group estimated, with variance


def test_a_step_of_screened_groups_only_changes_nothing(trainer):
    report = trainer(screen_success_variance=True).train_step([group([1.0, 1.0])])
    assert not report.updated and report.stats.loss is None and report.stats.groups.screened == 1


def test_without_screening_every_group_with_advantages_is_trained(trainer):
    report = trainer(screen_success_variance=False).train_step(
        [group([1.0, 0.0]), group([1.0, 1.0]), group([None, None])]
    )
    counts = report.stats.groups
    assert (counts.screened, counts.trained, counts.success_members) == (0, 3, 4)
