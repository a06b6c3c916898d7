"""One model turn: run the engine, map engine failures to 503, decode and tag the sampled tokens."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import Any

from serve.engines.base import Engine, EngineError, GenerationResult, SamplingParams, generate
from serve.errors import EngineUnavailable
from serve.metrics import ServeMetrics
from slca.chat.hermes import ParsedCall
from slca.chat.segments import generated_kinds
from slca.contracts import SegmentKind, ToolCallRecord


def end_ids(engine: Engine) -> set[int]:
    return set(getattr(engine, "stop_ids", None) or {engine.tokenizer.eos_token_id})


@dataclass
class Turn:
    result: GenerationResult
    text: str
    """The sampled tokens decoded exactly (special tokens kept), without the closing end-of-turn token."""
    kinds: list[SegmentKind]

    @property
    def closed(self) -> bool:
        """Whether the turn ended with a sampled end-of-turn token."""
        return self.result.finish_reason == "stop" and self.text_len < len(self.result.token_ids)

    text_len: int = 0


async def sample(
    engine: Engine, metrics: ServeMetrics, prompt_ids: list[int], params: SamplingParams, timeout_s: float
) -> GenerationResult:
    try:
        result = await asyncio.wait_for(generate(engine, prompt_ids, params), timeout_s)
    except (EngineError, asyncio.TimeoutError) as exc:
        metrics.engine_failures.inc()
        raise EngineUnavailable(f"engine unavailable: {exc or 'timed out'}") from None
    metrics.tokens_generated.inc(len(result.token_ids))
    return result


def decode_turn(engine: Engine, result: GenerationResult) -> Turn:
    ids = result.token_ids
    body = ids[:-1] if ids and ids[-1] in end_ids(engine) else ids
    text = engine.tokenizer.decode(body, skip_special_tokens=False)
    kinds = generated_kinds(engine.tokenizer, ids, end_ids(engine))
    return Turn(result, text, kinds, text_len=len(body))


def openai_tool_call(call: ParsedCall) -> dict[str, Any]:
    return {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
    }


def call_record(call: ParsedCall, turn_no: int, **outcome: Any) -> ToolCallRecord:
    """The trajectory's record of a call as parsed here, with what executing it gave (`result`, `error`,
    `latency_s`) when it was executed: the workers score these records and never parse the tokens again."""
    return ToolCallRecord(
        turn=turn_no,
        block=call.block,
        name=call.name,
        arguments=call.arguments,
        valid=call.valid,
        raw=call.raw,
        **outcome,
    )
