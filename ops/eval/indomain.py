"""In-domain evaluation: the task pack's test split, run as multi-turn episodes against the sim's tools.

Metrics per task: name F1 (multiset F1 of called vs gold tool names), argument match (per gold call with
arguments, the share of its keys whose values the best same-name predicted call matches), success (every gold
call matched exactly once with all its arguments, and no extra call; for no-tool tasks: no call at all), tool
turns (model turns that made a call).
"""

from __future__ import annotations

import json
import math
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from slca.chat.hermes import function_of, parse_tool_calls
from slca.contracts import GoldCall, Task


def loose_equal(a: Any, b: Any) -> bool:
    """Trimmed case-insensitive strings, numbers within 1e-9, 'true'/1/True, canonical JSON for containers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return str(a).strip().lower() in ("true", "1") and str(b).strip().lower() in ("true", "1") or (
            str(a).strip().lower() in ("false", "0") and str(b).strip().lower() in ("false", "0"))
    if isinstance(a, (int, float)) or isinstance(b, (int, float)):
        try:
            return math.isclose(float(a), float(b), abs_tol=1e-9)
        except (TypeError, ValueError):
            return False
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().lower() == b.strip().lower()
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def name_f1(predicted: list[str], gold: list[str]) -> float:
    if not predicted and not gold:
        return 1.0
    common = sum((Counter(predicted) & Counter(gold)).values())
    if common == 0:
        return 0.0
    p, r = common / len(predicted), common / len(gold)
    return 2 * p * r / (p + r)


def _key_share(call: dict, gold: GoldCall) -> float:
    args = call.get("arguments") or {}
    return sum(k in args and loose_equal(args[k], v) for k, v in gold.arguments.items()) / len(gold.arguments)


def argument_match(predicted: list[dict], gold: list[GoldCall]) -> float:
    scored = [g for g in gold if g.arguments]
    if not scored:
        return 1.0
    unused = list(predicted)
    total = 0.0
    for g in scored:
        candidates = [c for c in unused if c["name"] == g.name]
        if not candidates:
            continue
        best = max(candidates, key=lambda c: _key_share(c, g))
        total += _key_share(best, g)
        unused.remove(best)
    return total / len(scored)


def success(predicted: list[dict], gold: list[GoldCall], needs_tool: bool) -> bool:
    if not needs_tool:
        return not predicted
    if len(predicted) != len(gold):
        return False
    unused = list(predicted)
    for g in gold:
        match = next((c for c in unused if c["name"] == g.name and _key_share(c, g) == 1.0 if g.arguments), None)
        match = match or next((c for c in unused if c["name"] == g.name and not g.arguments), None)
        if match is None:
            return False
        unused.remove(match)
    return True


@dataclass
class EpisodeRun:
    task: Task
    messages: list[dict[str, Any]]
    episode: Any
    calls: list[dict[str, Any]] = field(default_factory=list)
    invalid_calls: int = 0
    tool_turns: int = 0
    done: bool = False

    def score(self) -> dict[str, Any]:
        gold = self.task.ground_truth
        return {
            "task_id": self.task.task_id,
            "name_f1": name_f1([c["name"] for c in self.calls], [g.name for g in gold.calls]),
            "argument_match": argument_match(self.calls, gold.calls),
            "success": success(self.calls, gold.calls, gold.tool_needed) and self.invalid_calls == 0,
            "tool_turns": self.tool_turns,
            "invalid_calls": self.invalid_calls,
        }


async def run_batch(generator, tasks: list[Task], provider, max_turns: int) -> list[dict[str, Any]]:
    """One batch of episodes, turn by turn: every still-active episode gets one model turn per round."""
    runs = [EpisodeRun(t, list(t.messages), await provider.new_episode(t.tools, f"eval-{uuid.uuid4()}"))
            for t in tasks]  # fmt: skip
    try:
        for _ in range(max_turns):
            active = [r for r in runs if not r.done]
            if not active:
                break
            texts = generator.generate([generator.prompt(r.messages, r.task.tools) for r in active])
            for run, text in zip(active, texts):
                await _apply_turn(run, text)
    finally:
        for run in runs:
            await run.episode.close()
    return [r.score() for r in runs]


async def _apply_turn(run: EpisodeRun, text: str) -> None:
    offered = {function_of(t).get("name") for t in run.task.tools}
    calls = parse_tool_calls(text, offered)
    run.messages.append({"role": "assistant", "content": text})
    if not calls:
        run.done = True
        return
    run.tool_turns += 1
    for call in calls:
        if not call.valid:
            run.invalid_calls += 1
            run.messages.append({"role": "tool", "content": {"error": {"status": 400, "message": call.error}}})
            continue
        run.calls.append({"name": call.name, "arguments": call.arguments})
        result = await run.episode.call(call.name, call.arguments)
        run.messages.append({"role": "tool", "content": result.for_model()})


def summarize(rows: list[dict[str, Any]]) -> dict[str, float]:
    n = len(rows) or 1
    return {
        "n": len(rows),
        "name_f1": sum(r["name_f1"] for r in rows) / n,
        "argument_match": sum(r["argument_match"] for r in rows) / n,
        "success": sum(r["success"] for r in rows) / n,
        "tool_turns": sum(r["tool_turns"] for r in rows) / n,
    }
