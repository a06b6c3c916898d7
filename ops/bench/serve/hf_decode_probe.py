"""A probe, not a comparison: how long one decode step of the hf engine's model call takes, by attention kernel
(`serve.hf_attention`'s choices), dtype, KV cache (`serve.hf_kv_room_tokens`) and whether an attention mask is
passed — the engine's decode path (one new token per row, a cache holding each row's prompt) without the engine
around it. One model per setting, loaded in turn; the median of 11 steps each; then a torch profile of one bf16
step of each of SDPA and `grouped_decode` (which operators take the step).

    .venv/bin/python -m ops.bench.serve.hf_decode_probe [--rows 8] [--context 900]

Measured 2026-12-03 (docs/cpu-facts.md#serving): 8 rows over a 900-token context, the `slca sft` warm start.
"""

from __future__ import annotations

import argparse
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=8)
    p.add_argument("--context", type=int, default=900)
    p.add_argument("--model", help="model directory or name (default: the warm start, else common.model)")
    args = p.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, DynamicCache

    from ops.experiments.warmstart.model import warm_model_dir
    from serve.engines.hf_attention import register
    from serve.engines.hf_kv import RoomyCache
    from slca.config import load_config
    from slca.models.paths import find_model_dir, is_model_dir

    config = load_config(None, [])
    warm = warm_model_dir(config)
    model_dir = find_model_dir(
        args.model or (str(warm) if is_model_dir(warm) else config.common.model), config.common.cache_dir
    )
    rows, context = args.rows, args.context
    print(f"{model_dir.name}: {rows} rows, {context}-token context, {torch.get_num_threads()} torch threads")
    kernels = {"sdpa": "sdpa", "eager": "eager", "grouped_decode": register()}  # serve.hf_attention's choices
    # (dtype, kernel, serve.hf_kv_room_tokens: 0 is transformers' DynamicCache, > 0 the engine's RoomyCache)
    settings = [(torch.bfloat16, k, 0) for k in kernels] + [(torch.float32, k, 0) for k in ("sdpa", "grouped_decode")]
    settings += [(dtype, k, 128) for dtype in (torch.bfloat16, torch.float32) for k in ("sdpa", "grouped_decode")]
    for dtype, attention, room in settings:
        model = AutoModelForCausalLM.from_pretrained(
            model_dir, dtype=dtype, attn_implementation=kernels[attention]
        ).eval()
        with torch.inference_mode():
            for with_mask in (True, False):
                cache = RoomyCache(room) if room else DynamicCache()
                ids = torch.randint(0, 1000, (rows, context))
                model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
                mask, times = torch.ones(rows, context, dtype=torch.long), []
                for i in range(11):
                    mask = torch.cat([mask, torch.ones(rows, 1, dtype=torch.long)], 1)
                    t0 = time.perf_counter()
                    model(
                        input_ids=torch.randint(0, 1000, (rows, 1)),
                        attention_mask=mask if with_mask else None,
                        position_ids=torch.full((rows, 1), context + i),
                        past_key_values=cache,
                        use_cache=True,
                        logits_to_keep=1,
                    )
                    times.append(time.perf_counter() - t0)
                label = "mask" if with_mask else "no mask"
                kv = f"room {room}" if room else "DynamicCache"
                name = f"{str(dtype).removeprefix('torch.')} {attention} {kv} {label}"
                print(f"{name}: decode step {sorted(times)[5]:.3f} s")
            if dtype == torch.bfloat16 and attention in ("sdpa", "grouped_decode"):
                mask = torch.cat([mask, torch.ones(rows, 1, dtype=torch.long)], 1)
                with torch.profiler.profile() as prof:
                    model(
                        input_ids=torch.randint(0, 1000, (rows, 1)),
                        attention_mask=mask,
                        position_ids=torch.full((rows, 1), context + 11),
                        past_key_values=cache,
                        use_cache=True,
                        logits_to_keep=1,
                    )
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
