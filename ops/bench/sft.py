"""`slca bench sft`: the warm-start loop as it was vs as it is, side by side in one process.

old: a fixed batch of `learner.sft_batch` random conversations padded to the longest, with an attention mask,
     loss from `model(labels=...)` (logits over every position), plain AdamW — kept here verbatim as the
     baseline (`collate_padded`, `fixed_batches`, `padded_update`).
new: `slca sft` today — length-grouped batches under a token budget, right-padded without a mask, logits on
     assistant tokens only, fused AdamW (`learner.sft_batching`, `learner.sft_step`).
Same model (reloaded from disk for each loop), same demonstrations, same precision, same steps or seconds
each, after the same untimed warm-up steps. Reported: real (non-pad) tokens/s, padding share, s/step,
and new ÷ old."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from learner.sft_batching import collate_right_padded, default_batch_tokens, grouped_batches
from learner.sft_data import IGNORE, Demonstration, Example
from learner.sft_schedule import Budget
from learner.sft_step import make_optimizer, sft_update
from learner.settings import LearnerSettings


def collate_padded(batch: list[Example], pad_id: int) -> dict[str, torch.Tensor]:
    """The old collate: pad to the longest, with an attention mask."""
    width = max(len(e.input_ids) for e in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, e in enumerate(batch):
        ids[i, : len(e.input_ids)] = torch.tensor(e.input_ids)
        labels[i, : len(e.labels)] = torch.tensor(e.labels)
        mask[i, : len(e.input_ids)] = 1
    return {"input_ids": ids, "labels": labels, "attention_mask": mask}


def fixed_batches(n: int, batch: int, seed: int) -> Iterator[list[int]]:
    """The old order: a reshuffled epoch popped `batch` at a time."""
    rng, order = random.Random(seed), []
    while True:
        if len(order) < batch:
            order += rng.sample(range(n), n)
        yield [order.pop() for _ in range(batch)]


def padded_update(model, opt, batch: dict[str, torch.Tensor], lr: float, autocast: bool) -> float:
    """The old step: HF loss over the full (B, T, V) logits."""
    for group in opt.param_groups:
        group["lr"] = lr
    device = model.device
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
        loss = model(**{k: v.to(device) for k, v in batch.items()}).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss.detach())


@dataclass
class LoopStats:
    steps: int = 0
    seconds: float = 0.0
    real_tokens: int = 0
    padded_tokens: int = 0
    examples: int = 0
    first_loss: float | None = None
    last_loss: float | None = None

    def row(self) -> dict:
        return {**asdict(self), "tokens_per_s": self.real_tokens / max(1e-9, self.seconds),
                "padding_share": 1 - self.real_tokens / max(1, self.padded_tokens),
                "s_per_step": self.seconds / max(1, self.steps), "examples_per_step": self.examples / max(1, self.steps)}  # fmt: skip


StepFn = Callable[[], tuple[int, int, int, float]]
"""One training step → (real tokens, padded tokens, examples, loss)."""


def time_loop(step: StepFn, budget: Budget, warmup: int) -> LoopStats:
    for _ in range(warmup):  # untimed: allocator and kernel set-up
        step()
    stats, t0 = LoopStats(), time.perf_counter()
    while not budget.done(stats.steps, stats.seconds):
        real, padded, examples, loss = step()
        stats.steps += 1
        stats.seconds = time.perf_counter() - t0
        stats.real_tokens += real
        stats.padded_tokens += padded
        stats.examples += examples
        stats.first_loss = loss if stats.first_loss is None else stats.first_loss
        stats.last_loss = loss
    return stats


def old_step(model, examples: list[Example], settings: LearnerSettings, seed: int, autocast: bool,
             pad_id: int) -> StepFn:
    opt = torch.optim.AdamW(model.parameters(), lr=settings.sft_lr, weight_decay=0.0)
    order = fixed_batches(len(examples), settings.sft_batch, seed)

    def step():
        batch = collate_padded([examples[i] for i in next(order)], pad_id)
        loss = padded_update(model, opt, batch, settings.sft_lr, autocast)
        return int(batch["attention_mask"].sum()), batch["input_ids"].numel(), batch["input_ids"].shape[0], loss

    return step


def new_step(model, examples: list[Example], settings: LearnerSettings, seed: int, autocast: bool, pad_id: int,
             batch_tokens: int) -> StepFn:  # fmt: skip
    opt = make_optimizer(model, settings.sft_lr)
    order = grouped_batches([len(e.input_ids) for e in examples], batch_tokens, seed)

    def step():
        chosen = [examples[i] for i in next(order)]
        batch = collate_right_padded(chosen, pad_id)
        result = sft_update(model, opt, batch, settings.sft_lr, autocast)
        return batch.real_tokens, batch.padded_tokens, len(chosen), result.loss

    return step


def _times(value: float | None, width: int) -> str:
    return f"{value:{width - 1}.2f}×" if value is not None else f"{'-':>{width}s}"


def print_table(rows: dict[str, dict], ratio: dict[str, float | None]) -> None:
    print(f"{'loop':34s} {'steps':>5s} {'tokens/s':>9s} {'padding':>8s} {'s/step':>7s} {'examples/step':>13s}")
    for label, r in rows.items():
        print(f"{label:34s} {r['steps']:5d} {r['tokens_per_s']:9.1f} {r['padding_share']:8.1%} {r['s_per_step']:7.2f} "
              f"{r['examples_per_step']:13.1f}")  # fmt: skip
    print(f"{'new ÷ old':34s} {'':5s} {_times(ratio['tokens_per_s'], 9)} {_times(ratio['padding_share'], 8)} "
          f"{_times(ratio['s_per_step'], 7)} {_times(ratio['examples_per_step'], 13)}")  # fmt: skip


def run_sft_bench(args, config, demos: list[Demonstration]) -> int:
    """`slca bench sft` on demonstrations its caller (`ops.bench.cli`, from `ops.warmstart.data`) loaded."""
    from transformers import AutoTokenizer

    from learner.sft import demonstration_examples, load_model, pad_id_of, resolve_source, sft_precision

    settings = config.get(LearnerSettings)
    source = resolve_source(args.model, config.common)
    budget = Budget(steps=max(0, args.steps), seconds=0.0 if args.steps else max(1.0, args.seconds))
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    examples = demonstration_examples(tokenizer, demos, settings.sft_max_tokens)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    precision = sft_precision(settings, device)
    autocast, pad_id = precision.dtype == "bfloat16", pad_id_of(tokenizer)
    batch_tokens = args.batch_tokens or default_batch_tokens([len(e.input_ids) for e in examples], settings.sft_batch)
    print(precision.describe("sft precision") + f"; {torch.get_num_threads()} threads; {len(examples)} demonstrations")
    labels = {"old": f"old: fixed {settings.sft_batch}, padded", "new": f"new: grouped, ≤ {batch_tokens} tokens"}
    makers = {"old": lambda m: old_step(m, examples, settings, args.seed, autocast, pad_id),
              "new": lambda m: new_step(m, examples, settings, args.seed, autocast, pad_id, batch_tokens)}  # fmt: skip
    loops = {}
    for name, make in makers.items():
        torch.manual_seed(args.seed)
        model = load_model(source, device)
        model.train()
        loops[name] = time_loop(make(model), budget, args.warmup).row()
        del model
    ratio = {k: loops["new"][k] / loops["old"][k] if loops["old"][k] else None
             for k in ("tokens_per_s", "padding_share", "s_per_step", "examples_per_step")}  # fmt: skip
    print_table({labels[k]: v for k, v in loops.items()}, ratio)
    report = {"model": str(source), "precision": precision.dtype, "precision_reason": precision.reason,
              "threads": torch.get_num_threads(), "device": device, "demonstrations": len(examples),
              "batch": settings.sft_batch, "batch_tokens": batch_tokens, "budget": asdict(budget),
              "warmup": args.warmup, "loops": loops, "ratio": ratio}  # fmt: skip
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1))
    return 0
