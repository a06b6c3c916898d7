"""`grouped_decode`: the hf engine's attention for `serve.hf_attention=grouped_decode` — SDPA for a prefill, and for
a decode step (one query per row) SDPA over the cache's KV heads as they are, the query heads that share a KV head
folded into that head's queries.

Why (ops/bench/serve/hf_decode_probe.py, docs/cpu-facts.md#serving): in a decode step SDPA on CPU took 47% of the step
in its flash kernel (5.2 ms a layer for one query per row over ~900 cached positions, bf16), and with a padding mask
transformers first repeats every KV head for each query head that shares it (grouped-query attention), copying the
whole cache each layer and step. One query per row needs no copy: the query heads that share a KV head are
grouped onto it as that head's `group` queries (none of them causal to another: the mask is the one query's row,
broadcast), so SDPA's kernel reads each cached KV head once. (Two plain matmuls instead, the first version, were
no faster than SDPA with the copies on the AMX Xeon: 0.073 against 0.068 s a step.)
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
    # heads are kv-head-major (query head h uses kv head h // group), as transformers' repeat_kv lays them out
    grouped = query.reshape(batch, kv_heads, heads // kv_heads, dim)
    mask = None
    if attention_mask is not None:
        mask = attention_mask[:, :, -1:, -key.shape[2] :]  # (batch, 1, 1, positions): the one query's row
    out = torch.nn.functional.scaled_dot_product_attention(
        grouped, key, value, attn_mask=mask, scale=scaling
    )  # (batch, kv_heads, group, dim)
    return out.reshape(batch, 1, heads, dim), None


def register() -> str:
    """Make `NAME` known to transformers (the attention, and SDPA's mask for it); returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, grouped_decode_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME
