"""A small OpenAI-compatible chat endpoint running a real HF model with transformers, for the llm backend tests.

Modes: 'guided' honours `response_format: json_schema` with xgrammar (as vLLM does); 'unguided' refuses
it with HTTP 400 (as endpoints without structured outputs do); 'fail_first' answers the first request
with HTTP 500, then behaves as 'guided'. It records every request body it receives.
"""

from __future__ import annotations

import asyncio
from functools import lru_cache
from typing import Any

from aiohttp import web

from sim.backends.guided import GrammarCache, generate

MODE = web.AppKey("mode", str)
STATE = web.AppKey("state", dict)


@lru_cache(maxsize=2)
def _load(model_dir: str):
    """Model, tokenizer and grammar compiler, loaded once per test session (the tests share them)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    return model, tokenizer, GrammarCache(tokenizer, model.config.vocab_size, [tokenizer.eos_token_id])


def make_llm_app(model_dir: str, mode: str) -> web.Application:
    import torch

    model, tokenizer, grammars = _load(model_dir)
    app = web.Application()
    app[MODE] = mode
    app[STATE] = {"requests": [], "lock": asyncio.Lock()}

    def complete(body: dict[str, Any]) -> str:
        prompt = tokenizer.apply_chat_template(body["messages"], tokenize=False, add_generation_prompt=True)
        ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        fmt = body.get("response_format") or {}
        matcher = grammars.matcher(fmt["json_schema"]["schema"]) if fmt.get("type") == "json_schema" else None
        with torch.inference_mode():
            return generate(
                model,
                tokenizer,
                ids,
                int(body.get("max_tokens", 32)),
                float(body.get("temperature", 1.0)),
                int(body.get("seed", 0)),
                matcher,
            )

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        state = request.app[STATE]
        state["requests"].append(body)
        if app[MODE] == "fail_first" and len(state["requests"]) == 1:
            return web.json_response({"error": {"message": "engine warming up"}}, status=500)
        if app[MODE] == "unguided" and "response_format" in body:
            return web.json_response({"error": {"message": "response_format is not supported"}}, status=400)
        async with state["lock"]:
            text = await asyncio.to_thread(complete, body)
        return web.json_response(
            {
                "id": "cmpl-test",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            }
        )

    app.router.add_post("/v1/chat/completions", chat)
    return app
