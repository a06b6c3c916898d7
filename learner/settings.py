"""Settings of the learner."""

from typing import ClassVar, Literal

from pydantic import ConfigDict, Field, model_validator

from slca.config import SectionSettings


class AdvantageSettings(SectionSettings):
    """`learner.advantage.*`: the knobs every advantage estimator reads (docs/design.md#advantages).
    Estimators receive this object itself (`learner.advantages`), so a field added here reaches them without
    being copied."""

    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True)

    w_exec: float = 1.0
    """Weight of the execution channel (applied after normalisation)."""
    w_pref: float = 1.0
    """Weight of the preference channel (applied after normalisation)."""
    eps: float = 1e-6
    """ε added to the group standard deviation in `norm_c`."""
    reasoning_route: Literal["next", "prev", "none"] = "next"
    """Credit of reasoning tokens: 'next' (the segment they precede; trailing ones fall back to the previous),
    'prev' (the segment they follow), 'none' (advantage 0)."""
    turn_level: bool = False
    """slca: per-turn normalised per-call scores on tool_call segments (GiGPO-style). Reward shaping (the
    omission guard, RLTR's penalties) is the scorer's: see `workers.no_call_penalty`, `workers.rltr_*`."""
    toolpo_lambda: float = 1.0
    """ToolPO: weight λ of the action advantage on tool_call tokens."""
    decision_token: bool = True
    """slca: on groups whose task's gold has no call (`GroundTruth.tool_needed` False), every member takes part
    in the exec channel and a member without a tool_call segment gets its exec advantage on its first generated
    token (the decision not to call). Plain SLCA never pushes back on a spurious call there: a member that
    answers without calling has no tool_call segment, so it is outside P_exec and a lone caller's call tokens
    get no negative exec advantage. Off: the paper's estimator (`slca bench learning` arm `slca`; on: `slca_decision`).
    On by default since the recipe sweep: part of the aimed recipe (see `LearnerSettings.groups_per_step`)."""
    success_weight: float = 1.0
    """Weight of task success in the exec channel: the exec-channel reward every estimator normalises becomes
    `r + success_weight·success` (slca, grpo: r_exec; toolpo: its action reward; rltr: its plan reward), success the
    scorer's component 'success' (0/1; 0 where a reward lacks it). Turn-level per-call scores (`turn_level`) are
    not shifted: success is an outcome of the whole trajectory. 0: the exec channel as scored (the paper's; r_exec
    pays 0.80 with every value wrong, so 0 does not aim at success). 1 by default since the recipe sweep: part of
    the aimed recipe (see `LearnerSettings.groups_per_step`)."""
    extra: dict = Field(default_factory=dict)
    """Extra knobs passed to estimators registered by plug-ins."""


class LossSettings(SectionSettings):
    """`learner.loss.*`: the policy loss and its knobs (docs/design.md#loss). Losses receive this object itself; the
    step's token and sequence totals travel with the inputs (`learner.loss.LossInputs`), not here."""

    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True)

    name: str = "clip"
    """Policy loss: clip (behaviour-logprob clipped surrogate) | clip_tis (truncated importance weights)."""
    eps_low: float = 0.2
    """Lower clip range ε_low of the ratio."""
    eps_high: float = 0.28
    """Upper clip range ε_high of the ratio (DAPO clip-higher)."""
    kl_beta: float = 0.0
    """Weight β of the k3 KL to the frozen reference, a copy of the weights the learner starts from (the warm start:
    `learner.init_model`, else `common.model`), loaded by `slca learn` and `slca train`
    (`learner.model.reference_for`); 0: no reference model is loaded (no extra memory)."""
    tis_cap: float = 2.0
    """clip_tis: truncation C of the importance weight ρ = π_θ/π_behaviour in the unclipped branch (with
    C ≥ 1+eps_high it bounds only negative-advantage tokens: dual-clip)."""
    aggregation: Literal["token_mean", "seq_mean"] = "token_mean"
    """Loss aggregation over generated tokens."""


MOVED = {
    **{k: f"advantage.{k}" for k in ("w_exec", "w_pref", "reasoning_route", "turn_level", "toolpo_lambda")},
    "adv_eps": "advantage.eps",
    "extra_adv": "advantage.extra",
    **{k: f"loss.{k}" for k in ("eps_low", "eps_high", "kl_beta", "tis_cap", "aggregation")},
}
"""Flat keys of earlier versions → their place in the tree (named in the error, so an old file is fixed in one read)."""


class LearnerSettings(SectionSettings):
    estimator: str = "slca"
    """Advantage estimator: any registered one (`learner.advantages`; built in: learner/advantages/estimators.py;
    listed by `slca train --list-estimators`)."""
    advantage: AdvantageSettings = Field(default_factory=AdvantageSettings)
    """Knobs of the advantage estimators (`learner.advantage.*`)."""
    loss: LossSettings = Field(default_factory=LossSettings)
    """The policy loss and its knobs (`learner.loss.*`)."""
    lr: float = 1e-5
    """AdamW learning rate for the 135M default model, with 4 groups of 8 per step and the aimed advantage (see
    `groups_per_step`). In the recipe sweep (bench/learning/recipe, 2 blocks, 384 trajectories per arm) lr 1e-6,
    3e-6 and 1e-5 at 4 groups per step all stayed within ±2 points of the warm start on both the training probe and
    the test split; 1e-5 moved the training probe most (+1.6 [−5.5, +7.8]) and changes the most greedy answers.
    Lower it for larger models (1e-6 is usual at 1–7B); 2e-5 with groups of 4 drifted down within 20 steps."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm (0: off)."""
    init_model: str | None = None
    """Model to start from ('embedded', 'tiny' or a model directory, as `common.model`); None: `common.model` (the
    served base model)."""
    groups_per_step: int = 4
    """Rollout groups per optimizer step (each group is one gradient-accumulation micro-batch). The default recipe
    — 4 groups per step, lr 1e-5, `advantage.success_weight` 1, `advantage.decision_token` on,
    `screen_success_variance` on — comes from the recipe sweep (bench/learning/recipe, blocks on an AMX Xeon and an
    AVX-512 EPYC, 384 trajectories per arm): the sweep named no winner over the warm start, but the earlier default
    (1 group per step, lr 1e-5, exec channel as scored, no screening) lost −6.4 points [−12.0, −0.9] on the test
    split and −8.6 [−17.2, 0.0] on the tasks it trained on, while this recipe did no harm on either (+0.4
    [−3.8, +4.7] test) and beat the earlier default on the training tasks by +10.2 points [+3.9, +17.2]."""
    share_prefix: bool = True
    """Pack each group as one row that runs the shared prompt once (False: every member runs it)."""
    skip_zero_advantage_groups: bool = True
    """Skip forward/backward for a group whose advantages are all zero (it contributes nothing)."""
    screen_success_variance: bool = True
    """Difficulty screening: skip (no advantages, no forward/backward) a group whose members all have the same task
    success (the scorer's component 'success'; a group where a member lacks it is kept): all solved or all failed,
    it says nothing about what solves the task. Counted per step (`groups_screened` in `StepStats.to_log()`); 28% of
    groups in the recipe sweep's EPYC block, 6–19% on the AMX block. On by default: part of the aimed recipe."""
    max_staleness: int = 4
    """Drop groups whose oldest member is more than this many versions behind the learner."""
    publish_every: int = 1
    """Publish weights every K optimizer steps."""
    checkpoint_every: int = 1
    """Checkpoint every K steps; groups are acknowledged only once the step that used them is checkpointed."""
    consumed_ids_kept: int = Field(default=4096, ge=0)
    """Ids of applied (or dropped) groups the learner and its checkpoints keep beyond those not yet acknowledged.
    An acknowledged entry is never delivered again, so only the unacknowledged ones must be recognised after a
    restart; the newest others stay as a margin (a group emitted twice)."""
    lora_rank: int = 0
    """LoRA rank (peft); 0: full fine-tuning. LoRA is merged before publishing."""
    lora_alpha: int = 32
    """LoRA alpha."""
    gradient_checkpointing: bool = True
    """Recompute each layer's activations in the backward pass instead of keeping them: a step of one group of
    8 × (800 + 128) tokens on the embedded model peaked at 2.7 GiB instead of 5.2 GiB, at 0.85× the trained tokens
    per second (fp32 on an AVX2 CPU, `slca bench learner-memory`, bench/learner-memory/). On, so that the whole
    system fits its 6 GiB; off where memory is plentiful and the learner is the bottleneck."""
    onednn_primitive_cache: int = Field(default=64, ge=0)
    """Entries of oneDNN's primitive cache and of torch's LRU of them in the learner and `slca sft`
    (ONEDNN_PRIMITIVE_CACHE_CAPACITY and LRU_CACHE_CAPACITY, set before torch builds its first primitive; both 1,024
    by default). Where torch runs bf16 matmuls through oneDNN (CPUs with native bf16), every new length of a step's
    rows builds primitives both caches keep, up to ~2 MiB each: the 30-minute soak's learner
    (bench/soak/learning-30-control, `avx512_bf16`) rose ≈ 10 MiB per trained step, 2,150 → 2,386 MiB over 24 steps,
    with the heap trimmed after each (bench/learner-memory/growth: the probe's per-step slope). 0 leaves the
    defaults; a variable already in the environment wins (serve's own: `serve.onednn_primitive_cache`)."""
    heap_mmap_threshold_kib: int = Field(default=1024, ge=0)
    """glibc's mmap threshold, fixed, for `slca learn`, `slca sft` and the training benches (slca/heap.py): tensors
    above it are mapped and unmapped on their own, so freed step memory returns to the system instead of
    fragmenting the heap. 0: glibc's dynamic threshold; `MALLOC_MMAP_THRESHOLD_` in the environment wins."""
    heap_trim_after_step: bool = True
    """After each step (and its publish and checkpoint), give the free pages of every malloc arena back to the system
    (slca/heap.py `trim`): the learner grew ≈ 460 MiB in 20 steps of the 45-minute soak (bench/soak/learning-45)."""
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    """auto: bf16 autocast on GPU and on CPUs with bf16 support, else fp32. Master weights stay fp32."""
    consumer_group: str = "learner"
    """Redis consumer group on the groups stream."""
    consumer_name: str | None = None
    """This learner's name in the consumer group; None: `learner-0`. Keep it stable: a restarted learner resumes the
    groups pending under its name. Under torchrun only rank 0 reads groups, under this same name (one consumer
    whatever the number of ranks, so a learner moved between one and N processes finds its own pending groups)."""
    claim_idle_ms: int = Field(default=600_000, ge=1)
    """XAUTOCLAIM groups pending on any consumer for longer than this (a learner that died, or ran under another
    name). A live learner keeps its own held groups fresh between reads, but not during a step: keep this above
    the longest step."""
    block_ms: int = 1000
    """XREADGROUP block time. Under torchrun rank 0 also tells the other ranks to keep waiting this often."""
    ddp_timeout_s: int = Field(default=120, ge=1)
    """Under torchrun: a collective (a step's gradient average, rank 0's orders) that does not complete in this many
    seconds fails, so the surviving ranks of a dead (or unreachable) one exit instead of hanging. The other ranks wait
    for rank 0 while it publishes and checkpoints: keep it above the longest publish + checkpoint."""
    ddp_allow_public_rendezvous: bool = False
    """Under torchrun: let the ranks meet at a MASTER_ADDR outside loopback and private networks (RFC 1918, IPv6
    unique-local, link-local). Off, such an address is refused at start: torch's rendezvous store authenticates no
    one and unpickles what it is sent (README "Learner ranks"). On only behind a firewall of your own."""
    max_steps: int = 0
    """Stop after this many optimizer steps in total (0: run forever)."""
    seed: int = 0
    """Random seed."""
    metrics_port: int = 0
    """Prometheus metrics port of `slca learn` (0: off)."""
    run_dir: str | None = None
    """Checkpoints and metrics log; None: `<common.data_dir>/learner`."""
    sft_lr: float = 5e-5
    """`slca sft` learning rate (docs/cpu-facts.md#warm-start: 5e-5, 10 warm-up steps, linear decay)."""
    sft_batch: int = 8
    """`slca sft` conversations per step."""
    sft_gradient_checkpointing: bool | Literal["auto"] = "auto"
    """`slca sft` recomputes each decoder layer's activations in the backward instead of keeping them: the warm start
    held ≈ 10 GiB at its peak (8 conversations of up to 1,536 tokens), most of it activations. Costs a second forward
    per step. Measured (`slca bench sft-memory --pairs 3 --steps 1`, bench/sft/checkpointing-avx2, avx2-only EPYC):
    peak 8,725 → 2,624 MiB, trained tokens/s 0.81× (0.78–0.84). `auto`: on when the machine has less memory available
    than `sft_checkpointing_below_mib` as `slca sft` starts (where the peak would not fit beside serve), off elsewhere
    (the warm start would take ≈ 1.2× as long before the first hour's first swap); true / false: always / never."""
    sft_checkpointing_below_mib: int = Field(default=12288, ge=0)
    """`sft_gradient_checkpointing=auto` turns checkpointing on below this much available memory (MemAvailable): the
    measured peak without it (8,725 MiB) and a margin for what else starts meanwhile."""
    sft_max_tokens: int = 1536
    """`slca sft` longest conversation in tokens; longer demonstrations are dropped. Everyday train demonstrations
    with their tool schemas: median 781, longest 1360 (at 1024, 73 of 393 were dropped, 50 of them among the 75
    offering six tools: the warm start then saw fewer tools than serving offers)."""
    train_group_size: int = 8
    """`slca train`: trajectories per group (the `n` of the agent API)."""
    train_temperature: float = 1.0
    """`slca train`: sampling temperature."""
    train_max_tokens: int = 128
    """`slca train`: max generated tokens per model turn."""

    MOVED_OUT: ClassVar[dict[str, str]] = {
        "keep_versions": "weights.keep_versions",
        "weights_bind": "weights.bind",
        "weights_url": "weights.url",
    }

    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, data):
        """A flat key of an earlier version is an error that names its new place (not a silent default)."""
        if isinstance(data, dict):
            moved = [f"learner.{k} is now learner.{MOVED[k]}" for k in data if k in MOVED]
            if isinstance(data.get("loss"), str):
                moved.append(f"learner.loss is a table now: set learner.loss.name={data['loss']}")
            if moved:
                raise ValueError("; ".join(moved))
        return data
