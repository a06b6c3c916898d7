"""Policy losses: clipping, k3 KL, aggregation, truncated importance weights, registry."""

from __future__ import annotations

import pytest
import torch

from learner.advantages.batch import SUMMARY, TOOL_CALL
from learner.settings import LossSettings
from learner.loss import LOSSES, LossInputs, UnknownLossError, get_loss, k3_kl
from slca.contracts import SegmentKind


def inputs(logp, behaviour, adv, seq=None, kinds=None, ref=None, total_tokens=1, total_seqs=1):
    logp = torch.tensor(logp, requires_grad=True)
    n = logp.numel()
    return LossInputs(
        logprobs=logp,
        behaviour=torch.tensor(behaviour),
        advantages=torch.tensor(adv),
        seq=torch.tensor(seq if seq is not None else [0] * n),
        kinds=torch.tensor(kinds or [TOOL_CALL] * n),
        ref_logprobs=None if ref is None else torch.tensor(ref),
        total_tokens=total_tokens,
        total_seqs=total_seqs,
    )


def test_on_policy_gradient_is_minus_advantage_over_tokens():
    x = inputs([-1.0, -2.0, -0.5], [-1.0, -2.0, -0.5], [1.0, -2.0, 0.5], total_tokens=3)
    loss, _ = get_loss("clip")(x, LossSettings())
    loss.backward()
    assert torch.allclose(x.logprobs.grad, -torch.tensor([1.0, -2.0, 0.5]) / 3)


@pytest.mark.parametrize(
    "delta,adv,clipped",
    [(0.5, 1.0, True), (0.5, -1.0, False), (-0.5, -1.0, True), (-0.5, 1.0, False), (0.1, 1.0, False)],
)
def test_clip_cuts_the_gradient_outside_the_trust_region(delta, adv, clipped):
    x = inputs([-1.0 + delta], [-1.0], [adv])
    loss, metrics = get_loss("clip")(x, LossSettings(eps_low=0.2, eps_high=0.28))
    loss.backward()
    assert (float(x.logprobs.grad[0]) == 0.0) == clipped
    assert metrics.all.clip == float(clipped)


def test_k3_kl_is_nonnegative_and_zero_at_equality():
    a = torch.tensor([-1.0, -2.0, -0.1])
    assert torch.allclose(k3_kl(a, a), torch.zeros(3))
    assert bool((k3_kl(a, a + torch.tensor([0.3, -0.7, 0.05])) > 0).all())
    x = inputs([-1.0, -1.0], [-1.0, -1.0], [0.0, 0.0], ref=[-1.5, -0.5], total_tokens=2)
    loss, metrics = get_loss("clip")(x, LossSettings(kl_beta=0.1))
    assert float(loss.detach()) == pytest.approx(0.1 * float(k3_kl(x.logprobs, x.ref_logprobs).detach().mean()))
    assert metrics.all.kl > 0


def test_seq_mean_weights_sequences_equally():
    x = inputs([-1.0] * 4, [-1.0] * 4, [1.0, 1.0, 1.0, -3.0], seq=[0, 0, 0, 1], total_tokens=4, total_seqs=2)
    tok, _ = get_loss("clip")(x, LossSettings())
    seq, _ = get_loss("clip")(x, LossSettings(aggregation="seq_mean"))
    assert float(tok) == pytest.approx(0.0)
    assert float(seq) == pytest.approx(-(1.0 + -3.0) / 2)


@pytest.mark.parametrize(
    "delta,adv,bounded",
    [
        (0.5, 1.0, True),  # ρ = e^0.5 > 1 + ε_high, A > 0: clipped
        (-0.5, -1.0, True),  # ρ = e^-0.5 < 1 − ε_low, A < 0: clipped
        (0.5, -1.0, False),  # ρ = e^0.5 ≤ C, A < 0: the unclipped branch, gradient −ρA
        (2.0, -1.0, True),  # ρ = e² > C = 2, A < 0: truncated at C (dual-clip), no gradient
        (0.1, 1.0, False),  # inside the trust region
    ],
)
def test_clip_tis_ratio_is_against_behaviour_logprobs__clips_and_truncates_negative_advantages_at_cap(
    delta, adv, bounded
):
    """Choice: ρ against the trajectory's behaviour logprobs (not the learner's detached recompute, whose ratio is
    ≡ 1 and never clips); the importance weight of the unclipped branch is truncated at `tis_cap`."""
    x = inputs([-1.0], [-1.0 - delta], [adv])
    loss, metrics = get_loss("clip_tis")(x, LossSettings(eps_low=0.2, eps_high=0.28, tis_cap=2.0))
    loss.backward()
    grad = float(x.logprobs.grad[0])
    assert grad == (0.0 if bounded else pytest.approx(-float(torch.exp(torch.tensor(delta))) * adv))
    assert metrics.all.clip == float(bounded)
    assert metrics.all.ratio == pytest.approx(float(torch.exp(torch.tensor(delta))))


def test_clip_tis_equals_clip_where_the_ratio_is_below_the_cap():
    torch.manual_seed(0)
    logp, beh, adv = -torch.rand(64) * 3, -torch.rand(64) * 3, torch.randn(64)
    keep = torch.exp(logp - beh) <= 2.0
    a, b = (
        inputs(logp[keep].tolist(), beh[keep].tolist(), adv[keep].tolist(), total_tokens=int(keep.sum()))
        for _ in range(2)
    )
    config = LossSettings(tis_cap=2.0)
    assert float(get_loss("clip_tis")(a, config)[0]) == pytest.approx(float(get_loss("clip")(b, config)[0]))


def test_metrics_per_kind_and_unknown_loss():
    x = inputs([-1.0, -1.1], [-1.0, -1.0], [0.5, -1.5], kinds=[TOOL_CALL, SUMMARY], total_tokens=2)
    _, sums = get_loss("clip")(x, LossSettings())
    m = sums.means()
    assert m.by_kind[SegmentKind.TOOL_CALL].adv == 0.5 and m.by_kind[SegmentKind.SUMMARY].adv_abs == 1.5
    assert m.by_kind[SegmentKind.SUMMARY].logprob_gap == pytest.approx(0.1)
    assert SegmentKind.REASONING not in m.by_kind and m.all.tokens == 2 and m.all.kl is None
    assert set(LOSSES) == {"clip", "clip_tis"}
    with pytest.raises(UnknownLossError, match="known: clip, clip_tis"):
        get_loss("ppo2")
