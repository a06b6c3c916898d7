"""Request bodies of the API (pydantic), and the checks OpenAI applies to them."""

from __future__ import annotations

from typing import Any, Literal

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from serve.errors import BadRequest, InvalidToolSchema
from slca.chat.hermes import function_of
from slca.contracts import GroundTruth

ROLES = {"system", "developer", "user", "assistant", "tool"}


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: Any = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    @field_validator("role")
    @classmethod
    def _known_role(cls, v: str) -> str:
        if v not in ROLES:  # vLLM accepts unknown roles (FINDINGS.md); OpenAI rejects them, so do we
            raise ValueError(f"unknown role {v!r}; expected one of {sorted(ROLES)}")
        return v


class SamplingFields(BaseModel):
    model_config = ConfigDict(extra="ignore")

    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    n: int = Field(default=1, ge=1)
    seed: int | None = None


class ChatRequest(SamplingFields):
    model: str | None = None
    messages: list[Message] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    logprobs: bool = False
    top_logprobs: int | None = None


class AgentRunRequest(SamplingFields):
    model: str | None = None
    messages: list[Message] = Field(min_length=1)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    task_id: str = Field(min_length=1)
    ground_truth: GroundTruth | None = None
    max_turns: int | None = Field(default=None, ge=1, le=64)
    record: bool = True
    return_trajectories: bool = False
    stream: bool = False
    tool_choice: str | dict[str, Any] | None = None
    """Extension: tool choice of the FIRST model turn (later turns are 'auto')."""


def parse_body(cls, data: Any):
    if not isinstance(data, dict):
        raise BadRequest("request body must be a JSON object")
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise BadRequest(f"{loc}: {err['msg']}", param=loc or None) from None


def check_tools(tools: list[dict[str, Any]] | None) -> set[str]:
    """The offered function names; InvalidToolSchema when a definition or its JSON schema is broken."""
    names: set[str] = set()
    for i, tool in enumerate(tools or []):
        if not isinstance(tool, dict) or tool.get("type", "function") != "function":
            raise InvalidToolSchema(f"tools[{i}]: expected {{'type': 'function', 'function': {{...}}}}", param="tools")
        fn = function_of(tool)
        name = fn.get("name")
        if not isinstance(name, str) or not name or len(name) > 64:
            raise InvalidToolSchema(f"tools[{i}].function.name: a non-empty string is required", param="tools")
        params = fn.get("parameters", {"type": "object"})
        if not isinstance(params, dict):
            raise InvalidToolSchema(f"tools[{i}].function.parameters: must be a JSON schema object", param="tools")
        try:
            jsonschema.validators.validator_for(params).check_schema(params)
        except jsonschema.SchemaError as exc:
            raise InvalidToolSchema(f"tools[{i}].function.parameters: invalid JSON schema: {exc.message}", param="tools")
        if params.get("type", "object") != "object":
            raise InvalidToolSchema(f"tools[{i}].function.parameters: must describe an object", param="tools")
        if name in names:
            raise InvalidToolSchema(f"tools[{i}]: duplicate function name {name!r}", param="tools")
        names.add(name)
    return names


ToolMode = Literal["none", "auto", "forced"]


def forced_call_grammar(forced: list[dict[str, Any]]) -> str | None:
    """The grammar that forces one call to one of `forced` (None when nothing is forced)."""
    from serve.engines.grammar import GrammarUnavailable, tool_call_grammar
    from serve.errors import NotSupported

    if not forced:
        return None
    try:
        return tool_call_grammar(forced)
    except GrammarUnavailable as exc:
        raise NotSupported(str(exc), param="tool_choice") from None


def resolve_tool_choice(choice: str | dict[str, Any] | None, tools: list[dict[str, Any]] | None):
    """(mode, tools the grammar forces). 'required' forces any offered tool, a named choice forces that one."""
    tools = tools or []
    if choice is None:
        return ("auto" if tools else "none"), []
    if choice in ("none", "auto"):
        return choice if tools else "none", []
    if choice == "required":
        if not tools:
            raise BadRequest("tool_choice 'required' needs tools", param="tool_choice")
        return "forced", tools
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = (choice.get("function") or {}).get("name")
        chosen = [t for t in tools if function_of(t).get("name") == name]
        if not chosen:
            raise BadRequest(f"tool_choice names {name!r}, which is not in tools", param="tool_choice")
        return "forced", chosen
    raise BadRequest("tool_choice must be 'none', 'auto', 'required' or {'type': 'function', ...}", param="tool_choice")
