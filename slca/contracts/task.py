"""A task: what the agent is asked, the tools it is offered, and what a good answer does (docs/design.md#contracts)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from slca.contracts.trajectory import GroundTruth
from slca.contracts.wire import Contract

ToolMode = Literal["simulated", "real"]


class Task(Contract):
    task_id: str = Field(min_length=1)
    domain: str = "everyday"
    """Task pack it comes from: 'everyday', 'airline', 'retail', ..."""
    split: Literal["train", "test", "novel"] = "train"
    """'novel': held-out intents, tools and phrasings that no training data uses (`sim.tasks`)."""
    messages: list[dict[str, Any]]
    """OpenAI-style messages: the user query (and an optional system message)."""
    tools: list[dict[str, Any]] = Field(default_factory=list)
    """OpenAI tool definitions `{"type": "function", "function": {name, description, parameters}}`, each
    optionally with `x-mode` ('simulated' | 'real') and `x-response-schema` (JSON schema of the result)."""
    ground_truth: GroundTruth = Field(default_factory=GroundTruth)
    intent: str | None = None
    """Which intent/template produced it (several phrasings share one intent)."""
