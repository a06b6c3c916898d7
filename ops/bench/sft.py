"""`slca bench sft`: the warm-start loop as it was vs as it is, side by side in one process, by the shared
method of `ops.bench.ab` (alternated windows, warm-up alike, ratio per pair; issue 22).

old: a fixed batch of `learner.sft_batch` conversations padded to the longest, with an attention mask,
     loss from `model(labels=...)` (logits over every position), plain AdamW — kept here verbatim as the
     baseline (`collate_padded`, `fixed_batches`, `padded_update`).
new: `slca sft` today — length-grouped batches under a token budget, right-padded without a mask, logits on
     assistant tokens only, fused AdamW (`learner.sft_batching`, `learner.sft_step`).

Both loops go through ONE fixed list of examples (`--steps` × `learner.sft_batch` demonstrations drawn once
with `--seed`): old in consecutive fixed batches, new in the grouped batches of that same list (one plan, drawn
once) — so every window of either side trains on the same conversations and the same real tokens, and only the
time differs. Each side has its own model (loaded once from disk) and optimizer, kept across its windows. A
window is one pass over the list (≥ 10 old steps), repeated while shorter than `--seconds`. Warm-up: `--warmup`
untimed steps per side before the first pair. Reported per window: real (non-pad) tokens/s, padding share,
s/step; per pair new ÷ old tokens/s; the median ratio with its spread and interval; the model's NAME only."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator

import torch

from learner.sft_batching import collate_right_padded, default_batch_tokens, grouped_epoch
from learner.sft_data import IGNORE, Demonstration, Example
from learner.sft_step import make_optimizer, sft_update
from learner.settings import LearnerSettings
from ops.bench.ab import ABResult, Side, Wave, Window, WindowRule, alternate, waves, write
from ops.bench.ab import markdown as ab_markdown
from ops.bench.common import bench_command, model_name


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


MIN_STEPS = 10
"""Old-loop steps per window at least (the method: ≥ 10 steps per side)."""


def fixed_list(n_examples: int, steps: int, batch: int, seed: int) -> list[int]:
    """The one list of example indices both loops train on: `steps` × `batch` drawn without replacement
    (every example when there are fewer)."""
    rng = random.Random(seed)
    return rng.sample(range(n_examples), min(n_examples, steps * batch))


def old_plan(chosen: list[int], batch: int) -> list[list[int]]:
    """The old loop's batches over the list: consecutive fixed batches (a last short one is kept)."""
    return [chosen[i : i + batch] for i in range(0, len(chosen), batch)]


def new_plan(chosen: list[int], lengths: list[int], batch_tokens: int, seed: int) -> list[list[int]]:
    """The new loop's batches over the same list: one `grouped_epoch` of it, drawn once."""
    epoch = grouped_epoch([lengths[i] for i in chosen], batch_tokens, random.Random(seed))
    return [[chosen[j] for j in b] for b in epoch]


StepFn = Callable[[list[int]], tuple[int, int, int, float]]
"""One training step on these example indices → (real tokens, padded tokens, examples, loss)."""


def pass_wave(
    step: StepFn, plan: list[list[int]], clock: Callable[[], float] = time.perf_counter
) -> Callable[[], Wave]:
    """One wave = one pass over the plan; counts: steps, real/padded tokens, examples, last loss."""

    def wave() -> Wave:
        real = padded = examples = 0
        loss = None
        t0 = clock()
        for batch in plan:
            r, p, e, loss = step(batch)
            real, padded, examples = real + r, padded + p, examples + e
        seconds = clock() - t0
        return Wave(
            real,
            seconds,
            {
                "steps": len(plan),
                "real_tokens": real,
                "padded_tokens": padded,
                "examples": examples,
                "step_seconds": seconds,
            },
        )

    return wave


def warmup_steps(step: StepFn, plan: list[list[int]], n: int) -> Callable[[], None]:
    """`n` untimed steps on the plan's first batches (both sides get the same `n`)."""

    def warm() -> None:
        for i in range(n):
            step(plan[i % len(plan)])

    return warm


def loop_row(windows: list[Window]) -> dict:
    """One side's figures summed over its measured windows."""
    steps = sum(w.detail["steps"] for w in windows)
    seconds = sum(w.detail["step_seconds"] for w in windows)
    real = sum(w.detail["real_tokens"] for w in windows)
    padded = sum(w.detail["padded_tokens"] for w in windows)
    examples = sum(w.detail["examples"] for w in windows)
    return {
        "windows": len(windows),
        "steps": steps,
        "seconds": seconds,
        "real_tokens": real,
        "padded_tokens": padded,
        "examples": examples,
        "tokens_per_s": real / max(1e-9, seconds),
        "padding_share": 1 - real / max(1, padded),
        "s_per_step": seconds / max(1, steps),
        "examples_per_step": examples / max(1, steps),
        "tokens_per_s_by_window": [w.figure for w in windows],
    }


def old_step(model, examples: list[Example], settings: LearnerSettings, autocast: bool, pad_id: int) -> StepFn:
    opt = torch.optim.AdamW(model.parameters(), lr=settings.sft_lr, weight_decay=0.0)

    def step(indices: list[int]):
        batch = collate_padded([examples[i] for i in indices], pad_id)
        loss = padded_update(model, opt, batch, settings.sft_lr, autocast)
        return int(batch["attention_mask"].sum()), batch["input_ids"].numel(), batch["input_ids"].shape[0], loss

    return step


def new_step(model, examples: list[Example], settings: LearnerSettings, autocast: bool, pad_id: int) -> StepFn:
    opt = make_optimizer(model, settings.sft_lr)

    def step(indices: list[int]):
        chosen = [examples[i] for i in indices]
        batch = collate_right_padded(chosen, pad_id)
        result = sft_update(model, opt, batch, settings.sft_lr, autocast)
        return batch.real_tokens, batch.padded_tokens, len(chosen), result.loss

    return step


def _times(value: float | None, width: int) -> str:
    return f"{value:{width - 1}.2f}×" if value is not None else f"{'-':>{width}s}"


def table_lines(rows: dict[str, dict], ratio: dict[str, float | None]) -> list[str]:
    out = [f"{'loop':34s} {'steps':>5s} {'tokens/s':>9s} {'padding':>8s} {'s/step':>7s} {'examples/step':>13s}"]
    for label, r in rows.items():
        out.append(
            f"{label:34s} {r['steps']:5d} {r['tokens_per_s']:9.1f} {r['padding_share']:8.1%} "
            f"{r['s_per_step']:7.2f} {r['examples_per_step']:13.1f}"
        )
    out.append(
        f"{'new ÷ old':34s} {'':5s} {_times(ratio['tokens_per_s'], 9)} {_times(ratio['padding_share'], 8)} "
        f"{_times(ratio['s_per_step'], 7)} {_times(ratio['examples_per_step'], 13)}"
    )
    return out


def sft_report(result: ABResult, facts: dict) -> dict:
    """The JSON of `slca bench sft`: `facts` (command, model name, settings), the A/B result, per-loop sums;
    `ratio.tokens_per_s` is the median of the per-pair ratios, the other ratios are of the summed figures."""
    loops = {side: loop_row([w for w in result.windows if w.side == side]) for side in ("old", "new")}
    ratio = {
        k: loops["new"][k] / loops["old"][k] if loops["old"][k] else None
        for k in ("padding_share", "s_per_step", "examples_per_step")
    }
    ratio["tokens_per_s"] = result.summary()["median_ratio"]
    return {**facts, "method": "ops.bench.ab", "ab": result.to_dict(), "loops": loops, "ratio": ratio}


def run_sft_bench(args, config, demos: list[Demonstration]) -> int:
    """`slca bench sft` on demonstrations its caller (`ops.bench.cli`, from `ops.experiments.warmstart.data`) loaded."""
    import sys

    from transformers import AutoTokenizer

    from learner.sft import demonstration_examples, load_model, pad_id_of, resolve_source, sft_precision
    from slca.cli import CliError

    if args.steps < MIN_STEPS:
        raise CliError(f"--steps {args.steps}: at least {MIN_STEPS} old-loop steps per window")
    settings = config.get(LearnerSettings)
    source = resolve_source(args.model, config.common)
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    examples = demonstration_examples(tokenizer, demos, settings.sft_max_tokens)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    precision = sft_precision(settings, device)
    autocast, pad_id = precision.dtype == "bfloat16", pad_id_of(tokenizer)
    lengths = [len(e.input_ids) for e in examples]
    chosen = fixed_list(len(examples), args.steps, settings.sft_batch, args.seed)
    batch_tokens = args.batch_tokens or default_batch_tokens([lengths[i] for i in chosen], settings.sft_batch)
    plans = {"old": old_plan(chosen, settings.sft_batch), "new": new_plan(chosen, lengths, batch_tokens, args.seed)}
    print(
        precision.describe("sft precision") + f"; {torch.get_num_threads()} threads; {len(chosen)} of "
        f"{len(examples)} demonstrations, {sum(lengths[i] for i in chosen)} tokens per window; steps per window: "
        f"old {len(plans['old'])}, new {len(plans['new'])}",
        flush=True,
    )
    rule = WindowRule(min_waves=1, min_seconds=max(0.0, args.seconds))
    sides = {}
    for name, make in (("old", old_step), ("new", new_step)):
        torch.manual_seed(args.seed)
        model = load_model(source, device)
        model.train()
        step = make(model, examples, settings, autocast, pad_id)
        sides[name] = Side(
            name, waves(pass_wave(step, plans[name]), rule), warmup_steps(step, plans[name], args.warmup)
        )
    result = alternate(
        sides["old"],
        sides["new"],
        pairs=args.pairs,
        order=args.order,
        seed=args.seed,
        warmup=1,
        on_window=lambda w: print(f"pair {w.pair + 1} {w.side}: {w.figure:.1f} tokens/s", flush=True),
    )
    labels = {"old": f"old: fixed {settings.sft_batch}, padded", "new": f"new: grouped, ≤ {batch_tokens} tokens"}
    facts = {
        "command": bench_command("sft", sys.argv),
        "model": model_name(source),
        "precision": precision.dtype,
        "precision_reason": precision.reason,
        "threads": torch.get_num_threads(),
        "device": device,
        "demonstrations": len(chosen),
        "demonstrations_available": len(examples),
        "tokens_per_window": sum(lengths[i] for i in chosen),
        "batch": settings.sft_batch,
        "batch_tokens": batch_tokens,
        "steps_per_window": {k: len(v) for k, v in plans.items()},
        "min_seconds_per_window": rule.min_seconds,
        "warmup_steps": args.warmup,
        "seed": args.seed,
    }
    report = sft_report(result, facts)
    lines = table_lines({labels[k]: v for k, v in report["loops"].items()}, report["ratio"])
    md = ab_markdown(result, "tokens/s")
    print("\n".join(lines + [""] + md))
    if args.out:
        write(args.out, report, ["```", *lines, "```", "", *md], "slca bench sft")
    return 0
