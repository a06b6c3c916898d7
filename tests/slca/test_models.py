"""The embedded model: fetched once, generates with transformers and with vLLM; greedy outputs agree."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROMPT = [{"role": "user", "content": "What is the capital of France?"}]
N_TOKENS = 16

VLLM_SCRIPT = r"""
import json, sys
from vllm import LLM, SamplingParams
llm = LLM(model=sys.argv[1], dtype="bfloat16", enforce_eager=True, max_model_len=512, seed=0,
          gpu_memory_utilization=0.15)  # on CPU: the share of RAM reserved for the KV cache
prompt_ids = json.loads(sys.argv[2])
out = llm.generate([{"prompt_token_ids": prompt_ids}], SamplingParams(temperature=0.0, max_tokens=int(sys.argv[3])))
print("RESULT " + json.dumps(list(out[0].outputs[0].token_ids)))
"""


def _prompt_ids(model_dir) -> list[int]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    return list(tok.apply_chat_template(PROMPT, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])


def _hf_greedy(model_dir, prompt_ids: list[int]) -> list[int]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    out = model.generate(torch.tensor([prompt_ids]), max_new_tokens=N_TOKENS, do_sample=False)
    return out[0, len(prompt_ids) :].tolist()


def test_checksums_make_fetch_idempotent(embedded_model_dir):
    from slca.models.checksums import verify_checksums

    assert verify_checksums(embedded_model_dir)
    assert (embedded_model_dir / "model.safetensors").stat().st_size > 500_000_000
    config = json.loads((embedded_model_dir / "config.json").read_text())
    assert "quantization_config" not in config and config["num_hidden_layers"] == 30


def test_tiny_model_shares_tokenizer(tiny_model_dir, embedded_model_dir):
    config = json.loads((tiny_model_dir / "config.json").read_text())
    assert config["num_hidden_layers"] == 2 and config["vocab_size"] == 49152
    assert (tiny_model_dir / "tokenizer.json").read_bytes() == (embedded_model_dir / "tokenizer.json").read_bytes()


@pytest.mark.slow
def test_transformers_and_vllm_agree_greedy(embedded_model_dir):
    from transformers import AutoTokenizer

    prompt_ids = _prompt_ids(embedded_model_dir)
    hf_ids = _hf_greedy(embedded_model_dir, prompt_ids)
    text = AutoTokenizer.from_pretrained(embedded_model_dir).decode(hf_ids)
    assert "Paris" in text, text
    # vLLM in its own process: its engine state must not leak into the test process.
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    proc = subprocess.run(
        [sys.executable, "-c", VLLM_SCRIPT, str(embedded_model_dir), json.dumps(prompt_ids), str(N_TOKENS)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    vllm_ids = json.loads(lines[-1][7:])
    # bf16 vs fp32 may diverge late on near-ties; the first tokens must agree
    assert vllm_ids[:4] == hf_ids[:4], (vllm_ids, hf_ids)
