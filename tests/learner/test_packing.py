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
