"""LoRA (merged before publishing, full HF names), gradient checkpointing, and exact checkpoint resume."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM

from learner.checkpoint import LearnerState, load_checkpoint, save_checkpoint
from learner.model import load_policy
from learner.settings import LearnerSettings
from learner.trainer import Trainer
from slca.weights import write_version
from tests.learner.two_tools import TwoToolTask


def _group(rollout_model, seed=4):
    model, tokenizer = rollout_model
    return TwoToolTask(tokenizer, seed=seed).group(model, 0, size=4)


def test_lora_trains_adapters_and_publishes_merged_full_weights(rollout_model, tiny_model_dir, tmp_path):
    settings = LearnerSettings(lora_rank=4, lr=1e-2, precision="fp32", skip_zero_advantage_groups=False)
    policy = load_policy(tiny_model_dir, settings)
    trainer = Trainer(policy, settings)
    trainable = {n for n, p in policy.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    report = trainer.train_step([_group(rollout_model)])
    assert report.stats.grad_norm > 0
    manifest = write_version(policy.model, tiny_model_dir, tmp_path / "weights", 1, 1, "tiny")
    assert manifest.verify() == []
    plain = AutoModelForCausalLM.from_pretrained(manifest.path, dtype=torch.float32)
    ids = torch.tensor([[1, 200, 300, 400]])
    with torch.no_grad():
        want = policy.model(input_ids=ids).logits
        got = plain(input_ids=ids).logits
        base = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32)(input_ids=ids).logits
    assert torch.allclose(got, want, atol=1e-4) and not torch.allclose(got, base, atol=1e-4)


def test_gradient_checkpointing_gives_the_same_gradients(rollout_model, tiny_model_dir):
    group = _group(rollout_model)
    grads = []
    for ckpt in (False, True):
        torch.manual_seed(0)
        settings = LearnerSettings(
            gradient_checkpointing=ckpt, precision="fp32", max_grad_norm=0.0, skip_zero_advantage_groups=False, lr=0.0
        )
        policy = load_policy(tiny_model_dir, settings)
        trainer = Trainer(policy, settings)
        trainer._apply = lambda: 0.0  # keep the gradients to compare them
        trainer.train_step([group])
        grads.append(torch.cat([p.grad.flatten() for p in policy.model.parameters() if p.grad is not None]))
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_checkpoint_resume_is_exact(rollout_model, tiny_model_dir, tmp_path):
    """Two steps straight == one step, checkpoint, reload into a fresh learner, one step."""
    g1, g2 = _group(rollout_model, 5), _group(rollout_model, 6)
    settings = LearnerSettings(lr=1e-3, precision="fp32", skip_zero_advantage_groups=False)

    straight = Trainer(load_policy(tiny_model_dir, settings), settings)
    straight.train_step([g1])
    straight.train_step([g2])

    first = Trainer(load_policy(tiny_model_dir, settings), settings)
    first.train_step([g1])
    save_checkpoint(
        tmp_path, LearnerState(step=1, version=1, consumed=[g1.group_id]), first.policy.model, first.optimizer
    )
    resumed = Trainer(load_policy(tiny_model_dir, settings), settings)
    state = load_checkpoint(tmp_path, resumed.policy.model, resumed.optimizer)
    assert state.step == 1 and state.consumed == [g1.group_id]
    resumed.train_step([g2])
    for (name, a), b in zip(straight.policy.model.state_dict().items(), resumed.policy.model.state_dict().values()):
        assert torch.equal(a, b), name
