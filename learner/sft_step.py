"""One `slca sft` optimizer step: loss on assistant tokens only, logits computed only where they count.

Why: in the everyday demonstrations ~8% of the tokens are assistant tokens (the tool schemas in the system
message dominate). `model(labels=...)` materialises (B, T, V) logits — V = 49,152, 1.6 GB in fp32 for
8 × 1,024 tokens — and its log-softmax and gradient, for the 92% of positions whose loss is ignored. Here the
decoder runs on the whole batch, and the output head only on the positions that predict an assistant token.

The loss is the mean over the batch's assistant tokens (the same value as HF's `model(labels=...).loss`), so a
batch of 13 short conversations and one of 6 long ones weigh each token alike. No attention mask: batches are
right-padded (`learner.sft_batching`), which a causal mask already hides from every real token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from learner.interrupt import stop_between_layers
from learner.sft_batching import Batch
from learner.sft_data import IGNORE


@dataclass(frozen=True)
class StepResult:
    loss: float
    """Mean cross-entropy per assistant token of the batch."""
    assistant_tokens: int
    grad_norm: float


def assistant_token_loss(model, batch: Batch, autocast: bool) -> tuple[torch.Tensor, int]:
    """(scalar mean loss over assistant tokens, their count). Logits: (N, V) with N the assistant tokens."""
    head = model.get_output_embeddings()
    device = head.weight.device
    ids = batch.input_ids.to(device)
    targets = batch.labels[:, 1:].to(device)  # (B, T-1): position t predicts token t+1
    where = targets != IGNORE
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
        hidden = model.get_decoder()(input_ids=ids, use_cache=False).last_hidden_state  # (B, T, H), causal
        logits = head(hidden[:, :-1][where])  # (N, V)
    count = int(where.sum())
    if count == 0:  # nothing to learn: a zero loss that still touches the graph
        return hidden.sum() * 0.0, 0
    return F.cross_entropy(logits.float(), targets[where]), count


def make_optimizer(model, lr: float) -> torch.optim.Optimizer:
    """AdamW without weight decay (docs/cpu-facts.md#warm-start); fused where this torch has it for the device
    (one kernel over all parameters instead of a loop over 270 tensors)."""
    params = [p for p in model.parameters() if p.requires_grad]
    try:
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.0, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.0)


def sft_update(
    model,
    opt: torch.optim.Optimizer,
    batch: Batch,
    lr: float,
    autocast: bool,
    should_stop: Callable[[], bool] | None = None,
) -> StepResult:
    """Forward, backward, clip to norm 1, one optimizer step at `lr`. `should_stop`: asked at every decoder layer in
    the forward and the backward (`learner.interrupt`): a step takes 15–30 s on two cores, most of it in one
    backward that no signal handler can enter, so `slca up`'s stop (grace 15 s) used to SIGKILL the warm start in
    the middle of one. A stop leaves StepInterrupted (or the stop's own exception, raised by its handler in the
    layer hook), no gradient kept and the weights of the previous step."""
    for group in opt.param_groups:
        group["lr"] = lr
    try:
        with stop_between_layers(model, should_stop, "a warm-start step"):
            loss, count = assistant_token_loss(model, batch, autocast)
            loss.backward()
    except BaseException:
        opt.zero_grad(set_to_none=True)
        raise
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return StepResult(float(loss.detach()), count, float(norm))
