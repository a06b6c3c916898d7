"""With `slca` the gradient at tool_call positions ignores r_pref, and at summary positions ignores r_exec;
with `grpo` both move. Gradients of the real loss w.r.t. the per-token logprobs of the tiny model."""

from __future__ import annotations

import pytest
import torch

from learner.advantages.batch import SUMMARY, TOOL_CALL
from learner.model import LogprobModule
from learner.settings import LearnerSettings
from learner.step import group_loss, prepare_group
from tests.learner.two_tools import TwoToolTask


def grads(model, group, estimator):
    settings = LearnerSettings()
    prepared = prepare_group(group, estimator, settings.advantage)
    totals = (prepared.num_tokens, len(prepared.tokens))
    loss, _, logprobs = group_loss(LogprobModule(model), prepared, settings.loss, totals, autocast=False)
    (g,) = torch.autograd.grad(loss, logprobs)
    return g, prepared.kinds


def perturbed(group, exec_delta=0.0, pref_delta=0.0):
    rewards = [
        r.model_copy(update={"exec": r.exec + exec_delta * (i % 3 == 0), "pref": r.pref + pref_delta * (i % 2)})
        for i, r in enumerate(group.rewards)
    ]
    return group.model_copy(update={"rewards": rewards})


@pytest.fixture
def group(rollout_model):
    model, tokenizer = rollout_model
    g = TwoToolTask(tokenizer, seed=3).group(model, 0, size=6)
    assert len({r.exec for r in g.rewards}) > 1, "need variance in r_exec"
    return g


def test_slca_isolates_channels_grpo_does_not(rollout_model, group):
    model, _ = rollout_model
    base, kinds = grads(model, group, "slca")
    call, summ = kinds == TOOL_CALL, kinds == SUMMARY
    assert call.any() and summ.any() and base[call].abs().sum() > 0 and base[summ].abs().sum() > 0

    pref_moved, _ = grads(model, perturbed(group, pref_delta=0.7), "slca")
    exec_moved, _ = grads(model, perturbed(group, exec_delta=0.9), "slca")
    assert torch.equal(base[call], pref_moved[call])
    assert not torch.equal(base[summ], pref_moved[summ])
    assert torch.equal(base[summ], exec_moved[summ])
    assert not torch.equal(base[call], exec_moved[call])

    g_base, _ = grads(model, group, "grpo")
    g_pref, _ = grads(model, perturbed(group, pref_delta=0.7), "grpo")
    g_exec, _ = grads(model, perturbed(group, exec_delta=0.9), "grpo")
    assert not torch.allclose(g_base[call], g_pref[call])
    assert not torch.allclose(g_base[summ], g_exec[summ])
