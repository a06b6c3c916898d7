"""HierR reward of one trajectory: two channels and every component (docs/design.md#hierr)."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, field_validator

from slca.contracts.wire import Contract


class CallScore(BaseModel):
    """Score of the calls made at one model turn (for turn-level credit)."""

    model_config = ConfigDict(extra="forbid")

    turn: int = Field(ge=0)
    score: float
    name: str | None = None


class Reward(Contract):
    trajectory_id: str
    exec: float
    """Execution (process) channel, in [0, 1]."""
    pref: float
    """Preference (summary) channel, in [0, 1], or the omission penalty."""
    components: dict[str, float] = Field(default_factory=dict)
    per_call: list[CallScore] = Field(default_factory=list)
    omission_penalized: bool = False
    scorer_version: str = "hierr-1"
    judge: str = "rule"

    @field_validator("exec", "pref")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be finite")
        return v

    def scalar(self, w_exec: float = 1.0, w_pref: float = 1.0) -> float:
        """`R = w_exec·r_exec + w_pref·r_pref` for trajectory-level baselines."""
        return w_exec * self.exec + w_pref * self.pref
