"""The `llm` backend: a model behind an OpenAI-compatible endpoint, prompted as the tool's API server.

Guided decoding first (`response_format: json_schema`, which vLLM turns into structured outputs); when the
endpoint refuses it (4xx) in 'auto' mode we stop sending it and rely on validate-and-retry; whatever
fails, the schema synthesiser answers.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from sim.backends.base import Answer, SimRequest, build_prompt, validate_and_retry


class LlmBackend:
    name = "llm"

    def __init__(self, settings):
        if not settings.llm_base_url:
            raise ValueError("sim.backend = 'llm' needs sim.llm_base_url (an OpenAI-compatible endpoint)")
        if settings.llm_guided not in ("auto", "on", "off"):
            raise ValueError("sim.llm_guided must be 'auto', 'on' or 'off'")
        self.settings = settings
        self.url = settings.llm_base_url.rstrip("/") + "/chat/completions"
        self.guided = settings.llm_guided != "off"
        self._session: aiohttp.ClientSession | None = None
        self.requests_sent = 0

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            headers = {"Authorization": f"Bearer {self.settings.llm_api_key}"} if self.settings.llm_api_key else {}
            timeout = aiohttp.ClientTimeout(total=self.settings.llm_timeout_s)
            self._session = aiohttp.ClientSession(headers=headers, timeout=timeout)
        return self._session

    def _body(self, request: SimRequest, attempt: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.settings.llm_model,
            "messages": build_prompt(request),
            "temperature": self.settings.temperature if attempt else min(self.settings.temperature, 0.3),
            "max_tokens": self.settings.max_new_tokens,
            "seed": (request.seed + attempt) % (2**31),
        }
        if self.guided:
            schema_name = "".join(c if c.isalnum() or c in "_-" else "_" for c in request.spec.name)[:60] or "response"
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": request.response_schema},
            }
        return body

    async def _ask(self, request: SimRequest, attempt: int) -> str | None:
        for _ in range(2):  # second pass only after dropping an unsupported response_format
            self.requests_sent += 1
            try:
                async with self._client().post(self.url, json=self._body(request, attempt)) as resp:
                    if resp.status in (400, 422) and self.guided and self.settings.llm_guided == "auto":
                        self.guided = False
                        continue
                    if resp.status != 200:
                        return None
                    payload = await resp.json(content_type=None)
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
                return None
            try:
                return payload["choices"][0]["message"]["content"] or ""
            except (KeyError, IndexError, TypeError):
                return None
        return None

    async def respond(self, request: SimRequest) -> Answer:
        return await validate_and_retry(request, lambda i: self._ask(request, i), self.settings.max_retries)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
