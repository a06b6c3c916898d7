"""In-domain evaluation: the task pack's test split, run as multi-turn episodes against the sim's tools.

Metrics per task: name F1 (multiset F1 of called vs gold tool names), argument match (per gold call with
arguments, the share of its keys whose values the best same-name predicted call matches), success (every gold
call matched exactly once with all its arguments, and no extra call; for no-tool tasks: no call at all), tool
turns (model turns that made a call). The matching is the scorers' own (`workers.scoring.match`, DESIGN.md §4:
loose value equality, greedy best match per gold call), so eval and the HierR reward agree on what a match is.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from slca.chat.hermes import function_of, parse_tool_calls
from slca.contracts import GoldCall, Task
from workers.scoring.match import match_calls, name_f1


def _matches(predicted: list[dict], gold: list[GoldCall]):
    return match_calls(gold, [(c["name"], c.get("arguments") or {}) for c in predicted])


def argument_match(predicted: list[dict], gold: list[GoldCall]) -> float:
    """Mean, over gold calls with arguments, of the share of their keys whose values the matched call sets
    (`workers.scoring.match`, the scorers' matching: 0 for a gold call no predicted call matched)."""
    scored = [m for m in _matches(predicted, gold) if m.gold.arguments]
    if not scored:
        return 1.0
    return sum(m.value for m in scored if m.pred_index is not None) / len(scored)


def success(predicted: list[dict], gold: list[GoldCall], needs_tool: bool) -> bool:
    """Every gold call matched by one call with all its arguments, and no extra call (no call at all when the
    task needs no tool)."""
    if not needs_tool:
        return not predicted
    return len(predicted) == len(gold) and all(m.correct for m in _matches(predicted, gold))


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
            "name_f1": name_f1([g.name for g in gold.calls], [c["name"] for c in self.calls]),
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
