"""`slca model tiny`: a randomly initialised tiny model with the embedded model's architecture and tokenizer.

Tests use it so that every test runs in seconds on 2 cores. head_dim 64 keeps vLLM's CPU attention happy.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from slca.models.checksums import verify_checksums, write_checksums
from slca.models.paths import is_model_dir, tiny_dir

TINY_SHAPE = dict(
    num_hidden_layers=2,
    hidden_size=128,
    intermediate_size=256,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=64,
    max_position_embeddings=4096,
)


def build_tiny(source: Path, cache_dir: Path, seed: int = 0, force: bool = False, target: Path | None = None) -> Path:
    """Build the tiny model from `source`'s config and tokenizer (the embedded model directory)."""
    import torch
    from transformers import AutoConfig, AutoTokenizer, LlamaForCausalLM

    target = target or tiny_dir(cache_dir)
    if not force and verify_checksums(target):
        return target
    if not is_model_dir(source):
        raise FileNotFoundError(f"{source} holds no model; run `slca model fetch` first")
    config = AutoConfig.from_pretrained(source)
    for key, value in TINY_SHAPE.items():
        setattr(config, key, value)
    config.dtype = "float32"
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    staging = target.with_name(target.name + ".tmp")
    if staging.exists():
        shutil.rmtree(staging)
    model.save_pretrained(staging, safe_serialization=True)
    AutoTokenizer.from_pretrained(source).save_pretrained(staging)
    write_checksums(staging, {"source": str(source), "seed": seed})
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
    return target
