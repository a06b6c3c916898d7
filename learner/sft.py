"""`slca sft`: supervised warm start on task-pack demonstrations (docs/cpu-facts.md#warm-start: full FT, bf16
autocast where the CPU has native bf16, lr 5e-5, linear warm-up then decay; the raw SmolLM2 never emits a tool
call, so RL needs this).

Plan: encode the demonstrations (loaded by the caller, `ops.experiments.warmstart`) → measure the parseable-call share
on held-out tasks → train within the time/step budget → measure again → save atomically to `--out`. Batches are
length-grouped under a token budget (`sft_batching`), the loss and logits are on assistant tokens only (`sft_step`),
and the lr follows the spent fraction of the real budget (`sft_schedule`)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Callable

import torch

from learner.sft_batching import collate_right_padded, default_batch_tokens, grouped_batches
from learner.sft_data import Demonstration, Example, build_examples
from learner.sft_schedule import Budget, lr_at
from learner.sft_step import make_optimizer, sft_update
from learner.settings import LearnerSettings
from slca.contracts import Task
from slca.heap import available_memory_mib, own_memory_mib

_DTYPE_OF_SETTING = {"auto": "auto", "fp32": "float32", "bf16": "bfloat16"}


def sft_precision(settings: LearnerSettings, device: str):
    """learner.precision → `slca.models.precision.choose_precision` ('auto': bf16 on CUDA or a CPU with native
    bf16, else fp32: emulated bf16 is slower than fp32)."""
    from slca.models.precision import choose_precision

    return choose_precision(_DTYPE_OF_SETTING[settings.precision], cuda=device == "cuda")


def _clock(seconds: float | None) -> str:
    return "-" if seconds is None else f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def train_sft(
    model,
    examples: list[Example],
    settings: LearnerSettings,
    budget: Budget,
    seed: int,
    autocast: bool,
    pad_id: int,
    batch_tokens: int,
    on_step: Callable[[int, float, float, float | None], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> list[dict]:
    """Train until the budget is spent; one history row per step. The progress bar shows the spent share of
    the budget, the loss, the lr and the time left; `on_step(step, loss, spent share, seconds left)` hears the
    same after every step (`slca up`'s warm start reports its progress with it). `should_stop`: `sft_update`'s
    (a stop cuts a step short at the next decoder layer: StepInterrupted)."""
    from tqdm import tqdm

    if not (budget.steps or budget.seconds):
        raise ValueError("an sft budget needs steps or seconds")
    batches = grouped_batches([len(e.input_ids) for e in examples], batch_tokens, seed)
    opt = make_optimizer(model, settings.sft_lr)
    model.train()
    history: list[dict] = []
    bar = tqdm(
        total=100, desc="sft", dynamic_ncols=True, bar_format="{desc} {percentage:3.0f}%|{bar}| {elapsed}{postfix}"
    )
    t_start, step, elapsed, tokens = time.monotonic(), 0, 0.0, 0
    while not budget.done(step, elapsed):
        chosen = [examples[i] for i in next(batches)]
        batch = collate_right_padded(chosen, pad_id)
        lr = lr_at(step, budget.progress(step, elapsed), settings.sft_lr)
        result = sft_update(model, opt, batch, lr, autocast, should_stop)
        step += 1
        elapsed = time.monotonic() - t_start
        tokens += batch.real_tokens
        history.append(
            {
                "step": step,
                "loss": result.loss,
                "lr": lr,
                "examples": len(chosen),
                "tokens": batch.real_tokens,
                "padding": round(batch.padding_share, 4),
                "elapsed_s": elapsed,
            }
        )
        bar.n = round(100 * budget.progress(step, elapsed), 1)
        if on_step is not None:
            on_step(step, result.loss, budget.progress(step, elapsed), budget.seconds_left(step, elapsed))
        bar.set_postfix_str(
            f"step {step} loss {result.loss:.3f} lr {lr:.1e} {tokens / elapsed:.0f} tok/s "
            f"left {_clock(budget.seconds_left(step, elapsed))}"
        )
    bar.close()
    return history


@torch.no_grad()
def parseable_call_share(model, tokenizer, tasks, max_new: int = 80, batch: int = 8) -> float:
    """Share of held-out tasks needing a tool whose first reply (greedy) holds ≥1 call, all parseable and
    naming offered tools (`slca.chat.hermes.parse_tool_calls`)."""
    from slca.chat.hermes import function_of, parse_tool_calls
    from slca.chat.messages import prompt_ids
    from slca.models.generate import greedy_texts

    model.eval()
    tasks = [t for t in tasks if t.ground_truth.tool_needed]
    good = 0
    for k in range(0, len(tasks), batch):
        chunk = tasks[k : k + batch]
        texts = greedy_texts(model, tokenizer, [prompt_ids(tokenizer, t.messages, t.tools) for t in chunk], max_new)
        for task, text in zip(chunk, texts):
            calls = parse_tool_calls(text, {function_of(t).get("name") for t in task.tools})
            good += bool(calls) and all(c.valid for c in calls)
    model.train()
    return good / max(1, len(tasks))


def save_model(model, tokenizer, source: Path, out: Path) -> None:
    """Atomic: a temp dir next to `out`, then rename (a previous `out` is replaced only once complete)."""
    from slca.atomic import commit_dir, temp_dir_next_to

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


def resolve_source(name: str, common) -> Path:
    from slca.models.paths import find_model_dir

    return find_model_dir(name, common.cache_dir)


def demonstration_examples(tokenizer, demos: list[Demonstration], max_tokens: int) -> list[Example]:
    """The demonstrations encoded, those of at most `max_tokens` (a CLI error when none fits)."""
    from slca.cli import CliError

    examples = build_examples(tokenizer, demos, max_tokens)
    if not examples:
        raise CliError(f"no demonstration fits in learner.sft_max_tokens={max_tokens}")
    return examples


def load_model(source: Path, device: str):
    """fp32 master weights (autocast, when chosen, computes in bf16); SDPA attention."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(source), dtype=torch.float32, attn_implementation="sdpa").to(device)


def pad_id_of(tokenizer) -> int:
    """Any id will do (right padding is never attended to); the tokenizer's pad id when it has one."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)


def history_summary(history: list[dict]) -> dict:
    """Steps, first and last loss, training seconds and trained tokens per second of `train_sft`'s history."""
    train_s = history[-1]["elapsed_s"] if history else 0.0
    tokens = sum(h["tokens"] for h in history)
    return {
        "steps": len(history),
        "first_loss": history[0]["loss"] if history else None,
        "last_loss": history[-1]["loss"] if history else None,
        "train_s": train_s,
        "tokens_per_s": tokens / train_s if train_s else None,
    }


def _budget(args) -> Budget:
    """The training budget `slca sft`'s flags give (CliError without steps or minutes)."""
    from slca.cli import CliError

    min_steps = max(0, getattr(args, "min_steps", 0) or 0)
    budget = Budget(steps=max(0, args.steps), seconds=max(0.0, args.minutes) * 60, min_steps=min_steps)
    if not (budget.steps or budget.seconds):
        raise CliError("nothing to do: give --steps or --minutes")
    return budget


def gradient_checkpointing_on(settings: LearnerSettings, available_mib: float | None) -> tuple[bool, str]:
    """(whether `slca sft` trains with gradient checkpointing, why): `learner.sft_gradient_checkpointing` when it
    is true or false; `auto`: on when less than `learner.sft_checkpointing_below_mib` is available (the peak
    without it would not fit), off where the kernel does not say."""
    choice = settings.sft_gradient_checkpointing
    if choice != "auto":
        return bool(choice), f"learner.sft_gradient_checkpointing={str(choice).lower()}"
    bound = settings.sft_checkpointing_below_mib
    if available_mib is None:
        return False, "auto: the memory available is unknown"
    relation = "<" if available_mib < bound else "≥"
    return available_mib < bound, f"auto: {available_mib:,.0f} MiB available {relation} {bound:,} MiB"


def run_sft(
    args,
    config,
    demos: list[Demonstration],
    held_out: list[Task],
    on_step=None,
    on_phase: Callable[[str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> int:
    """`slca sft` once its caller (`ops.experiments.warmstart.cli`) has loaded the train demonstrations and the held-out
    tasks of the pack: the learner imports no other component. `on_step`: `train_sft`'s. `on_phase(name)` hears
    each stage outside training as it begins — 'checking' (the before- and after-checks, only with held-out tasks:
    greedy generation, minutes on 2 cores) and 'saving' — so that a watcher (`slca up`'s warm start) can tell which
    one the time goes to. `should_stop`: `train_sft`'s."""
    from transformers import AutoTokenizer

    from slca.models.paths import models_dir

    phase = on_phase or (lambda name: None)

    settings = config.get(LearnerSettings)
    common = config.common
    source = resolve_source(args.model or common.model, common)
    out = Path(args.out) if args.out else models_dir(Path(common.cache_dir)) / f"{source.name}-sft"
    budget = _budget(args)
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    examples = demonstration_examples(tokenizer, demos, settings.sft_max_tokens)
    n_demos = len(demos)
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = load_model(source, device)
    precision = sft_precision(settings, device)
    batch_tokens = args.batch_tokens or default_batch_tokens([len(e.input_ids) for e in examples], settings.sft_batch)
    print(precision.describe("sft precision"))
    print(
        f"sft: {len(examples)}/{n_demos} demonstrations ≤ {settings.sft_max_tokens} tokens, {len(held_out)} held-out "
        f"tasks, lr {settings.sft_lr}, length-grouped batches of ≤ {batch_tokens} padded tokens "
        f"(≈ {settings.sft_batch} conversations)"
    )
    if held_out:
        phase("checking")
    before = parseable_call_share(model, tokenizer, held_out) if held_out else None
    checkpointing, why = gradient_checkpointing_on(settings, available_memory_mib())
    print(f"sft gradient checkpointing: {'on' if checkpointing else 'off'} ({why})")
    if checkpointing:
        model.gradient_checkpointing_enable()  # training only: the checks generate with the cache as before
    history = train_sft(
        model,
        examples,
        settings,
        budget,
        args.seed,
        precision.dtype == "bfloat16",
        pad_id_of(tokenizer),
        batch_tokens,
        on_step,
        should_stop,
    )
    if checkpointing:
        model.gradient_checkpointing_disable()
    if held_out:
        phase("checking")
    after = parseable_call_share(model, tokenizer, held_out) if held_out else None
    phase("saving")
    save_model(model, tokenizer, source, out)
    summary = {
        **history_summary(history),
        "peak_rss_mib": round(own_memory_mib("VmHWM"), 1),  # this process's peak: loading, training, saving
        "batch_tokens": batch_tokens,
        "precision": precision.dtype,
        "gradient_checkpointing": checkpointing,
        "gradient_checkpointing_why": why,
        "parseable_before": before,
        "parseable_after": after,
        "held_out": len(held_out),
        "out": str(out),
    }
    (out / "sft-summary.json").write_text(json.dumps({**summary, "history": history}, indent=1))
    print(json.dumps(summary))
    return 0
