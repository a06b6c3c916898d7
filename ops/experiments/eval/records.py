"""What an evaluation asks and what it gets back: the plan (`EvalPlan`), its items (`EvalItem`: a task of the pack
or a BFCL case) and one record per item and run (`ItemRecord`, one JSONL line). Below both `suite` (which plans
and runs items) and `items` (which runs one), so that neither imports the other for them; `suite` re-exports
them."""

from __future__ import annotations

from dataclasses import dataclass, field

from ops.experiments.eval.bfcl import BfclCase
from ops.experiments.eval.stats import TRAIN_PROBE
from slca.contracts import Task

MODES = ("greedy", "sampled")


@dataclass
class EvalItem:
    """One thing to evaluate: a task of the pack (`task`) or a BFCL case (`case`)."""

    suite: str
    """'test' | 'novel' (task pack splits) | 'train_probe' (the training-task probe) | 'bfcl:<category>'."""
    item_id: str
    task: Task | None = None
    case: BfclCase | None = None

    @property
    def seed(self) -> int:
        """The item's own sampling seed (sampled mode): stable across runs and processes, unlike `hash()`."""
        import zlib

        return zlib.crc32(f"{self.suite}/{self.item_id}".encode()) & 0x7FFFFFFF


@dataclass
class ItemRecord:
    """One item of one run (one JSONL line)."""

    suite: str
    item_id: str
    success: bool
    """Tasks: the scorer's `success` component (every gold call matched by name and value, no invented call or
    argument, reply checks hold). BFCL: BFCL's ast_checker verdict (irrelevance: no call) and no malformed block."""
    exec: float | None
    """HierR execution reward (tasks; None for BFCL)."""
    pref: float | None
    """HierR preference reward (tasks; None for BFCL)."""
    components: dict[str, float] = field(default_factory=dict)
    calls: list[dict] = field(default_factory=list)
    """Every call the model wrote, in order: {name, arguments, valid} (+ turn for tasks)."""
    reply: str = ""
    """The final assistant text (tasks: the last assistant message; BFCL: the text outside calls)."""
    policy_version: int | None = None
    error: str | None = None
    """Why the request failed (the item counts as a failure); None when it ran."""
    detail: str | None = None
    """Why an item that ran failed, when the checker says (BFCL's checker errors, a malformed call)."""


@dataclass(frozen=True)
class EvalPlan:
    splits: tuple[str, ...] = ("test", "novel", TRAIN_PROBE)
    """Splits of the task pack: held-out ones (every task of each) and `train_probe`, the training-task probe
    (`train_probe_size` train tasks, fixed)."""
    pack: str = "everyday"
    train_probe_size: int = 64
    """Tasks of the training-task probe (`sim.tasks.probe.training_probe`: stratified over intents, its own seed)."""
    bfcl_categories: tuple[str, ...] = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
    bfcl_per_category: int | None = None
    """None: every item of each category; N: a seeded random sample of N (never the first N)."""
    bfcl_seed: int = 0
    mode: str = "greedy"
    """'greedy' (temperature 0) or 'sampled' (temperature 1, seeded per item: `EvalItem.seed`)."""
    max_tokens: int = 256
    max_turns: int = 3
    concurrency: int = 16
    """Requests in flight: the server's engine batches them (vLLM's scheduler takes them all in one batch)."""

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"unknown eval mode {self.mode!r}; known: {', '.join(MODES)}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be ≥ 1, got {self.concurrency}")
