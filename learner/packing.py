"""Pack a group into one row that computes the shared prompt once (TRL re-runs it per completion:
docs/cpu-facts.md#online-rl-against-trl).

Row layout: `[prefix | suffix_1 | suffix_2 | … | suffix_G]`, where prefix is the longest common prefix of the
G token lists (the task prompt, and any identical first sampled tokens). Suffix i attends to the whole prefix
and causally to itself only (a block mask), and its positions continue from the prefix, so each member sees
exactly the context it was sampled with. No padding: nothing is computed twice or wasted.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PackedGroup:
    input_ids: torch.Tensor
    """(1, L) token ids of the packed row."""
    position_ids: torch.Tensor
    """(1, L) positions: the prefix 0..p-1, each suffix p..T_i-1."""
    attention_mask: torch.Tensor
    """(1, 1, L, L) bool, True where a query may attend a key."""
    prefix_len: int
    predict_at: list[torch.Tensor]
    """Per member, (T_i − 1,) row positions whose logits predict member tokens 1..T_i−1."""

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[1])


def common_prefix_len(sequences: list[list[int]]) -> int:
    """Longest shared prefix, capped so that every member keeps at least one token of its own."""
    limit = min(len(s) for s in sequences) - 1
    p = 0
    first = sequences[0]
    while p < limit and all(s[p] == first[p] for s in sequences[1:]):
        p += 1
    return p if len(sequences) > 1 else 0


def pack_group(sequences: list[list[int]], share_prefix: bool = True) -> PackedGroup:
    p = common_prefix_len(sequences) if share_prefix else 0
    ids = list(sequences[0][:p])
    pos = list(range(p))
    owner = [-1] * p  # -1: prefix, visible to all members
    predict_at = []
    for i, seq in enumerate(sequences):
        start = len(ids)
        ids.extend(seq[p:])
        pos.extend(range(p, len(seq)))
        owner.extend([i] * (len(seq) - p))
        # logits at row position of token t−1 predict token t
        rows = [t - 1 if t - 1 < p else start + (t - 1 - p) for t in range(1, len(seq))]
        predict_at.append(torch.tensor(rows, dtype=torch.long))
    owner_t = torch.tensor(owner)
    idx = torch.arange(len(ids))
    causal = idx[:, None] >= idx[None, :]
    same = (owner_t[:, None] == owner_t[None, :]) | (owner_t[None, :] == -1)
    mask = (causal & same)[None, None]
    return PackedGroup(
        input_ids=torch.tensor([ids], dtype=torch.long),
        position_ids=torch.tensor([pos], dtype=torch.long),
        attention_mask=mask,
        prefix_len=p,
        predict_at=predict_at,
    )
