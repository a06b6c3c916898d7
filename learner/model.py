"""Loading the policy for training: device, precision, optional LoRA, gradient checkpointing, DDP."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from learner.ddp import Ranks, join
from learner.forward import TokenLogprobs, token_logprobs
from learner.settings import LearnerSettings


def pick_device() -> torch.device:
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        return torch.device("cuda", local)
    return torch.device("cpu")


def cpu_has_bf16() -> bool:
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def use_autocast(precision: str, device: torch.device) -> bool:
    """bf16 autocast over fp32 master weights: on GPU always for 'auto', on CPU when it has bf16 units."""
    if precision == "fp32":
        return False
    if precision == "bf16":
        return True
    return device.type == "cuda" or cpu_has_bf16()


def load_causal_lm(path: Path, device: torch.device):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32, attn_implementation="sdpa")
    return model.to(device)


def apply_lora(model, settings: LearnerSettings):
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=settings.lora_rank,
        lora_alpha=settings.lora_alpha,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        lora_dropout=0.0,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


class LogprobModule(torch.nn.Module):
    """The policy as one module whose forward gives token logprobs of a packed group, so that DDP (torchrun)
    wraps the real forward and synchronises gradients itself."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, packed, rows, targets, autocast: bool) -> TokenLogprobs:
        return token_logprobs(self.model, packed, rows, targets, autocast)


@dataclass
class Policy:
    model: torch.nn.Module
    """The HF model (a PeftModel under LoRA)."""
    runner: torch.nn.Module
    """What the loss calls: `LogprobModule`, DDP-wrapped under torchrun."""
    device: torch.device
    autocast: bool
    source: Path
    distributed: bool = False


def load_policy(path: Path, settings: LearnerSettings) -> Policy:
    device = pick_device()
    model = load_causal_lm(path, device)
    if settings.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    if settings.lora_rank > 0:
        model = apply_lora(model, settings)
    model.train()
    runner: torch.nn.Module = LogprobModule(model)
    distributed = Ranks.from_env().distributed
    if distributed:
        from torch.nn.parallel import DistributedDataParallel

        join(device, settings.ddp_timeout_s, settings.ddp_allow_public_rendezvous)
        runner = DistributedDataParallel(runner, device_ids=[device.index] if device.type == "cuda" else None)
    return Policy(model, runner, device, use_autocast(settings.precision, device), Path(path), distributed)


def reference_for(path: Path, settings: LearnerSettings, device: torch.device):
    """The frozen reference of the k3 KL (`learner.loss.kl_beta`): a copy of the weights at `path`, the model the
    learner starts from (its warm start), when kl_beta > 0; else None, and no second model is held."""
    return load_reference(path, device) if settings.loss.kl_beta > 0 else None


def load_reference(path: Path, device: torch.device):
    """Frozen reference for the k3 KL (only loaded when kl_beta > 0): eval mode, no parameter requires a gradient
    (the loss also runs it under `torch.no_grad`)."""
    model = load_causal_lm(path, device)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model
