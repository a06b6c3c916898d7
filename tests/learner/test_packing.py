"""The packed shared-prefix row gives exactly the logprobs of separate forwards."""

from __future__ import annotations

import pytest
import torch

from learner.forward import select_rows, token_logprobs
from learner.packing import common_prefix_len, pack_group


@pytest.mark.parametrize(
    "seqs",
    [
        [[1, 5, 6, 7, 8, 9], [1, 5, 6, 7, 20, 21, 22], [1, 5, 6, 30]],  # shared prompt
        [[1, 2, 3], [4, 5, 6, 7]],  # nothing shared
        [[1, 2, 3, 4], [1, 2, 3, 4]],  # identical members: each keeps its last token
        [[9, 8, 7, 6, 5]],  # G = 1
    ],
)
@pytest.mark.parametrize("share", [True, False])
def test_packed_logprobs_equal_separate_forwards(rollout_model, seqs, share):
    model, _ = rollout_model
    packed = pack_group(seqs, share_prefix=share)
    selected = [torch.arange(1, len(s)) for s in seqs]
    rows, targets = select_rows(packed, seqs, selected)
    with torch.no_grad():
        got = token_logprobs(model, packed, rows, targets, autocast=False).logprobs
        want = []
        for s in seqs:
            logp = model(torch.tensor([s])).logits[0].log_softmax(-1)
            want.append(logp[:-1].gather(-1, torch.tensor(s[1:])[:, None])[:, 0])
    assert torch.allclose(got, torch.cat(want), atol=1e-5)
    assert packed.length == sum(map(len, seqs)) - (len(seqs) - 1) * packed.prefix_len


def test_common_prefix_is_capped_to_leave_each_member_a_token():
    assert common_prefix_len([[1, 2, 3], [1, 2, 3]]) == 2
    assert common_prefix_len([[1, 2], [1, 3]]) == 1
    assert common_prefix_len([[1, 2, 3]]) == 0


@pytest.mark.parametrize("chunk_rows", [1, 3, 0])
def test_chunked_head_gives_the_same_logprobs_entropy_and_gradients(rollout_model, chunk_rows):
    """Chunks of rows under checkpointing (learner/forward.py) change neither the values nor the gradients."""
    model, _ = rollout_model
    seqs = [[1, 5, 6, 7, 8, 9], [1, 5, 6, 7, 20, 21, 22], [1, 5, 6, 30]]
    packed = pack_group(seqs)
    rows, targets = select_rows(packed, seqs, [torch.arange(1, len(s)) for s in seqs])
    runs = []
    for chunk in (chunk_rows, len(rows)):  # the chunked run, then the whole selection at once
        model.zero_grad(set_to_none=True)
        out = token_logprobs(model, packed, rows, targets, autocast=False, chunk_rows=chunk)
        (out.logprobs * torch.linspace(-1, 1, len(rows))).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        runs.append((out.logprobs.detach(), out.entropy, grads))
    (lp, ent, grads), (lp_all, ent_all, grads_all) = runs
    model.zero_grad(set_to_none=True)
    torch.testing.assert_close(lp, lp_all)
    torch.testing.assert_close(ent, ent_all)
    assert grads and set(grads) == set(grads_all)
    for name, grad in grads.items():  # equal but for fp32 summation order (13 small matmuls vs one)
        scale = float(grads_all[name].abs().max())
        torch.testing.assert_close(grad, grads_all[name], rtol=1e-3, atol=1e-3 * scale)
    full = model(packed.input_ids, position_ids=packed.position_ids, attention_mask=packed.attention_mask).logits[0]
    with torch.no_grad():  # entropy of the full distribution at each selected row
        logp_full = full[rows].float().log_softmax(-1)
        torch.testing.assert_close(ent, -(logp_full.exp() * logp_full).sum(-1), rtol=1e-4, atol=1e-5)
