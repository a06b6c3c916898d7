"""The multi-turn agent loop behind POST /v1/agent/runs.

An episode: model turn → parse `<tool_call>` blocks → execute them through the tool provider (SGLS or the
fallback) → feed `<tool_response>` turns back → … until a turn without calls (the final answer), the turn
limit, or the context limit. The trajectory keeps the exact sampled ids; environment text is tokenized
turn by turn through the chat template, never the generated text.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from serve.engines.base import SamplingParams
from serve.metrics import ServeMetrics
from serve.prompting import continuation_ids, to_template_messages
from serve.trajectory import TrajectoryBuilder
from serve.turns import Turn, call_record, decode_turn, openai_tool_call, sample
from serve.versions import note_tool_call
from slca.chat.hermes import ParsedCall, parse_tool_calls, render_tool_response, text_outside_calls
from slca.contracts import GroundTruth, SegmentKind, ToolCallRecord, ToolResult, Trajectory


@dataclass
class EpisodeSpec:
    """One rollout's inputs (shared by the n rollouts of a group, except the seed)."""

    task_id: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    offered: set[str]
    params: SamplingParams
    first_turn_grammar: str | None
    max_turns: int
    max_model_len: int
    prompt: list[tuple[list[int], SegmentKind]]
    """The prompt's token ids, one chunk per message with its segment kind: rendered once per request, shared
    by its n rollouts (`serve.prompting.request_chunks`)."""
    ground_truth: GroundTruth | None = None
    run_id: str | None = None
    """The agent-run request these rollouts belong to: the workers group its n trajectories together."""


@dataclass
class EpisodeOutcome:
    trajectory: Trajectory
    message: dict[str, Any]
    tool_calls: list[dict[str, Any]]
    finish_reason: str
    meta: dict[str, Any] = field(default_factory=dict)


class AgentRunner:
    def __init__(self, engine, tools_provider, metrics: ServeMetrics, timeout_s: float, replica: str = ""):
        self.engine = engine
        self.tools = tools_provider
        self.metrics = metrics
        self.timeout_s = timeout_s
        self.replica = replica
        """This replica's id, written on every trajectory (`Trajectory.replica`)."""

    async def run(self, spec: EpisodeSpec, seed: int) -> EpisodeOutcome:
        tok = self.engine.tokenizer
        started = time.time()
        history = to_template_messages(spec.messages, spec.tools)
        messages = list(spec.messages)
        builder = TrajectoryBuilder()
        for ids, kind in spec.prompt:
            builder.add_environment(ids, kind, 0)
        records: list[ToolCallRecord] = []
        episode = await self.tools.new_episode(spec.tools, str(uuid.uuid4()))
        try:
            for turn_no in range(spec.max_turns):
                turn = await self._model_turn(spec, builder, seed + 7919 * turn_no, turn_no)
                # parsed even without tools: a call the policy wrote anyway is recorded (and scored) as invalid
                parsed = parse_tool_calls(turn.text, spec.offered)
                calls = parsed if spec.tools else []
                history.append({"role": "assistant", "content": turn.text})
                messages.append(_assistant_message(turn, calls))
                if not calls or turn.result.finish_reason == "length":
                    records += [call_record(c, turn_no) for c in parsed]  # not executed
                    finish = "length" if turn.result.finish_reason == "length" else "stop"
                    break
                results = [await self._execute(episode, call, turn_no, records, spec.offered) for call in calls]
                tool_messages = _tool_messages(messages[-1], calls, results)
                messages += tool_messages
                new = [{"role": "tool", "content": render_tool_response(m["content"])} for m in tool_messages]
                env_ids = await asyncio.to_thread(continuation_ids, tok, history, new, turn.closed)
                builder.add_environment(env_ids, SegmentKind.TOOL_RESULT, turn_no)
                history += new
                if len(builder.tokens) + 8 >= spec.max_model_len:
                    finish = "length"
                    break
            else:
                finish = "max_turns"
        finally:
            await episode.close()
        self.metrics.tool_turns.observe(sum(1 for m in messages[len(spec.messages) :] if m.get("tool_calls")))
        meta = {
            "engine": self.engine.name,
            "temperature": spec.params.temperature,
            "top_p": spec.params.top_p,
            "seed": seed,
            "finish_reason": finish,
            "duration_s": time.time() - started,
            "constrained_turns": [0] if spec.first_turn_grammar else [],
            "tools_backend": type(self.tools).__module__,
        }
        traj = builder.build(
            task_id=spec.task_id,
            tools=spec.tools,
            messages=messages,
            tool_calls=records,
            ground_truth=spec.ground_truth,
            meta=meta,
            fallback_version=self.engine.version,
            group_key=spec.run_id,
            replica=self.replica,
        )
        final = (
            messages[-1]
            if messages[-1]["role"] == "assistant"
            else next(m for m in reversed(messages) if m["role"] == "assistant")
        )
        log = [r.model_dump(mode="json") for r in records]
        return EpisodeOutcome(traj, final, log, finish)

    async def _model_turn(self, spec: EpisodeSpec, builder: TrajectoryBuilder, seed: int, turn_no: int) -> Turn:
        budget = spec.max_model_len - len(builder.tokens)
        grammar = spec.first_turn_grammar if turn_no == 0 else None
        params = SamplingParams(
            spec.params.temperature, spec.params.top_p, min(spec.params.max_tokens, budget), seed, [], grammar
        )
        result = await sample(self.engine, self.metrics, builder.tokens, params, self.timeout_s)
        turn = await asyncio.to_thread(decode_turn, self.engine, result)  # CPU work of a long turn: off the loop
        builder.add_generated(result.token_ids, result.logprobs, turn.kinds, turn_no, result.versions)
        return turn

    async def _execute(
        self, episode, call: ParsedCall, turn_no: int, records: list[ToolCallRecord], offered: set[str]
    ) -> ToolResult:
        t0 = time.perf_counter()
        if call.valid:
            result = await episode.call(call.name, call.arguments)
        else:  # a malformed call is answered like an API would, and kept as training signal
            result = ToolResult(ok=False, status=400, error=call.error or "malformed tool call")
        latency = time.perf_counter() - t0
        outcome = "ok" if result.ok else ("malformed" if not call.valid else "error")
        self.metrics.tool_calls.labels(tool=ServeMetrics.known_tool(call.name, offered), outcome=outcome).inc()
        note_tool_call(outcome)  # the live-signal guard of the promoted version (serve/live_signals.py)
        records.append(
            call_record(
                call, turn_no, result=result.for_model(), error=result.error, latency_s=result.latency_s or latency
            )
        )
        return result


def _assistant_message(turn: Turn, calls: list[ParsedCall]) -> dict[str, Any]:
    valid = [c for c in calls if c.valid]
    if not calls:
        return {"role": "assistant", "content": turn.text}
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text_outside_calls(turn.text) or None,
        "raw_content": turn.text,
    }
    message["tool_calls"] = [openai_tool_call(c) for c in valid]
    return message


def _tool_messages(assistant: dict[str, Any], calls: list[ParsedCall], results: list[ToolResult]) -> list[dict]:
    ids = iter(c["id"] for c in assistant.get("tool_calls", []))
    out = []
    for call, result in zip(calls, results):
        call_id = next(ids) if call.valid else f"call_invalid_{uuid.uuid4().hex[:8]}"
        out.append({"role": "tool", "tool_call_id": call_id, "name": call.name, "content": result.for_model()})
    return out
