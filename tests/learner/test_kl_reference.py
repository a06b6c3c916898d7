"""KL to the warm start (`learner.loss.kl_beta`): a frozen copy of the starting weights, built only when β > 0, that
changes the loss once the policy has moved and never receives a gradient."""

from __future__ import annotations

import pytest
import torch

from learner.model import load_policy, reference_for
from learner.settings import LearnerSettings, LossSettings
from learner.step import group_loss, prepare_group
from learner.trainer import Trainer
from tests.learner.advantages.groups import K, reward, rollout_group
from tests.support.trajectories import trajectory

SPEC = [(K.SYSTEM, 2), (K.USER, 1), (K.TOOL_CALL, 3), (K.TOOL_RESULT, 1), (K.SUMMARY, 2)]


def _group():
    rewards = [reward(0, 1.0, 0.2), reward(1, 0.0, 0.9)]
    return rollout_group([trajectory(SPEC, member=i) for i in range(2)], rewards)


def _settings(kl_beta: float) -> LearnerSettings:
    return LearnerSettings(precision="fp32", lr=1e-3, loss=LossSettings(kl_beta=kl_beta))


def _move(model) -> None:
    """Move the policy away from its starting weights (at the start the KL and its gradient are 0)."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=generator) * 0.02)


def test_no_reference_is_built_without_kl(tiny_model_dir):
    assert reference_for(tiny_model_dir, _settings(0.0), torch.device("cpu")) is None


def test_kl_changes_the_loss_and_the_reference_gets_no_gradient(tiny_model_dir):
    settings = _settings(0.5)
    policy = load_policy(tiny_model_dir, settings)
    ref = reference_for(tiny_model_dir, settings, policy.device)
    assert ref is not None and not any(p.requires_grad for p in ref.parameters())
    _move(policy.model)
    prepared = prepare_group(_group(), settings.estimator, settings.advantage)
    totals = (prepared.num_tokens, len(prepared.tokens))

    def loss_with(beta: float):
        return group_loss(policy.runner, prepared, LossSettings(kl_beta=beta), totals, False, ref)

    plain, plain_sums, _ = loss_with(0.0)
    with_kl, sums, _ = loss_with(0.5)
    assert plain_sums.all.kl is None and sums.all.kl > 0
    kl_term = 0.5 * sums.all.kl / prepared.num_tokens  # token_mean of β·k3
    assert float(with_kl.detach()) == pytest.approx(float(plain.detach()) + kl_term, rel=1e-5)
    with_kl.backward()
    assert all(p.grad is None for p in ref.parameters())
    assert any(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in policy.model.parameters())


def test_the_trainer_reports_the_kl_and_keeps_the_reference_frozen(tiny_model_dir):
    settings = _settings(0.5)
    policy = load_policy(tiny_model_dir, settings)
    ref = reference_for(tiny_model_dir, settings, policy.device)
    before = {k: v.clone() for k, v in ref.state_dict().items()}
    _move(policy.model)
    report = Trainer(policy, settings, ref).train_step([_group()])
    assert report.updated and report.stats.kl > 0 and report.stats.to_log()["all/kl"] == report.stats.kl
    assert all(torch.equal(before[k], v) for k, v in ref.state_dict().items())
