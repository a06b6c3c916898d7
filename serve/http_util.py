"""Request parsing shared by the handlers: size-limited JSON body, model name check."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from serve.errors import InvalidJSON, ModelNotFound, PayloadTooLarge
from serve.keys import ENGINE, SETTINGS


async def read_json(request: web.Request) -> Any:
    limit = request.app[SETTINGS].max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(f"request body of {request.content_length} bytes exceeds the limit of {limit}")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes") from None
    if len(raw) > limit:
        raise PayloadTooLarge(f"request body of {len(raw)} bytes exceeds the limit of {limit}")
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidJSON(f"request body is not valid JSON: {exc}") from None


def check_model(request: web.Request, model: str | None) -> str:
    served = request.app[ENGINE].model_name
    if model is not None and model != served:
        raise ModelNotFound(f"The model {model!r} does not exist; this server serves {served!r}", param="model")
    return served


def sse(data: Any) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
