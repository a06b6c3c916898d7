"""Per-token log-probabilities of a group under a causal LM, on a packed row (see `packing`).

Only the logits of the tokens asked for are materialised (N × V instead of L × V)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

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


def token_logprobs(
    model, packed: PackedGroup, rows: torch.Tensor, targets: torch.Tensor, autocast: bool
) -> TokenLogprobs:
    """(N,) logprobs of `targets` predicted at packed `rows`. rows, targets: (N,)."""
    decoder, head = _decoder_and_head(model)
    device = head.weight.device
    device_type = device.type
    with torch.autocast(device_type=device_type, dtype=torch.bfloat16, enabled=autocast):
        hidden = decoder(
            input_ids=packed.input_ids.to(device),
            position_ids=packed.position_ids.to(device),
            attention_mask=packed.attention_mask.to(device),
            use_cache=False,
        ).last_hidden_state[0]
        logits = head(hidden[rows.to(device)]).float()
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, targets.to(device)[:, None])[:, 0]
    with torch.no_grad():
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return TokenLogprobs(logp, entropy)
