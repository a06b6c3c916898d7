"""What the policy did, read from a trajectory: tool calls per turn, the final reply, the tool results.

Calls are read, by default, from the sampled token ids (DESIGN.md §1: model tokens are never re-tokenized;
they are the truth of what the policy wrote): each turn's `tool_call` and `summary` segments are decoded with
the model's tokenizer and parsed with `slca.chat.hermes.parse_tool_calls`. `reasoning` segments are left out
and `<think>` spans are stripped, so calls written inside reasoning never count. This does not depend on how
the serving side parsed the calls (a bug there must not leak into the reward). `call_source = "records"` reads
`Trajectory.tool_calls` instead, for producers without a tokenizer.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slca.chat.hermes import ParsedCall, function_of, parse_tool_calls, text_outside_calls
from slca.contracts import SegmentKind, Trajectory


class ScoringError(ValueError):
    """A trajectory that cannot be scored (not transient: retrying will not help)."""


@dataclass
class TurnCalls:
    turn: int
    calls: list[ParsedCall]


@dataclass
class Observed:
    """Everything the scorers need, extracted once."""

    offered: set[str]
    schemas: dict[str, dict[str, Any]]
    turns: list[TurnCalls]
    reply: str
    tool_results: list[Any] = field(default_factory=list)
    failed_calls: int = 0

    @property
    def calls(self) -> list[ParsedCall]:
        return [c for t in self.turns for c in t.calls]

    @property
    def valid_calls(self) -> list[ParsedCall]:
        return [c for c in self.calls if c.valid]


@functools.lru_cache(maxsize=4)
def load_tokenizer(model_dir: str):
    """The fast tokenizer of a model directory (the `tokenizers` library: light to import, fast to decode)."""
    from tokenizers import Tokenizer

    path = Path(model_dir) / "tokenizer.json"
    if not path.is_file():
        raise ScoringError(f"tokenizer not found: {path}")
    return Tokenizer.from_file(str(path))


@functools.lru_cache(maxsize=8)
def resolve_tokenizer_dir(name: str) -> str:
    from slca.config import CommonSettings
    from slca.models.paths import resolve_model

    return str(resolve_model(name, Path(CommonSettings().cache_dir)))


def tools_of(traj: Trajectory) -> tuple[set[str], dict[str, dict[str, Any]]]:
    schemas = {}
    for tool in traj.tools:
        fn = function_of(tool)
        if isinstance(fn.get("name"), str):
            schemas[fn["name"]] = fn.get("parameters") or {"type": "object"}
    return set(schemas), schemas


def observe(traj: Trajectory, call_source: str, tokenizer_dir: str | None) -> Observed:
    offered, schemas = tools_of(traj)
    if call_source == "tokens":
        turns, reply = _from_tokens(traj, offered, load_tokenizer(tokenizer_dir))
    else:
        turns, reply = _from_records(traj, offered)
    results = [r.result for r in traj.tool_calls if r.result is not None]
    results += [m.get("content") for m in traj.messages if m.get("role") == "tool" and m.get("content")]
    failed = sum(1 for r in traj.tool_calls if r.error is not None or _is_error_payload(r.result))
    return Observed(offered, schemas, turns, reply, results, failed)


def _is_error_payload(result: Any) -> bool:
    return isinstance(result, dict) and set(result) == {"error"}


def _from_tokens(traj: Trajectory, offered: set[str], tokenizer) -> tuple[list[TurnCalls], str]:
    by_turn: dict[int, list[int]] = {}
    summary_by_turn: dict[int, list[int]] = {}
    for seg in traj.segments:  # sorted by start (validated)
        if seg.kind in (SegmentKind.TOOL_CALL, SegmentKind.SUMMARY):
            by_turn.setdefault(seg.turn, []).extend(traj.tokens[seg.start : seg.end])
        if seg.kind == SegmentKind.SUMMARY:
            summary_by_turn.setdefault(seg.turn, []).extend(traj.tokens[seg.start : seg.end])
    turns = []
    for turn in sorted(by_turn):
        text = tokenizer.decode(by_turn[turn], skip_special_tokens=True)
        calls = parse_tool_calls(text, offered)
        if calls:
            turns.append(TurnCalls(turn, calls))
    reply = ""
    if summary_by_turn:
        last = max(summary_by_turn)
        reply = text_outside_calls(tokenizer.decode(summary_by_turn[last], skip_special_tokens=True))
    return turns, reply


def _from_records(traj: Trajectory, offered: set[str]) -> tuple[list[TurnCalls], str]:
    turns: dict[int, list[ParsedCall]] = {}
    for rec in traj.tool_calls:
        calls = turns.setdefault(rec.turn, [])
        valid = rec.valid and isinstance(rec.name, str) and rec.name in offered and isinstance(rec.arguments, dict)
        raw = rec.raw if rec.raw is not None else json.dumps({"name": rec.name, "arguments": rec.arguments})
        calls.append(ParsedCall(rec.name, rec.arguments, valid, raw, len(calls), None if valid else "invalid call"))
    reply = ""
    for msg in reversed(traj.messages):
        if msg.get("role") == "assistant" and isinstance(msg.get("content"), str):
            reply = text_outside_calls(msg["content"])
            break
    return [TurnCalls(t, c) for t, c in sorted(turns.items())], reply
