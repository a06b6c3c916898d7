"""The API's OpenAPI 3.1 document, built from the same pydantic request models that parse the bodies.

Served at `GET /openapi.json`; CI fuzzes every operation in it (tests/serve/test_fuzz.py). The request
models are the source of truth: a field added to `ChatRequest` appears here without a second definition.
Limits that come from the settings (`serve.max_*`) are written into the schema, so that a client (or a
fuzzer) sees the bounds the server enforces.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from serve.requests import AgentRunRequest, ChatRequest

REF = "#/components/schemas/{model}"


def _error_response(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": REF.format(model="Error")}}},
    }


ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "integer", "null"]},
            },
        }
    },
}

JSON_OBJECT = {"application/json": {"schema": {"type": "object"}}}


def _model_schema(model: type[BaseModel], components: dict[str, Any]) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template=REF)
    components.update(schema.pop("$defs", {}))
    components[model.__name__] = schema
    return {"$ref": REF.format(model=model.__name__)}


def _post(summary: str, model: type[BaseModel], components: dict[str, Any], ok: str) -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "operationId": model.__name__,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _model_schema(model, components)}},
            },
            "responses": {
                "200": {"description": ok, "content": JSON_OBJECT},
                "400": _error_response("invalid request"),
                "401": _error_response("an API key is required"),
                "404": _error_response("unknown model"),
                "413": _error_response("body too large"),
                "422": _error_response("a forced call's grammar too costly to build (stopped at its bound)"),
                "503": _error_response("engine unavailable; retry"),
            },
        }
    }


def _get(summary: str, op: str, ok: str, content_type: str = "application/json") -> dict[str, Any]:
    responses: dict[str, Any] = {
        "200": {
            "description": ok,
            "content": {
                content_type: {
                    "schema": {"type": "string"} if content_type != "application/json" else {"type": "object"}
                }
            },
        }
    }
    if op == "readyz":
        responses["503"] = _error_response("not ready")
    return {"get": {"summary": summary, "operationId": op, "responses": responses}}


ADMIN_WEIGHTS = {
    "post": {
        "summary": "swap to a published weight version (admin scope)",
        "operationId": "adminWeights",
        "security": [{"bearer": []}],
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "required": ["version", "path"],
                        "properties": {
                            "version": {"type": "integer", "minimum": 0},
                            "path": {"type": "string"},
                        },
                    }
                }
            },
        },
        "responses": {
            "200": {"description": "swapped", "content": JSON_OBJECT},
            "400": _error_response("invalid request"),
            "401": _error_response("no valid token"),
            "403": _error_response("admin disabled or not permitted"),
            "422": _error_response("weights rejected; the old version keeps serving"),
        },
    }
}
"""`POST /admin/weights`: its body is not a request model of serve/requests.py, so it is written here."""

DESCRIPTION = (
    "OpenAI-compatible chat completions and server-side agent runs that record trajectories for online training."
)


def openapi_document(settings, version: str = "0.1.0") -> dict[str, Any]:
    components: dict[str, Any] = {"Error": ERROR_SCHEMA}
    paths = {
        "/v1/chat/completions": _post(
            "OpenAI-compatible chat completion (tools in the Hermes convention)",
            ChatRequest,
            components,
            "a chat.completion (or an SSE stream)",
        ),
        "/v1/agent/runs": _post(
            "n rollouts of one task through the server-side agent loop (one training group)",
            AgentRunRequest,
            components,
            "the runs, their messages, tool calls and trajectory ids",
        ),
        "/v1/models": _get("the served model and its policy version", "models", "model list"),
        "/healthz": _get("liveness: the HTTP loop answers", "healthz", "alive"),
        "/readyz": _get("readiness: engine loaded and Redis reachable", "readyz", "ready"),
        "/metrics": _get("Prometheus metrics", "metrics", "text exposition format", "text/plain"),
        "/admin/weights": ADMIN_WEIGHTS,
    }
    _write_limits(components, settings)
    return {
        "openapi": "3.1.0",
        "info": {"title": "slca agent API", "version": version, "description": DESCRIPTION},
        "paths": paths,
        "components": {"schemas": components, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }


LIMIT_FIELDS = {
    "n": ("maximum", "max_n"),
    "max_tokens": ("maximum", "max_tokens_limit"),
    "max_completion_tokens": ("maximum", "max_tokens_limit"),
    "max_turns": ("maximum", "max_turns_limit"),
}


def _write_limits(components: dict[str, Any], settings) -> None:
    """Copy the configured bounds into the request schemas (those the settings define)."""
    for name in ("ChatRequest", "AgentRunRequest"):
        props = components.get(name, {}).get("properties", {})
        for field, (keyword, setting) in LIMIT_FIELDS.items():
            limit = getattr(settings, setting, None)
            if field not in props or limit is None:
                continue
            target = props[field]
            for option in target.get("anyOf", [target]):
                if option.get("type") == "integer":
                    option[keyword] = min(option.get(keyword, limit), limit)


async def openapi_json(request):
    """GET /openapi.json, built and serialised in the request pool (pydantic's schema generation is CPU work)."""
    from aiohttp import web

    from serve.http_util import off_loop
    from serve.keys import SETTINGS

    data = await off_loop(request.app, _document_bytes, request.app[SETTINGS])
    return web.Response(body=data, content_type="application/json")


def _document_bytes(settings) -> bytes:
    return json.dumps(openapi_document(settings)).encode()
