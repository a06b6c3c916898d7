"""`slca sft`: supervised warm start on task-pack demonstrations (FINDINGS: full FT, bf16 autocast, lr 5e-5,
10 warm-up steps, linear decay; the raw SmolLM2 never emits a tool call, so RL needs this first).

Plan: load demonstrations → measure the parseable-call share on held-out tasks → train within the time/step
budget → measure again → save atomically to `--out`."""

from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path

import torch

from learner.sft_data import IGNORE, Example, build_examples, load_demonstrations
from learner.settings import LearnerSettings

WARMUP_STEPS = 10
ASSUMED_STEPS_PER_MINUTE = 5.0
"""For the linear-decay horizon when only --minutes is given (FINDINGS: 5 steps/min at batch 8, bf16)."""


def collate(batch: list[Example], pad_id: int) -> dict[str, torch.Tensor]:
    width = max(len(e.input_ids) for e in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, e in enumerate(batch):
        ids[i, : len(e.input_ids)] = torch.tensor(e.input_ids)
        labels[i, : len(e.labels)] = torch.tensor(e.labels)
        mask[i, : len(e.input_ids)] = 1
    return {"input_ids": ids, "labels": labels, "attention_mask": mask}


def lr_at(step: int, horizon: int, base: float) -> float:
    """Linear warm-up (10 steps, or a fifth of a short run) then linear decay to 5% at `horizon`."""
    warmup = max(1, min(WARMUP_STEPS, horizon // 5))
    if step < warmup:
        return base * (step + 1) / warmup
    return base * max(0.05, 1 - (step - warmup) / max(1, horizon - warmup))


def train_sft(model, examples: list[Example], settings: LearnerSettings, minutes: float, steps: int, seed: int,
              autocast: bool, pad_id: int, log=print) -> list[dict]:  # fmt: skip
    from tqdm import tqdm

    rng = random.Random(seed)
    horizon = steps or max(WARMUP_STEPS + 1, int(minutes * ASSUMED_STEPS_PER_MINUTE))
    opt = torch.optim.AdamW(model.parameters(), lr=settings.sft_lr, weight_decay=0.0)
    model.train()
    deadline = time.monotonic() + minutes * 60 if minutes else float("inf")
    history, order, step = [], [], 0
    bar = tqdm(total=steps or None, desc="sft", unit="step", dynamic_ncols=True)
    t_start = time.monotonic()
    while (not steps or step < steps) and time.monotonic() < deadline:
        if len(order) < settings.sft_batch:
            order += rng.sample(range(len(examples)), len(examples))
        batch = collate([examples[order.pop()] for _ in range(settings.sft_batch)], pad_id)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, horizon, settings.sft_lr)
        with torch.autocast("cpu" if not torch.cuda.is_available() else "cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = model(**{k: v.to(model.device) for k, v in batch.items()}).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        elapsed = time.monotonic() - t_start
        if step == 1 and not steps and minutes:  # decay over the steps the budget actually allows
            horizon = max(2, int(minutes * 60 / elapsed))
            bar.total = horizon
        history.append({"step": step, "loss": float(loss.detach()), "elapsed_s": elapsed})
        bar.update(1)
        left = (deadline - time.monotonic()) if minutes else None
        bar.set_postfix(loss=f"{float(loss.detach()):.3f}", left=f"{left / 60:.1f}min" if left is not None else "-")
    bar.close()
    return history


@torch.no_grad()
def parseable_call_share(model, tokenizer, tasks, max_new: int = 80, batch: int = 8) -> float:
    """Share of held-out tasks needing a tool whose first reply (greedy) holds ≥1 call, all parseable and
    naming offered tools (`slca.chat.hermes.parse_tool_calls`)."""
    from learner.rollout_local import prompt_ids
    from slca.chat.hermes import function_of, parse_tool_calls

    model.eval()
    tasks = [t for t in tasks if t.ground_truth.tool_needed]
    good = 0
    tokenizer.padding_side = "left"
    for k in range(0, len(tasks), batch):
        chunk = tasks[k : k + batch]
        prompts = [prompt_ids(tokenizer, t.messages, t.tools) for t in chunk]
        width = max(map(len, prompts))
        ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        out = model.generate(input_ids=ids.to(model.device), attention_mask=mask.to(model.device), max_new_tokens=max_new,
                             do_sample=False, pad_token_id=tokenizer.pad_token_id)  # fmt: skip
        for task, row in zip(chunk, out[:, width:]):
            text = tokenizer.decode(row, skip_special_tokens=True)
            calls = parse_tool_calls(text, {function_of(t).get("name") for t in task.tools})
            good += bool(calls) and all(c.valid for c in calls)
    model.train()
    return good / max(1, len(tasks))


def save_model(model, tokenizer, source: Path, out: Path) -> None:
    """Atomic: a temp dir next to `out`, then rename (a previous `out` is replaced only once complete)."""
    from learner.atomic import commit_dir, temp_dir_next_to

    tmp = temp_dir_next_to(out)
    model.save_pretrained(str(tmp), safe_serialization=True)
    tokenizer.save_pretrained(str(tmp))
    for name in ("chat_template.jinja",):
        if (source / name).is_file() and not (tmp / name).exists():
            shutil.copy2(source / name, tmp / name)
    if out.exists():
        old = out.with_name(out.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
        commit_dir(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        commit_dir(tmp, out)


def run_sft_cli(args, config) -> int:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from learner.model import cpu_has_bf16
    from slca.cli import CliError
    from slca.models.paths import models_dir, resolve_model

    settings = config.get(LearnerSettings)
    common = config.common
    source = resolve_model(args.model or common.model, Path(common.cache_dir))
    if not (source / "config.json").is_file():
        raise CliError(f"model not found: {source} (run `slca model fetch`)")
    out = Path(args.out) if args.out else models_dir(Path(common.cache_dir)) / f"{source.name}-sft"
    try:
        train_demos = load_demonstrations(args.pack, "train", args.seed)
        from sim.tasks import load_tasks

        held_out = load_tasks(args.pack, "test", args.seed)[: args.eval_tasks]
    except (ImportError, ValueError) as exc:
        raise CliError(f"cannot load task pack {args.pack!r}: {exc}") from None
    torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(str(source), dtype=torch.float32).to(device)
    examples = build_examples(tokenizer, train_demos, settings.sft_max_tokens)
    if not examples:
        raise CliError(f"no demonstration fits in learner.sft_max_tokens={settings.sft_max_tokens}")
    autocast = settings.precision == "bf16" or (settings.precision == "auto" and (device == "cuda" or cpu_has_bf16()))
    print(f"sft: {len(examples)}/{len(train_demos)} demonstrations ≤ {settings.sft_max_tokens} tokens, "
          f"{len(held_out)} held-out tasks, bf16 autocast {autocast}, lr {settings.sft_lr}, batch {settings.sft_batch}")  # fmt: skip
    before = parseable_call_share(model, tokenizer, held_out) if held_out else None
    history = train_sft(model, examples, settings, args.minutes, args.steps, args.seed, autocast, tokenizer.pad_token_id)
    after = parseable_call_share(model, tokenizer, held_out) if held_out else None
    save_model(model, tokenizer, source, out)
    summary = {"steps": len(history), "first_loss": history[0]["loss"] if history else None,
               "last_loss": history[-1]["loss"] if history else None, "train_s": history[-1]["elapsed_s"] if history else 0,
               "parseable_before": before, "parseable_after": after, "held_out": len(held_out), "out": str(out)}  # fmt: skip
    (out / "sft-summary.json").write_text(json.dumps({**summary, "history": history}, indent=1))
    print(json.dumps(summary))
    return 0
