"""The learner's stop path: a step cut short changes no weight; a stop during a step keeps nothing of it and
acknowledges none of its groups (they stay pending for the next start); `slca learn` exits 0 on SIGINT (a
terminal's Ctrl-C) and SIGTERM (`slca up`'s stop)."""

from __future__ import annotations

import os
import signal
import time

import pytest
import torch

from learner.loop import run_learner
from learner.model import load_policy
from learner.settings import LearnerSettings
from learner.interrupt import StepInterrupted, decoder_layers
from learner.trainer import Trainer
from slca.contracts import encode_entry
from tests.learner.two_tools import TwoToolTask
from tests.support.wait import wait_for

pytestmark = pytest.mark.timed  # stop deadlines and latency bounds: alone, in the serial phase


class Stopper:
    """A trainer on the tiny model, its weights before, and a `should_stop` that says yes from its `at`-th ask."""

    def __init__(self, tiny_model_dir, rollout_model, seed: int, groups: int, checkpointing: bool):
        model, tokenizer = rollout_model
        task = TwoToolTask(tokenizer, seed=seed)
        settings = LearnerSettings(precision="fp32", lr=1e-2, gradient_checkpointing=checkpointing)
        self.policy = load_policy(tiny_model_dir, settings)
        self.trainer = Trainer(self.policy, settings)
        self.before = {k: v.clone() for k, v in self.policy.model.state_dict().items()}
        self.groups = [task.group(model, 0, size=4, index=i) for i in range(groups)]
        self.layers = len(decoder_layers(self.policy.model))
        self.asked, self.at = 0, 0

    def should_stop(self) -> bool:
        self.asked += 1
        return self.asked >= self.at

    def assert_unchanged(self) -> None:
        assert self.trainer.step == 0
        assert all(torch.equal(self.before[k], v) for k, v in self.policy.model.state_dict().items())
        assert all(p.grad is None for p in self.policy.model.parameters())


@pytest.mark.parametrize(
    "stop_at, says",
    [
        (lambda n: 2, "inside the forward of group 1"),
        (lambda n: n + 2, "after the forward of group 1"),
        (lambda n: n + 3, "inside the backward of group 1"),
        (lambda n: 2 * n + 3, "before group 2"),
    ],
    ids=["inside-forward", "after-forward", "inside-backward", "before-next-group"],
)
def test_a_step_stopped_anywhere_changes_no_weight(tiny_model_dir, rollout_model, stop_at, says):
    # asked per group: before its forward (1), at each layer's forward (n), between forward and backward (1), at
    # each layer's gradient (n) — a plain backward; a checkpointed one re-runs the layers (next test)
    s = Stopper(tiny_model_dir, rollout_model, seed=5, groups=2, checkpointing=False)
    assert s.layers >= 2
    s.at = stop_at(s.layers)
    with pytest.raises(StepInterrupted, match=says):
        s.trainer.train_step(s.groups, should_stop=s.should_stop)
    s.assert_unchanged()
    # the hooks go with the step: the next one, not stopped, trains and asks nothing more of a stale callable
    s.asked = 0
    report = s.trainer.train_step(s.groups, should_stop=lambda: False)
    assert report.step == 1 and s.asked == 0
    assert all(not layer._forward_pre_hooks and not layer._forward_hooks for layer in decoder_layers(s.policy.model))


def test_a_stop_inside_a_checkpointed_backward_changes_no_weight(tiny_model_dir, rollout_model):
    """Under gradient checkpointing the layers run again inside the backward: the stop is asked there too."""
    s = Stopper(tiny_model_dir, rollout_model, seed=7, groups=1, checkpointing=True)
    s.at = s.layers + 3  # the forward's asks (1 + layers + 1), then the first one of the backward
    with pytest.raises(StepInterrupted, match="group 1 of 1"):
        s.trainer.train_step(s.groups, should_stop=s.should_stop)
    assert s.asked == s.layers + 3
    s.assert_unchanged()


def test_a_stop_during_a_step_acknowledges_none_of_its_groups(loop_context, redis_client, rollout_model, monkeypatch):
    model, tokenizer = rollout_model
    task = TwoToolTask(tokenizer, seed=6)
    ctx = loop_context(groups_per_step=2)
    for i in range(2):
        redis_client.xadd(ctx.streams.groups, encode_entry(task.group(model, 0, size=4, index=i), id=f"g{i}"))
    original = Trainer.train_step

    def step_then_stop(self, groups, should_stop=None):  # the stop arrives while the step runs
        report = original(self, groups, should_stop)
        ctx.stop.set()
        return report

    monkeypatch.setattr(Trainer, "train_step", step_then_stop)
    run_learner(ctx)
    assert redis_client.xpending(ctx.streams.groups, "learner")["pending"] == 2  # pending for the next start
    assert redis_client.get(ctx.streams.weights_latest) is None  # not published
    assert not list(ctx.run_dir.glob("**/*.safetensors"))  # not checkpointed
    assert not (ctx.run_dir / "metrics.jsonl").exists()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_slca_learn_exits_0_on_sigint_and_sigterm(learner_process, sig):
    learner = learner_process()
    learner.start()
    # the model is loaded, the loop is waiting
    wait_for(
        lambda: "groups consumed so far" in learner.log_text(),
        120,
        "the learner loop to wait for groups",
        interval=0.2,
        alive=learner.alive,
        detail=learner.log_text,
    )
    t0 = time.monotonic()
    os.killpg(learner.proc.pid, sig)  # the whole group, as a terminal's Ctrl-C would
    rc = learner.proc.wait(timeout=10)
    took = time.monotonic() - t0
    text = learner.log_text()
    assert rc == 0 and "Traceback" not in text, text
    assert "learner stopped at step 0" in text
    assert took < 3.0, took
