"""A stop inside a warm-start step: `slca up`'s stop (grace 15 s) used to SIGKILL `slca sft` in the middle of a
backward (15–30 s per step on two cores, `make run`'s Ctrl-C, 2026-12-05). The step asks at every decoder layer in
the forward and the backward; a stop leaves no gradient and the weights of the previous step."""

from __future__ import annotations

import os
import signal

import pytest
import torch

from learner.interrupt import StepInterrupted
from learner.sft_batching import collate_right_padded
from learner.sft_data import IGNORE, Example
from learner.sft_step import make_optimizer, sft_update


class Stopped(BaseException):
    """What `slca sft`'s stop handler raises (`WarmStartStopped`: a BaseException)."""


def _batch():
    ids = list(range(10, 40))
    labels = [IGNORE] * 15 + ids[15:]
    return collate_right_padded([Example(ids, labels), Example(ids[:20], [IGNORE] * 10 + ids[10:20])], 0)


@pytest.fixture
def tiny(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, torch_dtype=torch.float32)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    return model, make_optimizer(model, 1e-2), before


def _unchanged(model, before) -> bool:
    return all(torch.equal(before[k], v) for k, v in model.state_dict().items()) and all(
        p.grad is None for p in model.parameters()
    )


def test_a_stop_inside_the_backward_ends_the_step_with_no_weight_changed(tiny):
    model, opt, before = tiny
    asked = []

    def should_stop() -> bool:  # yes from the second layer of the backward on
        asked.append(1)
        return len(asked) > len(model.model.layers) + 1

    with pytest.raises(StepInterrupted, match="backward of a warm-start step"):
        sft_update(model, opt, _batch(), 1e-2, False, should_stop)
    assert _unchanged(model, before)
    result = sft_update(model, opt, _batch(), 1e-2, False, lambda: False)  # and the next step trains
    assert result.assistant_tokens > 0 and not _unchanged(model, before)


def test_a_signal_during_the_backward_is_handled_inside_it(tiny):
    """The handler's own exception leaves the backward as itself (the autograd engine carries it through): a
    signal no longer waits for the whole backward, only for the layer it lands in."""
    model, opt, before = tiny
    in_backward = []

    def should_stop() -> bool:
        if not in_backward and _backward_running():
            in_backward.append(1)
            os.kill(os.getpid(), signal.SIGUSR1)  # handled at the next bytecode: the next layer's hook
        return False

    def handler(signum, frame):
        raise Stopped()

    previous = signal.signal(signal.SIGUSR1, handler)
    try:
        with pytest.raises(Stopped):
            sft_update(model, opt, _batch(), 1e-2, False, should_stop)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert in_backward and _unchanged(model, before)


def _backward_running() -> bool:
    """Called from a layer hook: True inside the backward (the gradient hooks run under autograd's engine)."""
    import inspect

    return not any(f.function == "assistant_token_loss" for f in inspect.stack(context=0))
