"""What the hf engine's shared-prompt prefill (`serve.hf_shared_prefill`, serve/engines/hf.py `_prefill`) buys a
training group: A computes every request's prompt on its own row (the setting off, as before), B computes each
distinct prompt once and repeats its KV rows (the default). One engine in one process (one torch thread, one OpenMP
team), the setting switched between windows; A and B alternate (`ops/bench/ab.py`), the first side of each pair
alternating, one untimed window per side first.

A window is `--groups` groups, each `--group-size` requests of one everyday train prompt (rendered with its tools
as the API renders it) sent together, as an agent run's rollouts reach the engine; both sides get the same prompts
and seeds in a pair. The figure is generated tokens per second.

    .venv/bin/python -m ops.bench.serve.shared_prefill [--pairs 3] [--groups 3] [--out bench/serve/shared-prefill]
"""

from __future__ import annotations

import argparse
import asyncio
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--groups", type=int, default=3, help="groups per window")
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--model", help="model directory or name (default: the warm start, else common.model)")
    p.add_argument("--out", help="write results.json and table.md here (a path relative to the repo)")
    args = p.parse_args()

    from ops.bench.ab import Measurement, report
    from ops.bench.serve.hf_ab import alternate_setting, everyday_tasks, load_engine, per_side
    from ops.bench.serve.hf_ab import header as hf_header
    from serve.engines.base import SamplingParams, generate
    from slca.chat.messages import prompt_ids

    engine, settings, model = load_engine(args.model, {})
    prompts = [prompt_ids(engine.tokenizer, t.messages, t.tools) for t in everyday_tasks()]
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    async def together(coroutines):  # a group's requests sent at once, as an agent run's rollouts are
        return await asyncio.gather(*coroutines)

    loop.run_until_complete(engine.start())

    def window(shared: bool, first: int) -> Measurement:
        engine.settings = settings.model_copy(update={"hf_shared_prefill": shared})
        tokens, prompt_tokens, t0 = 0, 0, time.perf_counter()
        for g in range(args.groups):
            ids = prompts[(first + g) % len(prompts)]
            params = [
                SamplingParams(temperature=1.0, max_tokens=args.max_tokens, seed=1000 * g + k)
                for k in range(args.group_size)
            ]
            outs = loop.run_until_complete(together(generate(engine, ids, sp) for sp in params))
            tokens += sum(len(o.token_ids) for o in outs)
            prompt_tokens += len(ids)
        seconds = time.perf_counter() - t0
        detail = {"generated_tokens": tokens, "prompt_tokens_per_group": round(prompt_tokens / args.groups)}
        return Measurement(tokens / seconds, tokens, seconds, args.groups, detail)

    a, b = ("every prompt on its own row", False), ("shared prompt prefilled once", True)
    try:
        result = alternate_setting(window, a, b, args.pairs, args.groups, len(prompts))
    finally:
        loop.run_until_complete(engine.close())
    header = hf_header("python -m ops.bench.serve.shared_prefill", model, settings, args, max_tokens=args.max_tokens)
    per_window = per_side(result, lambda d: d["prompt_tokens_per_group"])
    report(
        args.out,
        header,
        result,
        "generated tokens/s",
        ("Prompt tokens per group, per window:", per_window),
        "python -m ops.bench.serve.shared_prefill",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
