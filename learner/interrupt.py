"""A learner step that a stop can cut short inside a forward or a backward, not only between them.

One group's forward or backward on a CPU takes seconds (≈ 5–10 s for 1,800 packed tokens of the embedded model
on two cores), and a stop asked in the middle of one used to wait for its end: `slca up`'s Ctrl-C then took
just over its 10 s aim. Here every decoder layer asks `should_stop` before it runs forward, and again when its
output's gradient arrives in the backward, so a stop waits for at most one layer. The exception leaves through
torch's autograd engine as itself; nothing has reached the weights by then (the optimizer steps only after
every group), and the trainer drops the partial gradients."""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch


class StepInterrupted(Exception):
    """A step abandoned at a stop before its optimizer step: the weights are those of the previous step."""


def decoder_layers(model) -> list[torch.nn.Module]:
    """The repeated blocks of a causal LM (HF's `model.layers` below the decoder), or [] where there is no such
    list (then only the trainer's own checks between forwards and backwards apply)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    decoder = base.get_decoder() if hasattr(base, "get_decoder") else None
    layers = getattr(decoder, "layers", None)
    return list(layers) if isinstance(layers, torch.nn.ModuleList) else []


@contextlib.contextmanager
def stop_between_layers(model, should_stop: Callable[[], bool] | None, where: str) -> Iterator[None]:
    """While the block runs, each decoder layer of `model` raises StepInterrupted (with `where` in its message)
    when `should_stop()` says yes: before its forward and when the gradient of its output arrives. None: no hooks."""
    if should_stop is None:
        yield
        return

    def check(phase: str) -> None:
        if should_stop():
            raise StepInterrupted(f"stopped inside the {phase} of {where}")

    def before_forward(module, args) -> None:
        check("forward")

    def after_forward(module, args, output) -> None:
        out = output[0] if isinstance(output, tuple) else output
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out.register_hook(lambda grad: check("backward"))

    handles = []
    for layer in decoder_layers(model):
        handles.append(layer.register_forward_pre_hook(before_forward))
        handles.append(layer.register_forward_hook(after_forward))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
