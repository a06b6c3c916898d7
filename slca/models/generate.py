"""Batched greedy generation with transformers: left-padded prompts, the new token ids back.

The one offline generation path of the components that cannot import each other: evaluation (`ops.experiments.eval`)
and the warm start's before/after check (`learner.sft`). The served path (`serve/engines/`) streams, samples and swaps
weights; this one only answers "what does the model say, greedily, to these prompts".
"""

from __future__ import annotations


def left_padded(prompts: list[list[int]], pad_id: int):
    """(input_ids, attention_mask) tensors of shape (B, T): each prompt right-aligned, padding masked out."""
    import torch

    width = max(map(len, prompts))
    ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    return ids, mask


def greedy_new_ids(model, tokenizer, prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
    """The greedy continuation of each prompt (token ids after the prompt, padding included at the end of the
    shorter ones: decode with `skip_special_tokens`)."""
    import torch

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    ids, mask = left_padded(prompts, pad_id)
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids.to(model.device),
            attention_mask=mask.to(model.device),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=pad_id,
        )
    return out[:, ids.shape[1] :].tolist()


def greedy_texts(model, tokenizer, prompts: list[list[int]], max_new_tokens: int) -> list[str]:
    """`greedy_new_ids` decoded, special tokens dropped."""
    return [
        tokenizer.decode(row, skip_special_tokens=True)
        for row in greedy_new_ids(model, tokenizer, prompts, max_new_tokens)
    ]
