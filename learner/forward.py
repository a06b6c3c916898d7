"""Per-token log-probabilities of a group under a causal LM, on a packed row (see `packing`).

Only the logits of the tokens asked for are materialised (N × V instead of L × V), a chunk of rows at a time."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.checkpoint import checkpoint

from learner.packing import PackedGroup


@dataclass
class TokenLogprobs:
    logprobs: torch.Tensor
    """(N,) log π(token) at the selected positions (differentiable)."""
    entropy: torch.Tensor
    """(N,) entropy of π at those positions (detached)."""


def _decoder_and_head(model):
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.get_decoder(), base.get_output_embeddings()


def select_rows(packed: PackedGroup, tokens: list[list[int]], selected: list[torch.Tensor]):
    """Row positions and target ids for member tokens `selected[i]` (indices ≥ 1 into member i's tokens)."""
    rows, targets = [], []
    for i, sel in enumerate(selected):
        rows.append(packed.predict_at[i][sel - 1])
        targets.append(torch.tensor(tokens[i], dtype=torch.long)[sel])
    return torch.cat(rows), torch.cat(targets)


LOGIT_ROWS = 256
"""Selected rows whose vocabulary-wide logits exist at once (see `token_logprobs`)."""


def _rows_logprobs(head, hidden: torch.Tensor, targets: torch.Tensor, autocast: bool):
    """logprobs (differentiable) and entropy (detached) of `targets` from these rows' hidden states. Uses
    logsumexp, not log_softmax: the (rows × V) log-probabilities are never materialised, only the logits."""
    with torch.autocast(device_type=hidden.device.type, dtype=torch.bfloat16, enabled=autocast):
        logits = head(hidden).float()
    lse = torch.logsumexp(logits, dim=-1)
    logp = logits.gather(-1, targets[:, None])[:, 0] - lse
    with torch.no_grad():  # H = lse − Σ p·logit
        entropy = lse - (torch.softmax(logits, dim=-1) * logits).sum(-1)
    return logp, entropy


def token_logprobs(
    model,
    packed: PackedGroup,
    rows: torch.Tensor,
    targets: torch.Tensor,
    autocast: bool,
    chunk_rows: int = LOGIT_ROWS,
) -> TokenLogprobs:
    """(N,) logprobs of `targets` predicted at packed `rows`. rows, targets: (N,).

    The head runs on `chunk_rows` rows at a time, each chunk under activation checkpointing when gradients are
    wanted: a group's N × V fp32 logits (N = every generated token of the group, V ≈ 49k: ~200 MB per copy at
    N = 1,024, with the softmax, its gradient and their casts several copies) are never held at once, at the
    price of running the head twice on the selected rows (a few % of the step). 0: all rows at once."""
    decoder, head = _decoder_and_head(model)
    device = head.weight.device
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=autocast):
        hidden = decoder(
            input_ids=packed.input_ids.to(device),
            position_ids=packed.position_ids.to(device),
            attention_mask=packed.attention_mask.to(device),
            use_cache=False,
        ).last_hidden_state[0]
    selected, targets = hidden[rows.to(device)], targets.to(device)
    step = chunk_rows if chunk_rows > 0 else max(1, len(targets))
    logps, entropies = [], []
    for i in range(0, len(targets), step):
        h, t = selected[i : i + step], targets[i : i + step]
        if h.requires_grad:  # non-reentrant checkpointing keeps the autocast state for the recompute
            lp, ent = checkpoint(_rows_logprobs, head, h, t, autocast, use_reentrant=False)
        else:
            lp, ent = _rows_logprobs(head, h, t, autocast)
        logps.append(lp)
        entropies.append(ent.detach())
    return TokenLogprobs(torch.cat(logps), torch.cat(entropies))
