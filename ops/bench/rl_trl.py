"""TRL's side of `slca bench rl`: `GRPOTrainer` on the same model, prompts, group size and budget, for a fixed
wall time. Run as its own process (`python -m ops.bench.rl_trl SPEC.json OUT.json`) so that its memory and CPU
are measured apart from the parent's; TRL is the benchmark-only extra (`pip install -e .[bench]`).

Same task as slca's pipeline: the pack's train-split prompts rendered by slca's one prompt renderer (Hermes
tools in the system message), 1 prompt × G completions per step, ≤ max_new_tokens each, sampled at the feed's
temperature, rewarded with slca's HierR (`workers.scoring`) as `R = w_exec·r_exec + w_pref·r_pref`, at the
learner's learning rate and precision. Everything else is TRL's default (what a user of TRL gets).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class TrlSpec:
    model: str
    pack: str
    group_size: int
    max_new_tokens: int
    seconds: float
    lr: float
    bf16: bool
    temperature: float = 1.0
    seed: int = 0
    w_exec: float = 1.0
    w_pref: float = 1.0


@dataclass
class TrlCounts:
    """What the TRL process reports back (JSON)."""

    startup_s: float = 0.0
    seconds: float = 0.0
    steps: int = 0
    completions: int = 0
    generated_tokens: int = 0
    reward_sum: float = 0.0
    step_seconds: list[float] = field(default_factory=list)
    config: dict = field(default_factory=dict)


class HierRReward:
    """TRL reward function: each completion becomes a one-turn slca trajectory and gets HierR's scalar."""

    __name__ = "hierr"  # TRL names a reward function's metrics after it

    def __init__(self, tasks, tokenizer, spec: TrlSpec, counts: TrlCounts):
        from workers.settings import WorkerSettings

        self.tasks, self.tokenizer, self.spec, self.counts = tasks, tokenizer, spec, counts
        self.scoring = WorkerSettings()
        self.prompt_ids: dict[int, list[int]] = {}

    def __call__(self, prompts, completions, completion_ids, task_index, **_) -> list[float]:
        from learner.rollout_local import Sample, build_trajectory
        from slca.chat.messages import prompt_ids
        from workers.scoring import score_trajectory

        rewards = []
        for ids, i in zip(completion_ids, task_index):
            task = self.tasks[i]
            if i not in self.prompt_ids:
                self.prompt_ids[i] = prompt_ids(self.tokenizer, task.messages, task.tools)
            ids = list(ids) or [self.tokenizer.eos_token_id]  # an empty completion is still one (scored) turn
            # logprobs are not read by scoring; a trajectory requires one per generated token
            traj = build_trajectory(self.tokenizer, task.task_id, self.prompt_ids[i], Sample(ids, [0.0] * len(ids)),
                                    task.tools, 0, messages=task.messages, ground_truth=task.ground_truth)  # fmt: skip
            r = score_trajectory(traj, self.scoring).scalar(self.spec.w_exec, self.spec.w_pref)
            rewards.append(r)
            self.counts.completions += 1
            self.counts.generated_tokens += len(ids)
            self.counts.reward_sum += r
        return rewards


def make_deadline_callback(counts: TrlCounts, seconds: float, began: float):
    from transformers import TrainerCallback

    class Deadline(TrainerCallback):
        """Stops training at the first step end past `seconds` after training began; times each step."""

        def on_train_begin(self, args, state, control, **kw):
            counts.startup_s = time.monotonic() - began
            self.start = self.last = time.monotonic()

        def on_step_end(self, args, state, control, **kw):
            now = time.monotonic()
            counts.steps, counts.seconds = state.global_step, now - self.start
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
    from slca.chat.messages import render_prompt

    torch.manual_seed(spec.seed)
    tokenizer = AutoTokenizer.from_pretrained(spec.model)
    tasks = load_tasks(spec.pack, "train", seed=spec.seed)
    dataset = Dataset.from_list([{"prompt": render_prompt(tokenizer, t.messages, t.tools), "task_index": i}
                                 for i, t in enumerate(tasks)])  # fmt: skip
    counts = TrlCounts()
    with tempfile.TemporaryDirectory(prefix="slca-bench-trl-") as out:
        args = GRPOConfig(output_dir=out, per_device_train_batch_size=spec.group_size, num_generations=spec.group_size,
                          max_completion_length=spec.max_new_tokens, learning_rate=spec.lr, bf16=spec.bf16,
                          use_cpu=True, temperature=spec.temperature, seed=spec.seed, logging_steps=1,
                          report_to="none", save_strategy="no", max_steps=10**6, disable_tqdm=True)  # fmt: skip
        counts.config = {k: getattr(args, k) for k in ("per_device_train_batch_size", "num_generations",
                         "max_completion_length", "learning_rate", "bf16", "beta", "loss_type", "num_iterations",
                         "gradient_checkpointing", "temperature", "scale_rewards")}  # fmt: skip
        model = AutoModelForCausalLM.from_pretrained(spec.model, dtype=torch.float32)
        trainer = GRPOTrainer(model=model, reward_funcs=HierRReward(tasks, tokenizer, spec, counts), args=args,
                              train_dataset=dataset, processing_class=tokenizer,
                              callbacks=[make_deadline_callback(counts, spec.seconds, began)])  # fmt: skip
        trainer.train()
    return counts


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m ops.bench.rl_trl SPEC.json OUT.json", file=sys.stderr)
        return 2
    spec = TrlSpec(**json.loads(Path(argv[0]).read_text()))
    counts = run(spec)
    Path(argv[1]).write_text(json.dumps(counts.__dict__))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
