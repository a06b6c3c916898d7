"""In-process greedy generation with transformers for evaluation: batched, left-padded, Hermes tool prompts.

Evaluation needs determinism and no running system: prompts are the API's (`slca.chat.messages.prompt_ids`), the
generation is the shared offline path (`slca.models.generate`), also the warm start's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from slca.chat.messages import prompt_ids
from slca.models.generate import greedy_texts


def default_threads() -> int | None:
    """One intra-op thread on a machine with ≤ 2 cores: there the eval shares the cores with other processes, and
    OpenMP threads that spin-wait for each other collapse (tiny model, 8×32 tokens, busy 2-core machine: 0.62 s with
    1 thread in fp32 vs 3.59 s with 2; bf16 was slower than fp32 for HF generate: 1.54 s vs 0.62 s)."""
    cores = os.cpu_count() or 1
    return 1 if cores <= 2 else None


class HfGenerator:
    def __init__(self, model_dir: Path, max_new_tokens: int = 256, dtype: str = "float32", threads: int | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        threads = threads or default_threads()
        if threads:
            torch.set_num_threads(threads)
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).eval()
        self.max_new_tokens = max_new_tokens

    def prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        return prompt_ids(self.tokenizer, messages, tools)

    def generate(self, prompts: list[list[int]]) -> list[str]:
        """Greedy completions of a batch of prompts (`slca.models.generate`: text after the prompt, special
        tokens dropped)."""
        return greedy_texts(self.model, self.tokenizer, prompts, self.max_new_tokens)
