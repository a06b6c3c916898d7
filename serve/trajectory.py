"""Building a `Trajectory` turn by turn from environment chunks and sampled turns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slca.contracts import GroundTruth, Segment, SegmentKind, ToolCallRecord, Trajectory


@dataclass
class TrajectoryBuilder:
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float | None] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    versions: set[int] = field(default_factory=set)

    def _append(self, start: int, kind: SegmentKind, turn: int) -> None:
        end = len(self.tokens)
        if end == start:
            return
        last = self.segments[-1] if self.segments else None
        if last is not None and last.kind == kind and last.turn == turn and last.end == start:
            last.end = end
        else:
            self.segments.append(Segment(start=start, end=end, kind=kind, turn=turn))

    def add_environment(self, ids: list[int], kind: SegmentKind, turn: int) -> None:
        start = len(self.tokens)
        self.tokens += ids
        self.logprobs += [None] * len(ids)
        self._append(start, kind, turn)

    def add_generated(
        self, ids: list[int], logprobs: list[float], kinds: list[SegmentKind], turn: int, versions: list[int]
    ) -> None:
        """Sampled tokens exactly as the engine returned them, one kind per token."""
        for token, logprob, kind in zip(ids, logprobs, kinds):
            start = len(self.tokens)
            self.tokens.append(token)
            self.logprobs.append(min(float(logprob), 0.0))
            self._append(start, kind, turn)
        self.versions.update(versions)

    def build(
        self,
        *,
        task_id: str,
        tools: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        tool_calls: list[ToolCallRecord],
        ground_truth: GroundTruth | None,
        meta: dict[str, Any],
        fallback_version: int,
        group_key: str | None = None,
        replica: str = "",
    ) -> Trajectory:
        return Trajectory(
            task_id=task_id,
            policy_version=max(self.versions) if self.versions else fallback_version,
            mixed_version=len(self.versions) > 1,
            tools=tools,
            messages=messages,
            tokens=self.tokens,
            logprobs=self.logprobs,
            segments=self.segments,
            tool_calls=tool_calls,
            ground_truth=ground_truth,
            meta=meta,
            group_key=group_key,
            replica=replica,
        )
