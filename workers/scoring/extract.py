"""What the policy did, read from a trajectory: tool calls per turn, the final reply, the tool results.

Calls are the server's: `Trajectory.tool_calls` holds every call of every model turn as the server parsed it
from the sampled text (`slca.chat.hermes.parse_tool_calls`, reasoning left out, so calls written inside
`<think>` never count), with its `<tool_call>` block and validity, executed or not (schema version 2). The
scorer does not decode tokens nor parse again: one parse, in the process that sampled the text. The reply is
the last assistant message's prose (reasoning and call blocks removed).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slca.chat.hermes import ParsedCall, function_of, text_outside_calls
from slca.contracts import ToolCallRecord, Trajectory


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
    ran_calls: int = 0
    """Valid calls that ran without an error: what a reply's claim of action can rest on."""

    @property
    def calls(self) -> list[ParsedCall]:
        return [c for t in self.turns for c in t.calls]

    @property
    def valid_calls(self) -> list[ParsedCall]:
        return [c for c in self.calls if c.valid]


@functools.lru_cache(maxsize=4)
def load_tokenizer(model_dir: str):
    """The fast tokenizer of a model directory (the `tokenizers` library: light to import, fast to decode). Not
    used by scoring: for producers of sample trajectories (`slca bench queue`, tests)."""
    from tokenizers import Tokenizer

    path = Path(model_dir) / "tokenizer.json"
    if not path.is_file():
        raise ScoringError(f"tokenizer not found: {path}")
    return Tokenizer.from_file(str(path))


def tools_of(traj: Trajectory) -> tuple[set[str], dict[str, dict[str, Any]]]:
    schemas = {}
    for tool in traj.tools:
        fn = function_of(tool)
        if isinstance(fn.get("name"), str):
            schemas[fn["name"]] = fn.get("parameters") or {"type": "object"}
    return set(schemas), schemas


def observe(traj: Trajectory) -> Observed:
    offered, schemas = tools_of(traj)
    turns, reply = _calls_per_turn(traj, offered), _reply(traj)
    results = [r.result for r in traj.tool_calls if r.result is not None]
    results += [m.get("content") for m in traj.messages if m.get("role") == "tool" and m.get("content")]
    failed = sum(1 for r in traj.tool_calls if r.error is not None or _is_error_payload(r.result))
    ran = sum(1 for r in traj.tool_calls if _valid(r, offered) and r.error is None and not _is_error_payload(r.result))
    return Observed(offered, schemas, turns, reply, results, failed, ran)


def _is_error_payload(result: Any) -> bool:
    return isinstance(result, dict) and set(result) == {"error"}


def _valid(rec: ToolCallRecord, offered: set[str]) -> bool:
    # the server judged validity against the tools it offered; the trajectory's own tool list is checked again so
    # that a record naming a tool the trajectory does not offer can never earn the valid-call share
    return rec.valid and isinstance(rec.name, str) and rec.name in offered and isinstance(rec.arguments, dict)


def _calls_per_turn(traj: Trajectory, offered: set[str]) -> list[TurnCalls]:
    turns: dict[int, list[ParsedCall]] = {}
    for rec in traj.tool_calls:
        valid = _valid(rec, offered)
        raw = rec.raw if rec.raw is not None else json.dumps({"name": rec.name, "arguments": rec.arguments})
        turns.setdefault(rec.turn, []).append(
            ParsedCall(rec.name, rec.arguments, valid, raw, rec.block, None if valid else rec.error or "invalid call")
        )
    return [TurnCalls(t, c) for t, c in sorted(turns.items())]


def _reply(traj: Trajectory) -> str:
    for msg in reversed(traj.messages):
        if msg.get("role") == "assistant" and isinstance(msg.get("content"), str):
            return text_outside_calls(msg["content"])
    return ""
