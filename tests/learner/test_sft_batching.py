"""Length-grouped, token-budget batches for `slca sft`: less padding than fixed batches, each example once per
epoch, deterministic from the seed; right padding without a mask gives HF's masked loss."""

from __future__ import annotations

import itertools
import random

import pytest
import torch

from learner.sft_batching import collate_right_padded, default_batch_tokens, grouped_batches, grouped_epoch
from ops.bench.sft import collate_padded, fixed_batches  # the old loop, kept verbatim as the bench's baseline
from learner.sft_data import IGNORE, Example


def realistic_lengths(n: int = 300, seed: int = 0) -> list[int]:
    """Like the everyday demonstrations: 450–1,020 tokens, median ≈ 770."""
    rng = random.Random(seed)
    return [int(min(1020, max(450, rng.gauss(775, 140)))) for _ in range(n)]


def padding_share(batches, lengths) -> float:
    real = sum(lengths[i] for b in batches for i in b)
    padded = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    return 1 - real / padded


def test_grouped_batches_pad_far_less_than_fixed_batches_of_8():
    lengths = realistic_lengths()
    budget = default_batch_tokens(lengths, 8)
    grouped = list(itertools.islice(grouped_batches(lengths, budget, seed=0), 200))
    fixed = list(itertools.islice(fixed_batches(len(lengths), 8, seed=0), 200))
    assert padding_share(fixed, lengths) > 0.12
    assert padding_share(grouped, lengths) < 0.03
    # the same tokens per step on average: a step of the new loop means about what an old step meant
    per_step = sum(lengths[i] for b in grouped for i in b) / len(grouped)
    assert 0.8 * budget < per_step <= budget


def test_every_example_once_per_epoch_and_budget_respected():
    lengths = realistic_lengths(257, seed=3) + [5000]  # one longer than the budget: a batch of its own
    budget = default_batch_tokens(lengths, 8)
    stream = grouped_batches(lengths, budget, seed=1)
    for _ in range(3):  # consecutive epochs, each a permutation
        seen: list[int] = []
        while len(seen) < len(lengths):
            batch = next(stream)
            assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= budget
            seen += batch
        assert sorted(seen) == list(range(len(lengths)))
    assert [len(lengths) - 1] in grouped_epoch(lengths, budget, random.Random(0))


def test_batches_are_deterministic_for_a_seed():
    lengths = realistic_lengths()
    first = list(itertools.islice(grouped_batches(lengths, 6000, seed=7), 100))
    assert first == list(itertools.islice(grouped_batches(lengths, 6000, seed=7), 100))
    assert first != list(itertools.islice(grouped_batches(lengths, 6000, seed=8), 100))


@pytest.mark.parametrize("lengths", [[30, 50, 41], [17, 17]])
def test_right_padding_without_mask_gives_the_masked_hf_loss(rollout_model, lengths):
    from learner.sft_step import assistant_token_loss

    model, _ = rollout_model
    rng = random.Random(0)
    examples = []
    for n in lengths:
        ids = [rng.randrange(1000) for _ in range(n)]
        examples.append(Example(ids, [t if k > n // 2 else IGNORE for k, t in enumerate(ids)]))
    batch = collate_right_padded(examples, pad_id=2)
    assert batch.real_tokens == sum(lengths) and batch.padded_tokens == len(lengths) * max(lengths)
    loss, count = assistant_token_loss(model, batch, autocast=False)
    reference = model(**collate_padded(examples, pad_id=2)).loss  # mean over assistant tokens of the batch
    assert count == sum(n - n // 2 - 1 for n in lengths)
    assert torch.allclose(loss, reference, atol=1e-5)
