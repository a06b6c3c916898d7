"""Request bodies of the API (pydantic), the request limits (README "Request limits"), and the checks OpenAI
applies to them. Every check raises a serve error that names the offending field in `param`."""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass, field
from functools import cache
from re import _parser as sre_parse  # parse only: compiling is what costs (see `_regex_parses`)
from typing import Any, Literal
from urllib.parse import unquote

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from serve.engines.grammar import GrammarLimits, SchemaNotSupported, tool_call_grammar
from serve.engines.grammar_builder import Built, GrammarBuilder, GrammarBusy, GrammarTooCostly, GrammarUnavailable
from serve.errors import (
    BadRequest,
    ContextTooLong,
    GrammarBuilderBusy,
    GrammarRefused,
    InvalidJSON,
    InvalidToolSchema,
    NotSupported,
    UnsafeJSON,
)
from serve.http_util import JSONLimits, loads_checked
from slca.chat.hermes import function_of
from slca.contracts import GroundTruth
from slca.schema_registry import SAFE_REGISTRY

ROLES = {"system", "developer", "user", "assistant", "tool"}
MAX_TOP_LOGPROBS = 20
"""OpenAI's bound of `top_logprobs` (and vLLM's default `max_logprobs`)."""


class FunctionCall(BaseModel):
    """`function` of a tool call in the conversation history."""

    model_config = ConfigDict(extra="allow")

    name: str
    arguments: Any = None

    @field_validator("arguments")
    @classmethod
    def _json_text_or_object(cls, v: Any) -> Any:
        if v is not None and not isinstance(v, (str, dict)):
            raise ValueError("must be a JSON string (or an object)")
        return v


class HistoryToolCall(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: Any = None
    tool_calls: list[HistoryToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    @field_validator("role")
    @classmethod
    def _known_role(cls, v: str) -> str:
        if v not in ROLES:  # vLLM accepts unknown roles (docs/cpu-facts.md#vllm-on-cpu); OpenAI rejects them, so do we
            raise ValueError(f"unknown role {v!r}; expected one of {sorted(ROLES)}")
        return v

    @field_validator("content")
    @classmethod
    def _text_content(cls, v: Any) -> Any:
        """A string, null, or an array of text parts (the model reads text only)."""
        if v is None or isinstance(v, str):
            return v
        if not isinstance(v, list):
            raise ValueError("must be a string, an array of content parts, or null")
        for i, part in enumerate(v):
            if not isinstance(part, dict):
                raise ValueError(f"part {i}: must be an object")
            if part.get("type", "text") != "text":
                raise ValueError(f"part {i}: type {part.get('type')!r} is not supported; this model reads 'text' parts")
            if not isinstance(part.get("text"), str):
                raise ValueError(f"part {i}: text must be a string")
        return v


class SamplingFields(BaseModel):
    # unknown top-level fields are refused, as OpenAI does (`check_fields` names the field before pydantic runs)
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    n: int = Field(default=1, ge=1)
    seed: int | None = None


class IgnoredOpenAIFields(BaseModel):
    """Arguments of OpenAI's chat API that are accepted (type-checked) and change nothing here: penalties, logit
    bias, storage, tiers, caching and end-user ids, reasoning effort, verbosity, a `text` response format."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    logit_bias: dict[str, float] | None = None
    user: str | None = None
    metadata: dict[str, str] | None = None
    store: bool | None = None
    service_tier: str | None = None
    parallel_tool_calls: bool | None = None
    prompt_cache_key: str | None = None
    safety_identifier: str | None = None
    reasoning_effort: str | None = None
    verbosity: str | None = None
    response_format: dict[str, Any] | None = None

    @field_validator("response_format")
    @classmethod
    def _text_only(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        """`{"type": "text"}` is what every answer is; a JSON format would not be enforced, so it is refused."""
        if v is not None and v.get("type") != "text":
            raise ValueError("only {'type': 'text'} is supported (for structured output, force a tool call)")
        return v


UNSUPPORTED_FIELDS = {
    "functions": "use tools",
    "function_call": "use tool_choice",
    "audio": "this server answers text only",
    "modalities": "this server answers text only",
    "prediction": "predicted outputs are not supported",
    "web_search_options": "web search is not supported",
}
"""OpenAI chat arguments this server cannot honour: refused by name (400) rather than silently ignored."""


class ChatRequest(SamplingFields, IgnoredOpenAIFields):
    model: str | None = None
    messages: list[Message] = Field(min_length=1)
    tools: list[Any] | None = None
    tool_choice: str | dict[str, Any] | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)


TASK_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/@+=-]*$"
"""A task id: letters, digits and `._:/@+=-` (no spaces, control characters or glob characters `*?[]`)."""


class AgentRunRequest(SamplingFields):
    model: str | None = None
    messages: list[Message] = Field(min_length=1)
    tools: list[Any] = Field(default_factory=list)
    task_id: str = Field(min_length=1, max_length=200, pattern=TASK_ID_PATTERN)
    """Part of Redis keys and metric-free labels downstream: bounded, and of a charset that needs no escaping."""
    ground_truth: GroundTruth | None = None
    max_turns: int | None = Field(default=None, ge=1)
    record: bool = True
    return_trajectories: bool = False
    stream: bool = False
    tool_choice: str | dict[str, Any] | None = None
    """Extension: tool choice of the FIRST model turn (later turns are 'auto')."""


def parse_body(cls, data: Any, settings, chars_per_token: int | None = None):
    """The validated request, after the field names, the counts and the prompt's size (cheap, before pydantic
    builds anything) and then the limits. `chars_per_token`: the most characters one token stands for (None: no
    size check here; the token count after templating is checked in any case)."""
    if not isinstance(data, dict):
        raise BadRequest("request body must be a JSON object")
    check_fields(cls, data)
    check_counts(data, settings)
    if chars_per_token:
        check_prompt_chars(data, settings.max_model_len, chars_per_token)
    try:
        req = cls.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise BadRequest(f"{loc}: {err['msg']}", param=loc or None) from None
    check_limits(req, settings)
    return req


def _too_many(what: str, count: int, limit: int, param: str) -> BadRequest:
    return BadRequest(f"{what}: {count} exceeds the limit of {limit}", param=param)


def check_fields(cls, data: dict[str, Any]) -> None:
    """Every top-level field is one of the request's (OpenAI refuses an unrecognised argument, so do we)."""
    for key in data:
        if key in cls.model_fields:
            continue
        name = key[:100]
        if cls is ChatRequest and key in UNSUPPORTED_FIELDS:
            raise BadRequest(f"{name} is not supported by this server: {UNSUPPORTED_FIELDS[key]}", param=name)
        raise BadRequest(f"Unrecognized request argument supplied: {name}", param=name, code="unknown_field")


def check_counts(data: dict[str, Any], settings) -> None:
    """Counts of the raw body: a request with 5,000 messages is refused before any per-message work."""
    messages, tools, stop = data.get("messages"), data.get("tools"), data.get("stop")
    if isinstance(messages, list):
        if len(messages) > settings.max_messages:
            raise _too_many("messages", len(messages), settings.max_messages, "messages")
        for i, message in enumerate(messages):
            if isinstance(message, dict):
                _check_message_counts(i, message, settings)
    if isinstance(tools, list) and len(tools) > settings.max_tools:
        raise _too_many("tools", len(tools), settings.max_tools, "tools")
    if isinstance(stop, list) and len(stop) > settings.max_stop:
        raise _too_many("stop strings", len(stop), settings.max_stop, "stop")


def _check_message_counts(i: int, message: dict[str, Any], settings) -> None:
    content, calls = message.get("content"), message.get("tool_calls")
    if isinstance(content, list) and len(content) > settings.max_content_parts:
        raise _too_many(
            f"messages[{i}].content parts", len(content), settings.max_content_parts, f"messages.{i}.content"
        )
    if isinstance(calls, list) and len(calls) > settings.max_history_tool_calls:
        raise _too_many(
            f"messages[{i}].tool_calls", len(calls), settings.max_history_tool_calls, f"messages.{i}.tool_calls"
        )


def prompt_chars(messages: Any) -> int:
    """Characters of the message contents of a raw body (strings and text parts): text the prompt holds whole."""
    if not isinstance(messages, list):
        return 0
    total = 0
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            total += sum(len(p["text"]) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return total


def check_prompt_chars(data: dict[str, Any], max_model_len: int, chars_per_token: int) -> None:
    """The cheap context check: no token stands for more than `chars_per_token` characters, so contents longer
    than `max_model_len` × that cannot fit. Refused before any schema check, templating or tokenisation."""
    chars, limit = prompt_chars(data.get("messages")), max_model_len * chars_per_token
    if chars > limit:
        raise ContextTooLong(
            f"This model's maximum context length is {max_model_len} tokens; the messages hold {chars} characters, "
            f"more than {limit} (at most {chars_per_token} characters a token) can fit",
            param="messages",
        )


def longest_token_chars(tokenizer) -> int | None:
    """Characters of the longest entry of `tokenizer`'s vocabulary (special tokens included): no token stands for
    more text (a byte-level entry has a character per byte). None when the tokenizer lists no vocabulary."""
    try:
        vocab = tokenizer.get_vocab()
    except (AttributeError, NotImplementedError, TypeError):
        return None
    return max(map(len, vocab), default=0) or None


def check_limits(req: SamplingFields, settings) -> None:
    if req.n > settings.max_n:
        raise BadRequest(f"n={req.n} exceeds the limit of {settings.max_n}", param="n")
    if req.seed is not None and not 0 <= req.seed <= settings.max_seed:
        raise BadRequest(f"seed must be an integer in 0..{settings.max_seed}", param="seed")
    for name in ("max_tokens", "max_completion_tokens"):
        value = getattr(req, name)
        if value is not None and value > settings.max_tokens_limit:
            raise BadRequest(f"{name}={value} exceeds the limit of {settings.max_tokens_limit}", param=name)
    if isinstance(req, ChatRequest):
        stop_strings(req.stop, settings)
        if req.top_logprobs is not None and req.top_logprobs > 0 and not req.logprobs:
            raise BadRequest("top_logprobs needs logprobs: true", param="top_logprobs")
    if isinstance(req, AgentRunRequest) and req.max_turns is not None and req.max_turns > settings.max_turns_limit:
        raise BadRequest(
            f"max_turns={req.max_turns} exceeds the limit of {settings.max_turns_limit}", param="max_turns"
        )
    _check_history_arguments(req.messages, JSONLimits.of(settings))


def stop_strings(stop: str | list[str] | None, settings) -> list[str]:
    """The stop strings as a list; an empty one would stop every completion at once, so it is refused."""
    strings = [stop] if isinstance(stop, str) else list(stop or [])
    if len(strings) > settings.max_stop:
        raise _too_many("stop strings", len(strings), settings.max_stop, "stop")
    for s in strings:
        if not s:
            raise BadRequest("stop: an empty stop string is not allowed", param="stop")
        if len(s) > settings.max_stop_chars:
            raise BadRequest(
                f"stop: a stop string of {len(s)} characters exceeds the limit of {settings.max_stop_chars}",
                param="stop",
            )
    return strings


def _check_history_arguments(messages: list[Message], limits: JSONLimits) -> None:
    """Arguments of history tool calls are JSON text that the prompt renderer parses: the body's bounds apply.
    Text that is not JSON at all stays text (rendered as given)."""
    for i, message in enumerate(messages):
        for j, call in enumerate(message.tool_calls or []):
            args = call.function.arguments
            if not isinstance(args, str):
                continue
            param = f"messages.{i}.tool_calls.{j}.function.arguments"
            try:
                loads_checked(args.encode("utf-8"), limits)
            except UnsafeJSON as exc:
                raise BadRequest(f"{param}: {exc.message}", param=param) from None
            except InvalidJSON:
                pass


def max_tokens_of(req: SamplingFields, settings) -> int:
    return req.max_completion_tokens or req.max_tokens or settings.max_tokens_default


def check_context(prompt_tokens: int, max_tokens: int, settings) -> None:
    if prompt_tokens + max_tokens > settings.max_model_len:
        raise ContextTooLong(
            f"This model's maximum context length is {settings.max_model_len} tokens; the request has "
            f"{prompt_tokens} prompt tokens and asks for {max_tokens} more",
            param="messages",
        )


def temperature_of(req: SamplingFields, settings) -> float:
    """A temperature in (0, min_temperature) samples greedily (README "Request limits")."""
    return 0.0 if req.temperature < settings.min_temperature else req.temperature


# --- tools -----------------------------------------------------------------------------------------
LATEST = jsonschema.Draft202012Validator
RESPONSE_SCHEMA_KEYS = ("x-response-schema", "returns")


def schema_validator(schema: dict[str, Any]):
    """A validator for instances of `schema` that resolves only refs inside it (SAFE_REGISTRY)."""
    cls = _validator_class(schema, "schema")
    return cls(schema, registry=SAFE_REGISTRY, format_checker=_format_checker(cls))


def _regex_parses(pattern: object) -> bool:
    """`format: regex` without compiling: the metaschema gives every `pattern` that format, and jsonschema's own
    check compiles it with `re`, which holds the GIL for as long as compiling takes — a case-insensitive class
    is compiled character by character (`(?i)` + 200 × `[\\x00-\\uffff]` took 5 s). Parsing finds the same
    syntax errors in time linear in the (bounded) pattern."""
    if not isinstance(pattern, str):
        return True
    sre_parse.parse(pattern)
    return True


@cache
def _format_checker(cls) -> jsonschema.FormatChecker:
    """`cls.FORMAT_CHECKER` with `regex` checked by parsing only (`_regex_parses`)."""
    checker = jsonschema.FormatChecker(())
    checker.checkers = {
        **cls.FORMAT_CHECKER.checkers,
        "regex": (_regex_parses, (re.error, RecursionError, OverflowError)),
    }
    return checker


@dataclass
class _PatternBudget:
    """Patterns of one request's tools, counted against the request limits before anything parses them."""

    settings: Any
    count: int = 0
    chars: int = 0

    def take(self, patterns: list[str], param: str) -> None:
        s = self.settings
        for pattern in patterns:
            if len(pattern) > s.max_pattern_chars:
                raise InvalidToolSchema(
                    f"{param}: a pattern of {len(pattern)} characters exceeds the limit of {s.max_pattern_chars}",
                    param=param,
                )
            self.count, self.chars = self.count + 1, self.chars + len(pattern)
            if self.count > s.max_request_patterns:
                raise InvalidToolSchema(
                    f"{param}: the tools hold more than {s.max_request_patterns} patterns", param=param
                )
            if self.chars > s.max_request_pattern_chars:
                raise InvalidToolSchema(
                    f"{param}: the patterns of the tools exceed {s.max_request_pattern_chars} characters together",
                    param=param,
                )


def check_tools(tools: list[Any] | None, settings) -> set[str]:
    """The offered function names; InvalidToolSchema (param: the tool) when a definition or a schema is broken."""
    names: set[str] = set()
    budget = _PatternBudget(settings)
    for i, tool in enumerate(tools or []):
        name = _check_tool(i, tool, settings, budget)
        if name in names:
            raise InvalidToolSchema(f"tools[{i}]: duplicate function name {name!r}", param=f"tools.{i}.function.name")
        names.add(name)
    return names


def _check_tool(i: int, tool: Any, settings, budget: "_PatternBudget") -> str:
    where = f"tools.{i}"
    if not isinstance(tool, dict) or tool.get("type", "function") != "function":
        raise InvalidToolSchema(f"tools[{i}]: expected {{'type': 'function', 'function': {{...}}}}", param=where)
    fn = function_of(tool)
    if not isinstance(fn, dict):
        raise InvalidToolSchema(f"tools[{i}].function: must be an object", param=f"{where}.function")
    name = fn.get("name")
    if not isinstance(name, str) or not name or len(name) > 64:
        raise InvalidToolSchema(
            f"tools[{i}].function.name: a non-empty string of at most 64 characters is required",
            param=f"{where}.function.name",
        )
    size = len(json.dumps(tool, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())
    if size > settings.max_tool_schema_bytes:
        raise InvalidToolSchema(
            f"tools[{i}]: the definition of {size} bytes exceeds the limit of {settings.max_tool_schema_bytes}",
            param=where,
        )
    params = fn.get("parameters", {"type": "object"})
    check_schema(params, f"{where}.function.parameters", settings.max_tool_schema_depth, budget)
    if params.get("type", "object") != "object":
        raise InvalidToolSchema(
            f"tools[{i}].function.parameters: must describe an object", param=f"{where}.function.parameters"
        )
    for key in RESPONSE_SCHEMA_KEYS:
        response = fn.get(key, tool.get(key))
        if response is not None:
            check_schema(response, f"{where}.function.{key}", settings.max_tool_schema_depth, budget)
    return name


def check_schema(schema: Any, param: str, max_depth: int, budget: "_PatternBudget | None" = None) -> None:
    """A usable JSON schema: an object, not too deep, its patterns within `budget`, only local refs that resolve,
    valid against its metaschema (patterns parsed, never compiled)."""
    if not isinstance(schema, dict):
        raise InvalidToolSchema(f"{param}: must be a JSON schema object", param=param)
    shape = _shape(schema)
    if shape.depth > max_depth:
        raise InvalidToolSchema(f"{param}: nests deeper than {max_depth} levels", param=param)
    if budget is not None:
        budget.take(shape.patterns, param)
    for ref in shape.refs:
        _check_ref(schema, ref, param)
    cls = _validator_class(schema, param)
    try:
        meta = cls(cls.META_SCHEMA, registry=SAFE_REGISTRY, format_checker=_format_checker(cls))
        error = jsonschema.exceptions.best_match(meta.iter_errors(schema))
    except Exception as exc:  # jsonschema raises more than SchemaError on odd schemas; any of them is the caller's
        message = f"{param}: invalid JSON schema ({type(exc).__name__}: {exc})"
        raise InvalidToolSchema(message[:500], param=param) from None
    if error is not None:
        raise InvalidToolSchema(f"{param}: invalid JSON schema: {error.message}"[:500], param=param)


def _validator_class(schema: dict[str, Any], param: str):
    dialect = schema.get("$schema")
    if dialect is None:
        return LATEST
    if not isinstance(dialect, str):
        raise InvalidToolSchema(f"{param}.$schema: must be a string (a metaschema URI)", param=param)
    cls = jsonschema.validators.validator_for(schema, default=None)
    if cls is None:
        raise InvalidToolSchema(f"{param}.$schema: unknown dialect {dialect[:100]!r}", param=param)
    return cls


@dataclass
class SchemaShape:
    depth: int = 0
    """Nesting depth of objects and arrays."""
    refs: list[str] = field(default_factory=list)
    """Every `$ref` (`$dynamicRef`, `$recursiveRef`) string."""
    patterns: list[str] = field(default_factory=list)
    """Every `pattern` string and `patternProperties` key: the regular expressions a validator would compile."""
    nodes: int = 0
    """Objects in the schema."""


def _shape(schema: Any) -> SchemaShape:
    """Depth, refs, patterns and size of `schema`: iteratively, so depth is measured before anything recurses."""
    shape = SchemaShape()
    stack = [(schema, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            shape.depth = max(shape.depth, level)
            shape.nodes += 1
            for key, value in node.items():
                if key in ("$ref", "$dynamicRef", "$recursiveRef") and isinstance(value, str):
                    shape.refs.append(value)
                elif key == "pattern" and isinstance(value, str):
                    shape.patterns.append(value)
                elif key == "patternProperties" and isinstance(value, dict):
                    shape.patterns.extend(k for k in value if isinstance(k, str))
                stack.append((value, level + 1))
        elif isinstance(node, list):
            shape.depth = max(shape.depth, level)
            stack.extend((v, level + 1) for v in node)
    return shape


def _check_ref(root: dict[str, Any], ref: str, param: str) -> None:
    """Only refs into the schema itself ('#', '#/json/pointer', '#anchor'), and pointers must resolve."""
    if not ref.startswith("#"):
        raise InvalidToolSchema(
            f"{param}: $ref {ref[:100]!r} points outside the schema; only local refs ('#/...') are allowed", param=param
        )
    if not ref.startswith("#/"):
        return
    node: Any = root
    for part in ref[2:].split("/"):
        part = unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise InvalidToolSchema(f"{param}: $ref {ref[:100]!r} does not resolve inside the schema", param=param)


ToolMode = Literal["none", "auto", "forced"]


def resolve_tool_choice(choice: str | dict[str, Any] | None, tools: list[Any] | None):
    """(mode, indices of the tools the grammar forces). 'required' forces any offered tool, a named choice that one."""
    tools = tools or []
    if choice is None:
        return ("auto" if tools else "none"), []
    if choice in ("none", "auto"):
        return choice if tools else "none", []
    if choice == "required":
        if not tools:
            raise BadRequest("tool_choice 'required' needs tools", param="tool_choice")
        return "forced", list(range(len(tools)))
    if isinstance(choice, dict) and choice.get("type") == "function":
        fn = choice.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise BadRequest("tool_choice.function must be an object with a name", param="tool_choice.function")
        chosen = [i for i, t in enumerate(tools) if function_of(t).get("name") == fn["name"]]
        if not chosen:
            raise BadRequest(f"tool_choice names {fn['name'][:64]!r}, which is not in tools", param="tool_choice")
        return "forced", chosen
    raise BadRequest("tool_choice must be 'none', 'auto', 'required' or {'type': 'function', ...}", param="tool_choice")


async def forced_call_grammar(
    builder: GrammarBuilder, caller: str, tools: list[Any] | None, forced: list[int], settings=None
) -> Built | None:
    """The grammar that forces one call to one of `tools[i] for i in forced` (None when nothing is forced), built
    by `builder` within its bounds. A schema the grammar compiler cannot handle, or one past the grammar limits, is
    the caller's error: 400 naming that tool; a build past its time, memory or byte bound is stopped and refused
    (422); no builder free within the bound for this caller: 503 + Retry-After."""
    if not forced:
        return None
    if importlib.util.find_spec("xgrammar") is None:
        raise NotSupported("forced tool_choice needs the xgrammar package (installed with vllm)", param="tool_choice")
    limits = GrammarLimits.of(settings) if settings is not None else GrammarLimits()
    try:
        return await tool_call_grammar([tools[i] for i in forced], builder, caller, limits)
    except SchemaNotSupported as exc:
        where = f"tools.{forced[exc.index]}" if exc.index is not None else "tools"
        raise InvalidToolSchema(
            f"{where}: the schema cannot be enforced for tool_choice: {exc.reason}",
            param=f"{where}.function.parameters" if exc.index is not None else where,
        ) from None
    except GrammarTooCostly as exc:
        raise GrammarRefused(f"tools: the tool_choice grammar cannot be built: {exc.reason}", param="tools") from None
    except GrammarBusy as exc:
        raise GrammarBuilderBusy(exc.reason) from None
    except GrammarUnavailable as exc:
        raise NotSupported(exc.reason, param="tool_choice") from None
