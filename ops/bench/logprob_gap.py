"""`slca bench logprob-gap`: behaviour-logprob gap, vLLM engine (bf16, as served) vs a transformers fp32
teacher-forced recompute of the same tokens.

    slca bench logprob-gap [--model embedded|tiny|DIR] [--prompts 8] [--max-tokens 64]

Training depends on this gap: the learner's importance ratio exp(logπ_θ − logπ_behaviour) starts at
exp(±gap) even before any update.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from ops.bench.serve.load import PROMPTS


async def sample_vllm(model_dir: str, prompts: int, max_tokens: int):
    from serve.engines.base import SamplingParams, create_engine, generate
    from serve.prompting import prompt_chunks, to_template_messages
    from serve.settings import ServeSettings

    engine = create_engine("vllm", model_dir, ServeSettings(engine="vllm", max_model_len=1024, kv_cache_gib=1))
    await engine.start()
    try:
        seqs = []
        for i in range(prompts):
            msgs = to_template_messages([{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}], None)
            ids = [t for chunk, _ in prompt_chunks(engine.tokenizer, msgs) for t in chunk]
            seqs.append((ids, SamplingParams(temperature=1.0, max_tokens=max_tokens, seed=i)))
        results = await asyncio.gather(*(generate(engine, ids, p) for ids, p in seqs))
        return [(ids, r.token_ids, r.logprobs) for (ids, _), r in zip(seqs, results)]
    finally:
        await engine.close()


def recompute(model_dir: str, samples):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    gaps = []
    for prompt, generated, behaviour in samples:
        tokens = prompt + generated
        with torch.inference_mode():
            logp = torch.log_softmax(model(torch.tensor([tokens])).logits[0].float(), -1)
        for k, lp in enumerate(behaviour):
            pos = len(prompt) + k
            gaps.append(abs(float(logp[pos - 1, tokens[pos]]) - lp))
    return gaps


def run_logprob_gap(args, config) -> int:
    from slca.models.paths import find_model_dir

    model_dir = find_model_dir(args.model or config.common.model, config.common.cache_dir)
    samples = asyncio.run(sample_vllm(str(model_dir), args.prompts, args.max_tokens))
    gaps = sorted(recompute(str(model_dir), samples))
    mean = sum(gaps) / len(gaps)
    p99 = gaps[int(0.99 * (len(gaps) - 1))]
    print(
        f"model={Path(model_dir).name} tokens={len(gaps)} vLLM bf16 vs transformers fp32 |logprob gap|: "
        f"mean {mean:.4f}  median {gaps[len(gaps) // 2]:.4f}  p99 {p99:.4f}  max {gaps[-1]:.4f}"
    )
    return 0
