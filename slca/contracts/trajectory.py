"""One agent episode: exact sampled tokens, behaviour logprobs, explicit segment spans (docs/design.md#contracts)."""

from __future__ import annotations

import time
import uuid
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from slca.contracts.wire import Contract


class SegmentKind(str, Enum):
    SYSTEM = "system"
    USER = "user"
    TOOL_RESULT = "tool_result"
    TOOL_CALL = "tool_call"
    SUMMARY = "summary"
    REASONING = "reasoning"

    @property
    def generated(self) -> bool:
        """Only these kinds are sampled by the policy, carry logprobs and get advantages."""
        return self in GENERATED_KINDS


GENERATED_KINDS = frozenset({SegmentKind.TOOL_CALL, SegmentKind.SUMMARY, SegmentKind.REASONING})


class Segment(BaseModel):
    """Half-open token span `[start, end)` of one kind, in model turn `turn`."""

    model_config = ConfigDict(extra="forbid")

    start: int = Field(ge=0)
    end: int = Field(ge=0)
    kind: SegmentKind
    turn: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _non_empty(self) -> "Segment":
        if self.end <= self.start:
            raise ValueError(f"segment [{self.start}, {self.end}) is empty or reversed")
        return self


class ToolCallRecord(BaseModel):
    """A tool call as the server parsed it from a model turn, and what executing it gave.

    Every call of every model turn is recorded, in the order written, executed or not (a turn cut by the token
    limit, or calls written with no tools offered, are not executed: `result` and `error` stay None); malformed
    calls are kept, they are training signal.
    Scorers read calls from here (the parse of the sampled text, `slca.chat.hermes.parse_tool_calls`, outside
    reasoning), never by decoding tokens again."""

    model_config = ConfigDict(extra="forbid")

    turn: int = Field(ge=0)
    """Model turn that wrote the call."""
    block: int = Field(ge=0)
    """Index of its `<tool_call>` block within the turn: calls of one block (a JSON array) share it."""
    name: str | None = None
    arguments: Any = None
    valid: bool = True
    """JSON object naming an offered tool with object arguments."""
    raw: str | None = None
    """The text inside the `<tool_call>` block, as sampled."""
    result: Any = None
    error: str | None = None
    """Why the executed call failed (a malformed call is answered with an error too)."""
    latency_s: float = 0.0


class GoldCall(BaseModel):
    """An expected call. Calls sharing `step` are expected in parallel, in one block."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    step: int = Field(default=0, ge=0)


class GroundTruth(BaseModel):
    model_config = ConfigDict(extra="forbid")

    calls: list[GoldCall] = Field(default_factory=list)
    facts: list[str] = Field(default_factory=list)
    """Key facts the final answer must contain."""
    needs_tool: bool | None = None
    """None: derived from `calls` (a task with gold calls needs a tool)."""
    completion_check: dict[str, Any] | None = None
    refusal: bool = False
    """The right final reply declines: no offered tool can serve the request (abstention). A reply that claims
    to have done it, or that does not say it cannot, fails the task's reply check."""

    @property
    def tool_needed(self) -> bool:
        return bool(self.calls) if self.needs_tool is None else self.needs_tool


class Trajectory(Contract):
    id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    task_id: str = Field(min_length=1)
    policy_version: int = Field(ge=0)
    mixed_version: bool = False
    """True when a weight swap happened mid-episode (turns were sampled by two versions)."""
    created_at: float = Field(default_factory=time.time)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tokens: list[int]
    logprobs: list[float | None]
    segments: list[Segment]
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    ground_truth: GroundTruth | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    group_key: str | None = None
    """Trajectories sharing it form one rollout group whatever their policy versions (the n rollouts of one
    agent-run request: their behaviour logprobs already correct for a weight swap between them). None: grouped
    by `task_id` and policy-version window."""
    replica: str = ""
    """The serve replica that sampled the episode (`serve.replica_id`, `<host>:<port>` by default), so that a
    trajectory can be traced to the replica and the weights it served when several replicas record into one
    stream. Empty: recorded before replicas had ids (old records still decode; not a schema bump)."""

    @model_validator(mode="after")
    def _consistent(self) -> "Trajectory":
        n = len(self.tokens)
        if n == 0:
            raise ValueError("tokens: empty trajectory")
        if len(self.logprobs) != n:
            raise ValueError(f"logprobs: length {len(self.logprobs)} != {n} tokens")
        if any(t < 0 for t in self.tokens):
            raise ValueError("tokens: negative token id")
        covered = 0
        for i, seg in enumerate(sorted(self.segments, key=lambda s: s.start)):
            if seg.start != covered:
                what = "overlaps" if seg.start < covered else "leaves a gap before"
                raise ValueError(f"segments: segment {i} [{seg.start}, {seg.end}) {what} token {covered}")
            covered = seg.end
        if covered != n:
            raise ValueError(f"segments: cover {covered} of {n} tokens")
        for seg in self.segments:
            for t in range(seg.start, seg.end):
                lp = self.logprobs[t]
                if seg.kind.generated and lp is None:
                    raise ValueError(f"logprobs: missing on generated token {t} ({seg.kind.value})")
                if not seg.kind.generated and lp is not None:
                    raise ValueError(f"logprobs: present on non-generated token {t} ({seg.kind.value})")
                if lp is not None and not lp <= 0.0:
                    raise ValueError(f"logprobs: token {t} has logprob {lp} > 0 or NaN")
        self.segments.sort(key=lambda s: s.start)
        return self

    def kinds_per_token(self) -> list[SegmentKind]:
        out: list[SegmentKind] = [SegmentKind.SYSTEM] * len(self.tokens)
        for seg in self.segments:
            out[seg.start : seg.end] = [seg.kind] * (seg.end - seg.start)
        return out

    def has_kind(self, kind: SegmentKind) -> bool:
        return any(s.kind == kind for s in self.segments)

    @property
    def num_generated(self) -> int:
        return sum(s.end - s.start for s in self.segments if s.kind.generated)
