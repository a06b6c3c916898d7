"""What the hf engine's prefix cache (`serve.hf_prefix_cache_tokens`, serve/engines/hf.py `_PrefixCache`) buys an
agent run's second turn: A computes every prompt from its first token (the setting 0, as shipped), B reuses the KV
rows of the longest prefix prefilled earlier (the prompt the turn continues; the system message and tool schemas
every task of the pack shares). One engine in one process, the setting switched between windows (B starts each
window with an empty cache); A and B alternate (`ops/bench/ab.py`), the first side of each pair alternating, one
untimed window per side first.

A window is `--groups` groups of `--group-size` rollouts of one everyday train prompt, sent together as an agent
run's rollouts are. Each rollout has two turns, as the agent loop builds them (serve/agent.py): its first turn's
tokens, then the tool's answer rendered by the chat template (a fixed result: the engine's cost does not depend on
what it says), then a second turn; a rollout sends its second turn as soon as its first ends. Both sides get the
same prompts and seeds in a pair. The figure is generated tokens per second (both turns).

    .venv/bin/python -m ops.bench.serve.prefix_cache [--pairs 3] [--groups 3] [--out bench/serve/prefix-cache]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from slca.cli.flags import add_flags, flag

TOOL_RESULT = '{"result": "ok", "value": 42}'

FLAGS = (
    flag("--pairs", type=int, default=3),
    flag("--groups", type=int, default=3, help="groups per window"),
    flag("--group-size", type=int, default=8),
    flag("--max-tokens", type=int, default=128, help="most new tokens per turn"),
    flag("--cache-tokens", type=int, default=16384, help="serve.hf_prefix_cache_tokens on side B"),
    flag("--dtype", help="serve.hf_dtype (default: the configured one)"),
    flag("--model", help="model directory or name (default: the warm start, else common.model)"),
    flag("--out", help="write results.json and table.md here (a path relative to the repo)"),
)


def main() -> int:
    args = add_flags(argparse.ArgumentParser(description=__doc__.splitlines()[0]), FLAGS).parse_args()

    from ops.bench.ab import Measurement, report
    from ops.bench.serve.hf_ab import alternate_setting, everyday_tasks, load_engine, per_side
    from ops.bench.serve.hf_ab import header as hf_header
    from serve.engines.base import SamplingParams, generate
    from serve.prompting import continuation_ids, to_template_messages
    from serve.turns import decode_turn
    from slca.chat.hermes import render_tool_response
    from slca.chat.messages import prompt_ids

    engine, settings, model = load_engine(args.model, {"hf_dtype": args.dtype} if args.dtype else {})
    tok = engine.tokenizer
    prompts = [
        (prompt_ids(tok, t.messages, t.tools), to_template_messages(t.messages, t.tools)) for t in everyday_tasks()
    ]
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    async def rollout(ids: list[int], history: list[dict], seed: int) -> int:
        first = await generate(engine, ids, SamplingParams(temperature=1.0, max_tokens=args.max_tokens, seed=seed))
        turn = decode_turn(engine, first)
        answer = [{"role": "tool", "content": render_tool_response(TOOL_RESULT)}]
        env = continuation_ids(tok, history + [{"role": "assistant", "content": turn.text}], answer, turn.closed)
        second_ids = ids + first.token_ids + env
        budget = min(args.max_tokens, settings.max_model_len - len(second_ids))
        if budget <= 0:
            return len(first.token_ids)
        second = await generate(engine, second_ids, SamplingParams(temperature=1.0, max_tokens=budget, seed=seed + 1))
        return len(first.token_ids) + len(second.token_ids)

    async def group(ids, history, g: int) -> int:  # a group's rollouts sent at once, as an agent run's are
        return sum(await asyncio.gather(*(rollout(ids, history, 1000 * g + k) for k in range(args.group_size))))

    loop.run_until_complete(engine.start())

    def window(cache_tokens: int, first: int) -> Measurement:
        engine.settings = settings.model_copy(update={"hf_prefix_cache_tokens": 0})
        loop.run_until_complete(generate(engine, [1, 2], SamplingParams(max_tokens=1)))  # drops B's cache
        engine.settings = settings.model_copy(update={"hf_prefix_cache_tokens": cache_tokens})
        computed, reused = engine.stats.prompt_tokens_computed, engine.stats.prompt_tokens_reused
        tokens, t0 = 0, time.perf_counter()
        for g in range(args.groups):
            ids, history = prompts[(first + g) % len(prompts)]
            tokens += loop.run_until_complete(group(ids, history, g))
        seconds = time.perf_counter() - t0
        detail = {
            "generated_tokens": tokens,
            "prompt_tokens_computed": engine.stats.prompt_tokens_computed - computed,
            "prompt_tokens_reused": engine.stats.prompt_tokens_reused - reused,
        }
        return Measurement(tokens / seconds, tokens, seconds, args.groups, detail)

    a = ("every prompt from its first token", 0)
    b = (f"prefix cache of {args.cache_tokens} tokens", args.cache_tokens)
    try:
        result = alternate_setting(window, a, b, args.pairs, args.groups, len(prompts))
    finally:
        loop.run_until_complete(engine.close())
    header = hf_header(
        "python -m ops.bench.serve.prefix_cache",
        model,
        settings,
        args,
        max_tokens_per_turn=args.max_tokens,
        cache_tokens=args.cache_tokens,
    )
    computed = per_side(result, lambda d: f"{d['prompt_tokens_computed']} computed, {d['prompt_tokens_reused']} reused")
    report(
        args.out,
        header,
        result,
        "generated tokens/s",
        ("Prompt tokens per window:", computed),
        "python -m ops.bench.serve.prefix_cache",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
