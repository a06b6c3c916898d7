"""Grammars for forced tool calls, built on xgrammar (vLLM's own structured-output backend).

Named / required `tool_choice` is NOT taken from vLLM's tool_choice path (docs/cpu-facts.md#vllm-on-cpu: it
returned bare strings as arguments with SmolLM2). Instead the completion is constrained to one Hermes block
`<tool_call>\n{"name": <fn>, "arguments": {...schema...}}\n</tool_call>` by a grammar that both engines
apply token by token: vLLM through `StructuredOutputsParams(grammar=...)`, hf through an xgrammar matcher.

Here: the schema of the call, checked against cheap bounds before anything is built (`GrammarLimits`). The grammar
itself is built, within time, memory, byte and per-caller bounds, by serve/engines/grammar_builder.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slca.chat.hermes import function_of

if TYPE_CHECKING:
    from serve.engines.grammar_builder import Built, GrammarBuilder


@dataclass(frozen=True)
class GrammarLimits:
    """Bounds on what a caller's schemas may ask of the grammar compiler (README "Request limits")."""

    max_nodes: int = 2048
    """Schema objects of all forced tools together."""
    max_repeat: int = 256
    """Largest length/count bound (xgrammar unrolls bounded repeats: thousands took minutes and hundreds of MB)."""

    @classmethod
    def of(cls, settings) -> "GrammarLimits":
        return cls(settings.max_grammar_schema_nodes, settings.max_grammar_repeat)


_BOUNDS = (
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minContains",
    "maxContains",
)


def call_schema(tool: dict[str, Any], prefix: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    """The schema of one call `{"name": <fn>, "arguments": <parameters>}`, and the definitions to hoist to the
    root of the grammar's schema. The parameters' own refs were written against the parameters as a document:
    `#/$defs/x` (and `#/definitions/x`) now point to the hoisted `#/$defs/<prefix>x`, any other `#...` into the
    parameters' new place (pydantic-style schemas would not resolve otherwise). With a `prefix` (one of several
    tools, under `anyOf`) parameters holding refs move to `#/$defs/<prefix>arguments`: xgrammar resolves no
    pointer through an array index."""
    fn = function_of(tool)
    params = fn.get("parameters") or {"type": "object", "properties": {}}
    has_refs = '"$ref"' in json.dumps(params)
    here = f"#/$defs/{prefix}arguments__" if prefix and has_refs else "#/properties/arguments"
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        if isinstance(params.get(key), dict):
            defs.update({prefix + name: _relocated(d, here, prefix) for name, d in params[key].items()})
    moved = {k: v for k, v in params.items() if k not in ("$defs", "definitions")} if defs else params
    arguments = _relocated(moved, here, prefix) if has_refs else moved
    if here.startswith("#/$defs/"):
        defs[prefix + "arguments__"], arguments = arguments, {"$ref": here}
    schema = {
        "type": "object",
        "properties": {"name": {"const": fn["name"]}, "arguments": arguments},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }
    return schema, defs


def _relocated(node: Any, here: str, prefix: str) -> Any:
    """`node` with every local `$ref` rewritten for the parameters' new place (iterative: depth is bounded but a
    copy need not recurse)."""
    if not isinstance(node, (dict, list)):
        return node
    root: Any = {} if isinstance(node, dict) else []
    stack = [(node, root)]
    while stack:
        src, dst = stack.pop()
        items = src.items() if isinstance(src, dict) else enumerate(src)
        for key, value in items:
            if key == "$ref" and isinstance(src, dict) and isinstance(value, str):
                out: Any = _ref(value, here, prefix)
            elif isinstance(value, (dict, list)):
                out = {} if isinstance(value, dict) else []
                stack.append((value, out))
            else:
                out = value
            if isinstance(dst, dict):
                dst[key] = out
            else:
                dst.append(out)
    return root


def _ref(ref: str, here: str, prefix: str) -> str:
    for defs in ("#/$defs/", "#/definitions/"):
        if ref.startswith(defs):
            return "#/$defs/" + prefix + ref[len(defs) :]
    if ref == "#" or ref == "#/":
        return here
    if ref.startswith("#/"):
        return here + ref[1:]
    return ref


def _check_bounds(schema: Any, index: int, limits: GrammarLimits, seen: list[int]) -> None:
    """SchemaNotSupported when a length/count bound passes `limits.max_repeat` or the forced schemas together
    hold more than `limits.max_nodes` objects (`seen`: the count so far)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            seen[0] += 1
            if seen[0] > limits.max_nodes:
                raise SchemaNotSupported(index, f"the forced tools' schemas hold more than {limits.max_nodes} objects")
            for key in _BOUNDS:
                value = node.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value > limits.max_repeat:
                    raise SchemaNotSupported(
                        index, f"{key}={value} exceeds the limit of {limits.max_repeat} under tool_choice"
                    )
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def forced_schemas(tools: list[dict[str, Any]], limits: GrammarLimits | None = None) -> str:
    """The JSON schema of one call to one of `tools` (all of them under `anyOf`), after the bounds check:
    SchemaNotSupported names the tool that passes `limits`."""
    limits = limits or GrammarLimits()
    seen = [0]
    for i, tool in enumerate(tools):
        _check_bounds(function_of(tool).get("parameters"), i, limits, seen)
    if len(tools) == 1:
        return single_schema(tools[0])
    parts = [call_schema(t, f"t{i}_") for i, t in enumerate(tools)]
    defs = {k: v for _, d in parts for k, v in d.items()}
    return json.dumps({"anyOf": [p for p, _ in parts], **({"$defs": defs} if defs else {})})


def single_schema(tool: dict[str, Any]) -> str:
    schema, defs = call_schema(tool)
    return json.dumps({**schema, **({"$defs": defs} if defs else {})})


async def tool_call_grammar(
    tools: list[dict[str, Any]], builder: "GrammarBuilder", caller: str, limits: GrammarLimits | None = None
) -> "Built":
    """The grammar (and its compiled form) of exactly one `<tool_call>` block calling one of `tools` with
    schema-valid arguments, built by `builder` (bounded in time, bytes and the caller's share). SchemaNotSupported
    names the tool whose schema xgrammar cannot compile (a lookbehind `pattern`, a bound beyond int64, a `$ref`
    that does not resolve...) or that passes `limits`; GrammarTooCostly and GrammarBusy pass through."""
    from serve.engines.grammar_builder import SchemaRefused

    schema = forced_schemas(tools, limits)
    try:
        return await builder.schema(caller, schema)
    except SchemaRefused as exc:
        if len(tools) == 1:
            raise SchemaNotSupported(0, exc.reason) from None
        failed = SchemaNotSupported(None, exc.reason)
    for i, tool in enumerate(tools):  # which tool? (only after a refusal, which is quick: a parse error)
        try:
            await builder.schema(caller, single_schema(tool))
        except SchemaRefused as exc:
            raise SchemaNotSupported(i, exc.reason) from None
    raise failed


class SchemaNotSupported(ValueError):
    """xgrammar cannot turn the schema of `tools[index]` (None: of the tools together) into a grammar."""

    def __init__(self, index: int | None, reason: str):
        super().__init__(reason)
        self.index, self.reason = index, reason
