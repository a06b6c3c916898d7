"""Batches for `slca sft` that waste little on padding: length-grouped, sized by a token budget.

Why: a fixed batch of 8 random conversations (450–1,020 tokens) padded to its longest spends ~20% of the
compute on padding, and every batch costs as much as its longest member. Here (as HF Trainer's
`group_by_length`) each epoch is shuffled, cut into pools of `GROUP_POOL` conversations, each pool sorted by
length and cut into batches of similar lengths whose padded size `batch × longest` stays within
`batch_tokens`; the batch order is then shuffled. Short conversations come in larger batches, long ones in
smaller: every step holds about the same number of tokens. Every example is seen once per epoch, and the
order depends only on the seed.

Batches are right-padded: under a causal mask a real token never attends to a later position, so the
padding is invisible to it and no attention mask is needed (the fast causal attention kernel applies).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from learner.sft_data import IGNORE, Example

GROUP_POOL = 128
"""Conversations sorted together: with ~300 demonstrations spread over ~600 tokens, neighbours in a pool of
128 differ by a few tokens (padding ~2%), yet batches are not the same set each epoch."""


@dataclass(frozen=True)
class Batch:
    input_ids: torch.Tensor
    """(B, T) token ids, right-padded with the pad id."""
    labels: torch.Tensor
    """(B, T) token id on assistant tokens, IGNORE elsewhere (prompt, tool output, padding)."""
    real_tokens: int
    """Tokens that are not padding."""

    @property
    def padded_tokens(self) -> int:
        return int(self.input_ids.numel())

    @property
    def padding_share(self) -> float:
        return 1 - self.real_tokens / max(1, self.padded_tokens)


def default_batch_tokens(lengths: Sequence[int], batch: int) -> int:
    """`batch` × the mean length: on average as many conversations per step as a fixed batch of `batch`, and
    as many steps per epoch."""
    return max(1, math.ceil(batch * sum(lengths) / max(1, len(lengths))))


def grouped_epoch(
    lengths: Sequence[int], batch_tokens: int, rng: random.Random, pool: int = GROUP_POOL
) -> list[list[int]]:
    """One epoch of batches (lists of example indices): each index exactly once.

    A batch grows while (members + 1) × longest ≤ batch_tokens; a conversation longer than the budget is a
    batch of its own."""
    order = rng.sample(range(len(lengths)), len(lengths))
    batches: list[list[int]] = []
    for start in range(0, len(order), pool):
        current: list[int] = []
        for i in sorted(order[start : start + pool], key=lambda i: lengths[i]):  # stable: ties keep the shuffle
            if current and (len(current) + 1) * lengths[i] > batch_tokens:
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
    rng.shuffle(batches)
    return batches


def grouped_batches(
    lengths: Sequence[int], batch_tokens: int, seed: int, pool: int = GROUP_POOL
) -> Iterator[list[int]]:
    """Epoch after epoch of `grouped_epoch`, deterministic from `seed`."""
    rng = random.Random(seed)
    while True:
        yield from grouped_epoch(lengths, batch_tokens, rng, pool)


def collate_right_padded(examples: Sequence[Example], pad_id: int) -> Batch:
    """(B, T) ids and labels, T the longest member; padding to the right (see the module docstring)."""
    width = max(len(e.input_ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE, dtype=torch.long)
    for row, e in enumerate(examples):
        ids[row, : len(e.input_ids)] = torch.tensor(e.input_ids)
        labels[row, : len(e.labels)] = torch.tensor(e.labels)
    return Batch(ids, labels, sum(len(e.input_ids) for e in examples))
