"""`grouped_decode`: the hf engine's attention for `serve.hf_attention=grouped_decode` — SDPA for a prefill, and for
a decode step (one query per row) two batched matmuls over the cache's KV heads as they are.

Why (bench/serve/hf_decode_probe.py, docs/cpu-facts.md#serving): in a decode step SDPA on CPU took 47% of the step
in its flash kernel (5.2 ms a layer for one query per row over ~900 cached positions, bf16), and with a padding mask
transformers first repeats every KV head for each query head that shares it (grouped-query attention), copying the
whole cache each layer and step. One query per row needs neither: the query heads that share a KV head are
grouped onto it, so the scores are one (group × head_dim) by (head_dim × positions) product per row and KV head.
"""

from __future__ import annotations

NAME = "slca_grouped_decode"


def grouped_decode_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """query (batch, heads, q_len, dim); key, value (batch, kv_heads, positions, dim); attention_mask as
    transformers' SDPA mask builds it (boolean, True where a position is attended; or None). Returns
    (batch, q_len, heads, dim) and no weights, as transformers' attention functions do."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if query.shape[2] != 1 or dropout:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    batch, heads, _, dim = query.shape
    kv_heads = key.shape[1]
    scale = scaling if scaling is not None else dim**-0.5
    # heads are kv-head-major (query head h uses kv head h // group), as transformers' repeat_kv lays them out
    grouped = query.reshape(batch, kv_heads, heads // kv_heads, dim)
    scores = torch.matmul(grouped, key.transpose(-1, -2)).float() * scale  # (batch, kv_heads, group, positions)
    if attention_mask is not None:
        mask = attention_mask[:, :, -1:, -key.shape[2] :]  # (batch, 1, 1, positions): the one query's row
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask
    probs = torch.softmax(scores, dim=-1).to(value.dtype)
    out = torch.matmul(probs, value)  # (batch, kv_heads, group, dim)
    return out.reshape(batch, 1, heads, dim), None


def register() -> str:
    """Make `NAME` known to transformers (the attention, and SDPA's mask for it); returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, grouped_decode_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME
