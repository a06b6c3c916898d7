"""GPU check: the hf engine and the learner on CUDA, in one command, without Redis, Celery or vLLM.

    python -m ops.bench.gpu_check --model DIR --out DIR [--model DIR2] [--device auto|cuda|cpu]
    slca bench gpu-check --model DIR --out DIR

Python packages imported beyond torch and transformers (and what they import themselves):
    pydantic, with pydantic-core, annotated-types, typing-inspection and typing-extensions (≥ 4.16 for pydantic
        2.14): slca's settings and contracts
    redis: imported, never connected, by the `slca.weights` package the engine's swap path loads through (its
        optional cryptography and opentelemetry are not needed)
    msgpack: slca.contracts.wire
    xgrammar (optional; it brings tiktoken, apache-tvm-ffi, triton): part d; without it part d is skipped
Not imported: celery, vllm, jsonschema, aiohttp, prometheus_client (`tests/ops/bench/test_gpu_check.py` checks).

For each model (`--model`, repeatable; DIR, or 'tiny'/'embedded' from the cache), each part recording its own
failure so that the others still run:
a. engine: the real hf engine (serve/engines/hf.py) on the device in its resolved dtype (bfloat16 on CUDA) beside
   the same engine on the CPU in float32, in one asyncio loop: greedy completions of fixed prompts compared token by
   token (the share of tokens before each prompt's first divergence, and where it is: bf16 may diverge, which is
   reported, not failed), the model and every tensor of a step on the device, a seeded sample drawn twice alike on
   the device, and tokens/s of a batch on the device ÷ on the CPU in alternated windows (ops/bench/ab.py).
b. swap: weights written as the learner publishes them (`slca.weights.write_version`, one tensor scaled) swapped
   in through the engine's swap path: the answers change and carry the new version; a swap back to the original
   weights gives the original greedy output exactly.
c. learner: the learner's own loading, packing, forward, loss and AdamW step (`learner.model.load_policy`,
   `learner.trainer.Trainer`) on the device (bf16 autocast over fp32 weights on CUDA) on a synthetic segment-tagged
   group: the token logprobs of its forward against the CPU fp32 ones (max and mean |Δ| within `--lp-*-tol`), a
   few steps with a finite loss that change the weights, and the step time.
d. grammar: a forced grammar ("yes" or "no") through the engine's grammar path, masked on the device.

Without CUDA (`--device cpu`, or 'auto' on a machine without a GPU) every part runs on the CPU as a smoke test of
this script and is reported as skipped. Writes results.json and results.md (the verdict first) under --out; exit
0 when every part passed (or, without CUDA, every smoke run did), else 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

PROMPTS = (
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "List three prime numbers greater than ten.",
    "Explain in one sentence what a hash table is.",
    "Translate 'good morning' into Spanish.",
    "What does HTTP stand for?",
)
GRAMMAR = 'root ::= "yes" | "no"'
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Part:
    """One part's outcome: 'pass', 'fail' (a check failed), 'error' (an exception), or 'skipped'."""

    status: str = "pass"
    checks: list[dict] = field(default_factory=list)
    figures: dict = field(default_factory=dict)
    error: str | None = None
    note: str | None = None

    def check(self, name: str, ok: bool, detail: object = "") -> bool:
        self.checks.append({"check": name, "ok": bool(ok), "detail": detail})
        if not ok and self.status == "pass":
            self.status = "fail"
        return bool(ok)

    def failed(self, exc: BaseException) -> None:
        self.status = "error"
        self.error = _no_paths("".join(traceback.format_exception(exc, limit=-8)))


@dataclass(frozen=True)
class Target:
    """The device under check: 'cuda', or 'cpu' for the smoke run (then every part is reported as skipped)."""

    device: str

    @property
    def smoke(self) -> bool:
        return self.device != "cuda"


def _no_paths(text: str) -> str:
    """Tracebacks without this machine's paths (results name no directories)."""
    for root, short in ((str(REPO), "."), (sys.prefix, "<env>"), (str(Path.home()), "~")):
        text = text.replace(root, short)
    return text


def _finished(part: Part, target: Target) -> Part:
    if target.smoke and part.status == "pass":
        part.status, part.note = "skipped", "no CUDA: ran on the CPU as a smoke test, which passed"
    return part


async def _part(name: str, target: Target, run, *args) -> tuple[str, Part]:
    """`run(part, *args)` (a coroutine function) recorded in a Part of its own: its exception stays in it."""
    part = Part()
    t0 = time.perf_counter()
    try:
        await run(part, *args)
    except Exception as exc:  # every part reports what it can; the others still run
        part.failed(exc)
    part.figures["seconds"] = round(time.perf_counter() - t0, 2)
    print(f"  {name}: {part.status} ({part.figures['seconds']} s)", flush=True)
    return name, _finished(part, target)


# --- the engine, on the device and on the CPU ---------------------------------------------------------------------
def _serve_settings(device: str, args):
    from serve.settings import ServeSettings

    return ServeSettings(engine="hf", hf_device=device, max_model_len=2048, torch_threads=args.threads)


def _prompt_ids(tokenizer) -> list[list[int]]:
    """The fixed prompts as a user turn of the model's chat template (plain text where it has none)."""
    out = []
    for text in PROMPTS:
        if getattr(tokenizer, "chat_template", None):
            messages = [{"role": "user", "content": text}]
            text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        out.append(tokenizer(text, add_special_tokens=False)["input_ids"])
    return out


async def _together(engine, prompts: list[list[int]], params) -> list:
    from serve.engines.base import generate

    return list(await asyncio.gather(*(generate(engine, p, params) for p in prompts)))


def _agreement(ref: list, got: list) -> dict:
    """Greedy outputs compared token by token: each prompt's first divergence (None: identical), the share of tokens
    before it, and |Δ logprob| of the tokens both drew alike (the CPU's float32 is the reference)."""
    firsts, same_tokens, tokens, diffs = [], 0, 0, []
    for r, g in zip(ref, got):
        n = next((i for i, (a, b) in enumerate(zip(r.token_ids, g.token_ids)) if a != b), None)
        if n is None and len(r.token_ids) != len(g.token_ids):
            n = min(len(r.token_ids), len(g.token_ids))
        firsts.append(n)
        same = len(r.token_ids) if n is None else n
        same_tokens, tokens = same_tokens + same, tokens + max(len(r.token_ids), len(g.token_ids))
        diffs += [abs(a - b) for a, b in zip(r.logprobs[:same], g.logprobs[:same])]
    return {
        "token_agreement": round(same_tokens / tokens, 4) if tokens else None,
        "identical_prompts": sum(n is None for n in firsts),
        "prompts": len(firsts),
        "first_divergence": firsts,
        "logprob_abs_diff_max": max(diffs, default=0.0),
        "logprob_abs_diff_mean": statistics.fmean(diffs) if diffs else 0.0,
    }


def _placed(part: Part, engine, target: Target) -> None:
    params = list(engine.model.parameters())
    devices = sorted({p.device.type for p in params})
    dtypes = sorted({str(p.dtype).removeprefix("torch.") for p in params})
    expected = engine.placement.precision.dtype
    part.figures.update(device=engine.device, dtype=expected, dtype_reason=engine.placement.precision.reason)
    part.check("model on the device", devices == [target.device], devices)
    part.check("model in the resolved dtype", dtypes == [expected], dtypes)
    if not target.smoke:
        part.check("bfloat16 on CUDA (hf_dtype auto)", expected == "bfloat16", expected)


def _recording_devices(engine) -> set[str]:
    """Wrap the engine's forward step: the devices of every tensor a step gets or makes (ids, mask, positions, the
    KV cache, the logits) are collected in the returned set."""
    seen: set[str] = set()
    forward = engine._forward

    def recorded(input_ids, mask, positions, cache):
        out = forward(input_ids, mask, positions, cache)
        layers = getattr(cache, "layers", [])
        kv = [layers[0].keys] if layers and getattr(layers[0], "keys", None) is not None else []
        seen.update(t.device.type for t in (input_ids, mask, positions, out[0], *kv))
        return out

    engine._forward = recorded
    return seen


async def part_engine(part: Part, cpu, dev, prompts: list[list[int]], target: Target, args) -> None:
    from serve.engines.base import SamplingParams

    _placed(part, dev, target)
    greedy = SamplingParams(temperature=0.0, max_tokens=args.tokens, seed=0)
    ref = await _together(cpu, prompts, greedy)
    seen = _recording_devices(dev)
    try:
        got = await _together(dev, prompts, greedy)
    finally:
        del dev._forward  # the class's own method again
    part.check("every tensor of a step on the device", seen == {target.device}, sorted(seen))
    part.check("greedy outputs complete", all(g.token_ids and g.finish_reason for g in got))
    part.check("logprobs finite and ≤ 0", all(math.isfinite(x) and x <= 0 for g in got for x in g.logprobs))
    part.figures["greedy_vs_cpu_fp32"] = _agreement(ref, got)
    sampled = SamplingParams(temperature=1.0, max_tokens=args.tokens, seed=1234)
    first, again = await _together(dev, prompts, sampled), await _together(dev, prompts, sampled)
    part.check(
        "a seeded sample draws the same tokens and logprobs again on the device",
        [(r.token_ids, r.logprobs) for r in first] == [(r.token_ids, r.logprobs) for r in again],
    )
    part.figures["throughput"] = await asyncio.to_thread(_throughput, asyncio.get_running_loop(), cpu, dev, args)


def _throughput(loop, cpu, dev, args) -> dict:
    """Generated tokens/s of one batch (`--batch` requests of the fixed prompts, greedy, `--batch-tokens` each): the
    CPU engine (A) and the device's (B), alternated windows of `--waves` batches (ops/bench/ab.py); ratio B ÷ A."""
    from ops.bench.ab import Side, Wave, WindowRule, alternate, waves
    from serve.engines.base import SamplingParams

    prompts = _prompt_ids(dev.tokenizer)
    batch = [prompts[i % len(prompts)] for i in range(args.batch)]
    params = SamplingParams(temperature=0.0, max_tokens=args.batch_tokens, seed=0)

    def side(name: str, engine) -> Side:
        def wave() -> Wave:
            t0 = time.perf_counter()
            results = asyncio.run_coroutine_threadsafe(_together(engine, batch, params), loop).result()
            if engine.device == "cuda":
                import torch

                torch.cuda.synchronize()
            return Wave(sum(len(r.token_ids) for r in results), time.perf_counter() - t0)

        return Side(name, waves(wave, WindowRule(min_waves=args.waves)))

    under_check = f"{dev.device} {dev.placement.precision.dtype}"
    result = alternate(side("cpu float32 (reference)", cpu), side(under_check, dev), args.pairs)
    summary = result.summary()
    return {
        "figure": "generated tokens/s of a batch",
        "batch": args.batch,
        "max_tokens": args.batch_tokens,
        "a": result.a,
        "b": result.b,
        **summary,
        "order": result.orders,
        "windows": [asdict(w) for w in result.windows],
    }


# --- b. hot swap on the device ---------------------------------------------------------------------------------
def _scaled_tensor(model) -> str:
    """The tensor a test version scales: the final norm's weight, which scales every logit (so every logprob moves,
    even on the tiny model's random weights, where a layer's matrix barely shows; greedy tokens stay), else the
    first matrix."""
    names = [n for n, _ in model.named_parameters()]
    final = [n for n in names if n.endswith("norm.weight") and ".layers." not in n]
    return final[-1] if final else next(n for n, p in model.named_parameters() if p.ndim == 2)


def _publish(model_dir: Path, weights_dir: Path, version: int, factor: float):
    """v`version` as the learner writes one (`write_version`: safetensors, tokenizer files, sha256 manifest), the
    model's weights with one tensor × `factor`; the `WeightVersion` an engine swaps in, and the tensor's name."""
    import torch
    from transformers import AutoModelForCausalLM

    from slca.weights import WeightVersion, write_version

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    name = _scaled_tensor(model)
    with torch.no_grad():
        dict(model.named_parameters())[name].mul_(factor)
    manifest = write_version(model, model_dir, weights_dir, version, 0, model_dir.name)
    return WeightVersion(manifest.path, version, manifest), name


async def part_swap(part: Part, dev, model_dir: Path, work: Path, target: Target, args) -> None:
    from serve.engines.base import SamplingParams

    prompts = _prompt_ids(dev.tokenizer)
    greedy = SamplingParams(temperature=0.0, max_tokens=args.tokens, seed=0)
    before = await _together(dev, prompts, greedy)
    scaled, name = await asyncio.to_thread(_publish, model_dir, work / "weights", dev.version + 1, args.swap_factor)
    part.figures.update(scaled_tensor=name, factor=args.swap_factor)
    part.figures["swap_seconds"] = [round(await dev.swap_weights(scaled), 3)]
    after = await _together(dev, prompts, greedy)
    part.check("answers carry the new version", all(set(r.versions) == {scaled.version} for r in after))
    changed = _agreement(before, after)
    first_lp = max(abs(a.logprobs[0] - b.logprobs[0]) for a, b in zip(before, after))
    part.figures.update(new_vs_old=changed, first_token_logprob_change_max=first_lp)
    part.check(
        "the new weights answer (tokens or logprobs changed)",
        changed["identical_prompts"] < len(prompts) or first_lp > 1e-3,
    )
    original, _ = await asyncio.to_thread(_publish, model_dir, work / "weights", scaled.version + 1, 1.0)
    part.figures["swap_seconds"].append(round(await dev.swap_weights(original), 3))
    back = await _together(dev, prompts, greedy)
    part.check(
        "a swap back gives the original greedy tokens exactly",
        [r.token_ids for r in back] == [r.token_ids for r in before],
    )
    part.figures["back_vs_original_logprob_abs_diff_max"] = max(
        (abs(a - b) for r, o in zip(back, before) for a, b in zip(r.logprobs, o.logprobs)), default=0.0
    )
    part.check("weights still on the device in their dtype", _still_placed(dev, target), dev.placement.precision.dtype)


def _still_placed(engine, target: Target) -> bool:
    params = list(engine.model.parameters())
    dtype = engine.placement.precision.dtype
    return all(p.device.type == target.device and str(p.dtype) == f"torch.{dtype}" for p in params)


# --- d. a forced grammar, masked on the device --------------------------------------------------------------------
class _LocalGrammars:
    """What the app's grammar builders give the engine (`engine.grammars`), compiled here in-process: the check needs
    no builder process, only xgrammar."""

    def __init__(self, engine):
        import xgrammar as xgr

        info = xgr.TokenizerInfo.from_huggingface(
            engine.tokenizer, vocab_size=engine.model.config.vocab_size, stop_token_ids=sorted(engine.stop_ids)
        )
        self._compiler = xgr.GrammarCompiler(info)

    async def compiled(self, ebnf: str):
        from types import SimpleNamespace

        return SimpleNamespace(compiled=self._compiler.compile_grammar(ebnf).serialize_json())


async def part_grammar(part: Part, cpu, dev, target: Target, args) -> None:
    try:
        import xgrammar  # noqa: F401
    except ImportError:
        part.status, part.note = "skipped", "xgrammar is not installed"
        return
    from serve.engines.base import SamplingParams, generate

    prompt = _prompt_ids(dev.tokenizer)[0]
    params = SamplingParams(temperature=1.0, max_tokens=8, seed=3, grammar=GRAMMAR)
    cpu.grammars = dev.grammars = await asyncio.to_thread(_LocalGrammars, dev)  # one model dir: one vocabulary
    outputs = {}
    for side, engine in (("reference", cpu), ("under_check", dev)):
        result = await generate(engine, prompt, params)
        text = engine.tokenizer.decode(result.token_ids, skip_special_tokens=True)
        outputs[side] = {"device": engine.device, "text": text, "finish": result.finish_reason}
    part.figures["grammar"], part.figures["outputs"] = GRAMMAR, outputs
    text, finish = outputs["under_check"]["text"], outputs["under_check"]["finish"]
    part.check("the device's output obeys the grammar", text in ("yes", "no") and finish == "stop", [text, finish])


async def engine_parts(model_dir: Path, work: Path, target: Target, args) -> dict[str, Part]:
    """Parts a, d and b on one pair of engines (the CPU's, the device's), each recorded on its own."""
    from serve.engines.hf import HFEngine

    cpu = HFEngine(str(model_dir), _serve_settings("cpu", args))
    dev = HFEngine(str(model_dir), _serve_settings(target.device, args))
    parts: dict[str, Part] = {}
    try:
        _, started = await _part("engine start", target, _start, cpu, dev)
        if started.status not in ("pass", "skipped"):
            return {n: started for n in ("engine", "grammar", "swap")}
        prompts = _prompt_ids(dev.tokenizer)
        for name, run, extra in (
            ("engine", part_engine, (cpu, dev, prompts)),
            ("grammar", part_grammar, (cpu, dev)),
            ("swap", part_swap, (dev, model_dir, work)),
        ):
            _, parts[name] = await _part(name, target, run, *extra, target, args)
    finally:
        for engine in (cpu, dev):
            await engine.close()
    return parts


async def _start(part: Part, cpu, dev) -> None:
    await cpu.start()
    await dev.start()


# --- c. the learner's step on the device --------------------------------------------------------------------------
def _learner_group(model_dir: Path, args):
    """One synthetic segment-tagged group (a shared prompt, then tool-call and summary tokens per member; random
    ids, behaviour logprobs and rewards), as `slca bench learner` makes them."""
    from ops.bench.learner_step import synthetic_group

    vocab = json.loads((model_dir / "config.json").read_text())["vocab_size"]
    return synthetic_group(random.Random(0), args.group_size, args.prompt_tokens, args.gen_tokens, vocab, 0)


def _token_logprobs(runner, group, settings, autocast: bool):
    """The learner's own per-token logprobs of the group's trained tokens (prepare, pack, select, forward), on CPU."""
    import torch

    from learner.forward import select_rows
    from learner.packing import pack_group
    from learner.step import prepare_group

    prepared = prepare_group(group, settings.estimator, settings.advantage)
    packed = pack_group(prepared.tokens, settings.share_prefix)
    rows, targets = select_rows(packed, prepared.tokens, prepared.selected)
    with torch.no_grad():
        return runner(packed, rows, targets, autocast).logprobs.float().cpu()


def _reference_logprobs(model_dir: Path, group, settings):
    """The same forward on the CPU in float32, no autocast: the reference."""
    import torch

    from learner.model import LogprobModule, load_causal_lm

    model = load_causal_lm(model_dir, torch.device("cpu"))
    return _token_logprobs(LogprobModule(model), group, settings, False)


def run_learner(part: Part, model_dir: Path, target: Target, args) -> None:
    from learner.model import load_policy
    from learner.settings import LearnerSettings

    update = {"lr": args.lr, "skip_zero_advantage_groups": False, "screen_success_variance": False}
    settings = LearnerSettings(precision="auto" if not target.smoke else "fp32", **update)
    group = _learner_group(model_dir, args)
    policy = load_policy(model_dir, settings)  # the learner's own device choice: CUDA when torch sees one
    part.figures.update(device=str(policy.device), bf16_autocast=policy.autocast, tokens=args.gen_tokens)
    part.check("policy on the device", policy.device.type == target.device, str(policy.device))
    if not target.smoke:
        part.check("bf16 autocast on CUDA (learner.precision auto)", policy.autocast)
    got = _token_logprobs(policy.runner, group, settings, policy.autocast)
    ref = _reference_logprobs(model_dir, group, settings)
    diff = (got - ref).abs()
    figures = {"tokens": int(diff.numel()), "max": float(diff.max()), "mean": float(diff.mean())}
    part.figures["logprobs_vs_cpu_fp32_abs_diff"] = figures
    part.check(
        f"logprobs vs CPU fp32: max |Δ| ≤ {args.lp_max_tol}, mean ≤ {args.lp_mean_tol}",
        figures["max"] <= args.lp_max_tol and figures["mean"] <= args.lp_mean_tol,
        figures,
    )
    _steps(part, policy, settings, group, args)


def _steps(part: Part, policy, settings, group, args) -> None:
    """`--steps` optimizer steps of the learner's trainer on the group: finite loss, weights changed, still fp32 on
    the device; the step time (the first one warms up: kernels, allocator, AdamW's state)."""
    import torch

    from learner.trainer import Trainer

    trainer = Trainer(policy, settings)
    params = {n: p for n, p in policy.model.named_parameters() if p.requires_grad}
    before = {n: p.detach().clone() for n, p in params.items()}
    reports = [trainer.train_step([group]) for _ in range(args.steps)]
    if policy.device.type == "cuda":
        torch.cuda.synchronize()
    losses = [r.loss for r in reports]
    moved = sum(1 for n, p in params.items() if not torch.equal(p.detach(), before[n]))
    seconds = [round(r.seconds, 4) for r in reports]
    part.figures.update(
        losses=losses,
        grad_norms=[r.stats.grad_norm for r in reports],
        step_seconds=seconds,
        step_seconds_after_first_median=statistics.median(seconds[1:]) if len(seconds) > 1 else None,
        row_tokens_per_second=[round(r.tokens_per_second, 1) for r in reports],
        tensors_changed=f"{moved}/{len(params)}",
    )
    part.check("loss finite at every step", all(math.isfinite(x) for x in losses), losses)
    part.check("every step updated the weights", all(r.updated for r in reports))
    part.check("parameters changed", moved > 0, f"{moved}/{len(params)}")
    dtypes = sorted({str(p.dtype).removeprefix("torch.") for p in params.values()})
    part.check("master weights stay float32", dtypes == ["float32"], dtypes)


async def part_learner(part: Part, model_dir: Path, target: Target, args) -> None:
    await asyncio.to_thread(run_learner, part, model_dir, target, args)


# --- the run and its report ---------------------------------------------------------------------------------------
def check_model(model_dir: Path, work: Path, target: Target, args) -> dict[str, Part]:
    print(f"{model_dir.name} on {target.device}:", flush=True)

    async def both() -> dict[str, Part]:
        parts = await engine_parts(model_dir, work, target, args)
        _, parts["learner"] = await _part("learner", target, part_learner, model_dir, target, args)
        return parts

    return asyncio.run(both())


def verdict(models: dict[str, dict[str, Part]], target: Target) -> tuple[str, int]:
    bad = [
        f"{m}/{n}: {p.status}" for m, parts in models.items() for n, p in parts.items() if p.status in ("fail", "error")
    ]
    if bad:
        return f"FAIL — {'; '.join(bad)}", 1
    if target.smoke:
        return "SMOKE PASS — no CUDA here: every part ran on the CPU and is reported as skipped", 0
    skipped = [f"{m}/{n}" for m, parts in models.items() for n, p in parts.items() if p.status == "skipped"]
    return "PASS" + (f" (skipped: {', '.join(skipped)})" if skipped else ""), 0


def _machine(target: Target) -> dict:
    import torch
    import transformers

    facts = {"torch": torch.__version__, "transformers": transformers.__version__, "device": target.device}
    if torch.cuda.is_available():
        facts.update(gpu=torch.cuda.get_device_name(0), cuda=torch.version.cuda)
    return facts


def markdown(report: dict) -> str:
    lines = [report["verdict"], "", f"`{report['command']}` — {json.dumps(report['machine'])}", ""]
    for model, parts in report["models"].items():
        lines += [f"## {model}", "", "| part | status | failed checks | figures |", "|---|---|---|---|"]
        for name, p in parts.items():
            failed = "; ".join(f"{c['check']} ({c['detail']})" for c in p["checks"] if not c["ok"]) or "—"
            shown = {k: v for k, v in p["figures"].items() if k not in ("throughput",)}
            lines.append(f"| {name} | {p['status']} | {failed} | `{json.dumps(shown)}` |")
        throughput = parts.get("engine", {}).get("figures", {}).get("throughput")
        if throughput:
            lines += ["", _throughput_line(throughput)]
        errors = [f"{n}:\n```\n{p['error']}\n```" for n, p in parts.items() if p.get("error")]
        lines += ["", *errors] if errors else []
        lines.append("")
    return "\n".join(lines)


def _throughput_line(t: dict) -> str:
    ratio = t.get("median_ratio")
    spread = f"min {t['min_ratio']:.3g}, max {t['max_ratio']:.3g}" if ratio is not None else "—"
    return (
        f"Throughput ({t['figure']}, {t['batch']} requests × ≤ {t['max_tokens']} tokens): {t['b']} ÷ {t['a']} = "
        f"{ratio:.3g}× median over {len(t['ratio_b_over_a'])} alternated pairs ({spread}); medians "
        f"{t['median_b']:.1f} vs {t['median_a']:.1f} tokens/s"
    )


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ops.bench.gpu_check", description=__doc__.split("\n")[0])
    add_arguments(p)
    return p.parse_args(argv)


def add_arguments(p: argparse.ArgumentParser) -> None:
    for flags, kwargs in ARGUMENTS:
        p.add_argument(*flags, **kwargs)


ARGUMENTS = (
    (("--model",), dict(action="append", help="model DIR, or 'tiny'/'embedded' from the cache; repeatable")),
    (("--out",), dict(type=Path, required=True, help="results.json and results.md here")),
    (("--device",), dict(choices=("auto", "cuda", "cpu"), default="auto", help="cpu: the smoke run")),
    (("--tokens",), dict(type=int, default=32, help="greedy tokens per prompt compared")),
    (("--batch",), dict(type=int, default=16, help="requests of the timed batch")),
    (("--batch-tokens",), dict(type=int, default=64, help="tokens per request of the timed batch")),
    (("--waves",), dict(type=int, default=2, help="batches per timed window")),
    (("--pairs",), dict(type=int, default=3, help="alternated CPU/device pairs of windows (≥ 3)")),
    (("--steps",), dict(type=int, default=4, help="learner optimizer steps")),
    (("--group-size",), dict(type=int, default=4)),
    (("--prompt-tokens",), dict(type=int, default=64)),
    (("--gen-tokens",), dict(type=int, default=48)),
    (("--lr",), dict(type=float, default=1e-5)),
    (("--lp-max-tol",), dict(type=float, default=0.5, help="learner logprobs vs CPU fp32: max |Δ| allowed")),
    (("--lp-mean-tol",), dict(type=float, default=0.05, help="learner logprobs vs CPU fp32: mean |Δ| allowed")),
    (("--swap-factor",), dict(type=float, default=3.0, help="the swapped-in version's one scaled tensor: × this")),
    (("--threads",), dict(type=int, default=0, help="torch CPU threads (0: torch's default)")),
)


def resolve_target(requested: str) -> Target | None:
    """The device under check; None when CUDA is asked for and torch sees none."""
    import torch

    if requested == "cuda" and not torch.cuda.is_available():
        return None
    cuda = requested != "cpu" and torch.cuda.is_available()
    return Target("cuda" if cuda else "cpu")


def run(args: argparse.Namespace, cache_dir: str | None = None) -> int:
    """The check (`cache_dir`: where 'tiny'/'embedded' are; None: the configured `common.cache_dir`)."""
    import tempfile

    import torch

    from slca.models.paths import find_model_dir

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    target = resolve_target(args.device)
    if target is None:
        text = "FAIL — --device cuda, but torch sees no CUDA device (torch.cuda.is_available() is False)"
        write(args.out, {"verdict": text, "command": _command(), "machine": _machine(Target("cuda")), "models": {}})
        print(text)
        return 1
    t0 = time.perf_counter()
    models: dict[str, dict[str, Part]] = {}
    cache = cache_dir or _configured_cache_dir()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        for i, name in enumerate(args.model or ["tiny"]):
            try:
                model_dir = find_model_dir(name, cache)
            except FileNotFoundError as exc:  # the other models are still checked
                part = Part()
                part.failed(exc)
                models[Path(name).name] = {"model": part}
                continue
            models[model_dir.name] = check_model(model_dir, Path(tmp) / str(i), target, args)
    text, code = verdict(models, target)
    report = {
        "verdict": text,
        "command": _command(),
        "machine": _machine(target),
        "seconds": round(time.perf_counter() - t0, 1),
        "models": {m: {n: asdict(p) for n, p in parts.items()} for m, parts in models.items()},
    }
    write(args.out, report)
    print(text)
    return code


def _configured_cache_dir() -> str:
    from slca.config import load_config

    return load_config(None, []).common.cache_dir


def _command() -> str:
    """The command as typed, each absolute path cut to `…/<its last part>` (results name no machine paths)."""

    def short(arg: str) -> str:
        key, eq, value = arg.rpartition("=") if arg.startswith("--") and "=" in arg else ("", "", arg)
        return f"{key}{eq}…/{Path(value).name}" if value.startswith(("/", "~")) and len(value) > 1 else arg

    argv = sys.argv[1:]
    if "gpu-check" in argv:  # `slca bench gpu-check …`
        return " ".join(["slca bench gpu-check", *map(short, argv[argv.index("gpu-check") + 1 :])])
    return " ".join(["python -m ops.bench.gpu_check", *map(short, argv)])


def write(out: Path, report: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (out / "results.md").write_text(markdown(report))


def main(argv: list[str] | None = None) -> int:
    return run(parse(argv))


if __name__ == "__main__":
    sys.exit(main())
