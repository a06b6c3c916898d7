"""BFCL offline: data from the `bfcl-eval` wheel, scored with BFCL's own `ast_checker`.

The checker module imports `bfcl_eval.constants.model_config`, whose import pulls BFCL's full dependency set
(model handlers, a CUDA torch). Only one flag of it is read (`underscore_to_dot`, for providers that rename
dotted function names), so a minimal stand-in module is installed in `sys.modules` before the import.
"""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass
from importlib import resources
from typing import Any

from slca.chat.hermes import parse_tool_calls

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
MODEL_NAME = "slca-local"
_TYPE_MAP = {"dict": "object", "float": "number", "tuple": "array", "any": None}


@dataclass
class BfclCase:
    id: str
    category: str
    messages: list[dict[str, Any]]
    functions: list[dict[str, Any]]
    """BFCL's own function descriptions (what the checker reads)."""
    answer: list[dict[str, Any]] | None
    """Possible answers; None for irrelevance (no call is the right answer)."""

    @property
    def tools(self) -> list[dict[str, Any]]:
        return [
            {"type": "function", "function": {**f, "parameters": to_json_schema(f.get("parameters", {}))}}
            for f in self.functions
        ]


def to_json_schema(schema: Any) -> Any:
    """BFCL parameter types → JSON-schema types ('dict' is 'object', 'float' is 'number', ...), recursively."""
    if isinstance(schema, list):
        return [to_json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: to_json_schema(v) for k, v in schema.items()}
    if isinstance(schema.get("type"), str) and schema["type"] in _TYPE_MAP:
        mapped = _TYPE_MAP[schema["type"]]
        if mapped is None:
            out.pop("type")
        else:
            out["type"] = mapped
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {k: to_json_schema(v) for k, v in schema["properties"].items()}
    return out


def _data_file(*parts: str):
    return resources.files("bfcl_eval").joinpath("data", *parts)


def _jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load_category(category: str, limit: int | None = None) -> list[BfclCase]:
    if category not in CATEGORIES:
        raise ValueError(f"unknown BFCL category {category!r}; known: {', '.join(CATEGORIES)}")
    entries = _jsonl(_data_file(f"BFCL_v4_{category}.json"))[:limit]
    answers: dict[str, list] = {}
    if category != "irrelevance":
        answers = {
            a["id"]: a["ground_truth"] for a in _jsonl(_data_file("possible_answer", f"BFCL_v4_{category}.json"))
        }
    return [BfclCase(e["id"], category, e["question"][0], e["function"], answers.get(e["id"])) for e in entries]


def import_ast_checker():
    """BFCL's checker and Language enum, importable offline (see the module docstring)."""
    name = "bfcl_eval.constants.model_config"
    if name not in sys.modules:
        stand_in = types.ModuleType(name)
        stand_in.MODEL_CONFIG_MAPPING = _AnyModel()
        sys.modules[name] = stand_in
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    return ast_checker, Language


class _ModelConfig:
    underscore_to_dot = False


class _AnyModel(dict):
    def __missing__(self, key):
        return _ModelConfig()


def verdict(case: BfclCase, calls: list[tuple[str, Any]], malformed: list[str]) -> dict[str, Any]:
    """BFCL verdict of one model turn: its parsed calls `(name, arguments)` and the errors of the `<tool_call>`
    blocks that did not parse into a call of an offered tool. A malformed block fails the case, irrelevance
    included (writing a broken call is not declining); irrelevance = no call; otherwise BFCL's ast_checker."""
    if malformed:
        return {"valid": False, "error": [f"malformed tool call: {e}" for e in malformed]}
    if case.answer is None:
        return {"valid": not calls, "error": [] if not calls else ["called a function on an irrelevant query"]}
    if not calls:
        return {"valid": False, "error": ["no parseable tool call"]}
    ast_checker, language = import_ast_checker()
    decoded = [{name: args} for name, args in calls]
    try:
        return ast_checker(case.functions, decoded, case.answer, language.PYTHON, case.category, MODEL_NAME)
    except Exception as exc:  # noqa: BLE001 — BFCL's checker raises on shapes it did not foresee: a failed case
        return {"valid": False, "error": [f"checker error: {type(exc).__name__}: {exc}"]}


def score(case: BfclCase, completion: str) -> dict[str, Any]:
    """`verdict` of a completion's text (every block parsed against the case's own function names)."""
    parsed = parse_tool_calls(completion, {f["name"] for f in case.functions})
    return verdict(
        case,
        [(c.name, c.arguments) for c in parsed if c.valid],
        [c.error or "malformed" for c in parsed if not c.valid],
    )
