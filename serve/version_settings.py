"""Settings of the two version roles (docs/design.md#versions): `ServeSettings` inherits them (`[serve]` section)."""

from typing import Literal

from pydantic import Field, model_validator

from slca.config import SectionSettings


class VersionSettings(SectionSettings):
    """The candidate/promoted roles, pins and the live-signal rollback of `slca serve` (serve/versions.py)."""

    canary_share: float = Field(default=0.0, ge=0.0, le=1.0)
    """Share of callers' requests answered by the candidate (the learner's newest version) instead of the promoted
    one. 0: no caller sees a version before the gate promotes it."""
    follow_candidate: bool = False
    """Promote every candidate as it arrives (the behaviour before the gate: every caller gets the newest version).
    Off: callers get the promoted version, which only the gate, `slca promote` or a rollback moves."""
    role: Literal["both", "promoted", "candidate"] = "both"
    """Which roles this replica serves. "both": callers the promoted version, the system's own traffic the candidate
    (two engines with hf; one with an engine that holds one model per process, vLLM, whose callers then follow the
    candidate). "promoted": one engine holding the promoted version for every request — it ignores weight
    announcements and moves only on a promotion, `slca promote` or a rollback. "candidate": one engine following
    the announcements, answering every request with the candidate (the feed, the probe, the gate's candidate). One
    replica of each keeps the roles apart with any engine (`ops.candidate_replica` starts both in `slca up`)."""
    pin_engines: int = Field(default=1, ge=0)
    """Engines kept for pinned versions that neither role holds (each one model copy and its caches); a pin of
    another version while they are all busy gets 503 + Retry-After. 0: only the two roles' versions can be pinned."""
    drain_s: float = Field(default=60.0, ge=0)
    """Before the first candidate swap moves the engine callers share, seconds it waits for their requests in flight
    to end (their own engine holds the promoted version by then: new requests go there at once)."""
    hold_max_s: float = Field(default=1800.0, gt=0)
    """Longest hold of the candidate's engine at one version (`POST /admin/hold`, the gate while it judges the
    candidate): its weight swaps wait meanwhile, so a judge that dies stops the follower for this long at most."""
    promotion_poll_s: float = Field(default=2.0, gt=0)
    """Seconds between reads of the promotion record in Redis (another replica, or `slca promote`, may change it)."""
    keep_promoted: int = Field(default=3, ge=1)
    """Promoted versions (the current one and the latest before it) hard-linked under `<data_dir>/promoted-weights/`,
    so the learner's pruning (`weights.keep_versions`) never removes a version callers get or roll back to."""
    rollback_window: int = Field(default=200, ge=1)
    """Live-signal guard: the promoted version's latest requests it judges (auto rollback needs a full window of
    `rollback_min_requests` at least)."""
    rollback_min_requests: int = Field(default=50, ge=1)
    """Live-signal guard: requests of the promoted version seen before it may roll back."""
    rollback_min_tool_calls: int = Field(default=20, ge=1)
    """Live-signal guard: tool calls its window must hold before their malformed share is judged. Why: in the soak of
    2026-12-06 agent runs cut at 32 tokens executed only the short calls, which were malformed — 50 requests with a
    few executed calls judged "1.00 malformed" and rolled a version back."""
    rollback_max_malformed: float = Field(default=0.5, ge=0.0, le=1.0)
    """Live-signal guard: roll the promoted version back when more than this share of its tool calls are
    malformed (over its window)."""
    rollback_max_engine_errors: float = Field(default=0.2, ge=0.0, le=1.0)
    """Live-signal guard: roll the promoted version back when more than this share of its requests failed in the
    engine (over its window). 1.0 with `rollback_max_malformed` 1.0: never roll back automatically."""

    @model_validator(mode="after")
    def _one_role_follows(self):
        # follow_candidate promotes every candidate on arrival: with one role per replica there is nothing to follow
        if self.role != "both" and self.follow_candidate:
            raise ValueError(
                f"role {self.role!r} serves one role and follow_candidate makes the two one: set one of them "
                "(role 'both' with follow_candidate, or follow_candidate false)"
            )
        return self
