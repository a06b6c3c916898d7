"""Does OpenMP's waiting cost the pipeline's two torch processes their shared cores? serve's hf engine and the
learner each run an OpenMP team of torch's default size (the machine's core count): on 2 cores, 4 threads. libgomp
shortens its spin-wait only when one process's own teams outnumber the CPUs, so each process's idle threads spin
after every parallel region on cores the other process needs, and a team's barrier waits for a thread the other
process has preempted.

Two processes start together on the same cores: one runs the hf engine's decode step (8 rows over a 900-token
context, the engine's model call, a new prefill every 128 steps; `ops.bench.serve.hf_decode_probe`), one the
learner's step (forward, backward and AdamW over 2 × 512 tokens); bf16 (autocast over fp32 weights for the step)
where the CPU computes it natively, fp32 elsewhere, as serve and the learner choose. Setups:

- `default`: torch's default threads in both, libgomp's default wait policy (as `slca up` runs them);
- `passive`: the same threads, OMP_WAIT_POLICY=PASSIVE in both (an idle thread sleeps at once);
- `split`: one thread each (OMP_NUM_THREADS=1): no more threads than cores;
- `nice5`, `nice10`: as `default`, the train side that much nicer (`ops.training_nice`).

Each window counts decode steps and trained tokens per second of both processes after the same warm-up; the setups
rotate round by round (ABC, BCA, CAB, …). A probe, not a `slca bench` result.

    .venv/bin/python -m ops.bench.serve.omp_wait_policy [--rounds 3] [--seconds 20] [--setups default,nice10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WARM_UP_S = 5.0
ROLE_MODULE = "ops.bench.serve.omp_wait_policy"
"""This module: each side of a window runs it again with `--role` (`python -m`, so its imports resolve alike)."""


def _role(role: str, model_dir: str, start_at: float, seconds: float) -> dict:
    """One process's side of a window: load, warm up, then count work from `start_at` for `seconds`."""
    import torch
    from transformers import AutoModelForCausalLM, DynamicCache

    from slca.models.precision import cpu_has_native_bf16

    if role == "decode":
        dtype = torch.bfloat16 if cpu_has_native_bf16() else torch.float32  # as serve's engines choose
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).eval()
        rows, context = 8, 900

        def step_factory():
            cache = DynamicCache()
            with torch.inference_mode():
                model(input_ids=torch.randint(0, 1000, (rows, context)), past_key_values=cache, logits_to_keep=1)
            return cache

        cache, position = step_factory(), context

        def work() -> float:
            nonlocal cache, position
            if position >= context + 128:  # a turn's worth of new tokens: start a new batch
                cache, position = step_factory(), context
            with torch.inference_mode():
                model(
                    input_ids=torch.randint(0, 1000, (rows, 1)),
                    position_ids=torch.full((rows, 1), position),
                    past_key_values=cache,
                    logits_to_keep=1,
                )
            position += 1
            return 1.0  # one decode step
    else:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
        batch = torch.randint(0, 1000, (2, 512))

        # bf16 autocast where the CPU computes bf16 natively, fp32 elsewhere: what the learner does (emulated, one
        # step took minutes on an avx2-only EPYC)
        autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=cpu_has_native_bf16())

        def work() -> float:
            with autocast:
                loss = model(input_ids=batch, labels=batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return float(batch.numel())  # trained tokens

    end_warm = time.time() + WARM_UP_S
    while time.time() < max(end_warm, start_at):  # the same warm-up on both sides, then the common start
        work()
    done, t0 = 0.0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        done += work()
    return {"role": role, "per_s": done / (time.perf_counter() - t0)}


SETUPS = {
    "default": {},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
    "split": {"OMP_NUM_THREADS": "1"},
    "nice5": {},
    "nice10": {},
}
TRAIN_NICE = {"nice5": 5, "nice10": 10}
"""Setups whose train side runs this much nicer (`ops.training_nice`), threads as in `default`: how much of the
cores serving wins back from a learner that yields to it, and what that costs the learner."""


def _window(setup: str, model_dir: str, seconds: float) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    env.update(SETUPS[setup])
    start_at = time.time() + 25.0  # both loaded and warmed up by then
    argv = ["--model", model_dir, "--start-at", str(start_at), "--seconds", str(seconds)]
    nice = {"train": ["nice", "-n", str(TRAIN_NICE[setup])]} if setup in TRAIN_NICE else {}
    procs = [
        subprocess.Popen(
            [*nice.get(role, []), sys.executable, "-m", ROLE_MODULE, "--role", role, *argv],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for role in ("decode", "train")
    ]
    out = {}
    for p in procs:
        record = json.loads(p.communicate()[0].strip().splitlines()[-1])
        out[record["role"]] = record["per_s"]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--model", help="model directory (default: the warm start, else common.model)")
    p.add_argument(
        "--setups", default=",".join(SETUPS), help=f"comma-separated, `default` first (of {', '.join(SETUPS)})"
    )
    p.add_argument("--role", help=argparse.SUPPRESS)
    p.add_argument("--start-at", type=float, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.role:
        print(json.dumps(_role(args.role, args.model, args.start_at, args.seconds)))
        return 0

    from ops.bench.ab import machine_now
    from ops.experiments.warmstart.model import warm_model_dir
    from slca.config import load_config
    from slca.models.paths import find_model_dir, is_model_dir

    config = load_config(None, [])
    warm = warm_model_dir(config)
    model_dir = str(
        find_model_dir(
            args.model or (str(warm) if is_model_dir(warm) else config.common.model), config.common.cache_dir
        )
    )
    names, start, rounds = args.setups.split(","), machine_now(), []
    if names[0] != "default" or not set(names) <= set(SETUPS):
        p.error(f"--setups: `default` first, then any of {', '.join(SETUPS)}")
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        result = {}
        for setup in order:
            result[setup] = _window(setup, model_dir, args.seconds)
            print(f"round {r + 1} {setup}: {json.dumps(result[setup])}", flush=True)
        rounds.append(result)
    print(f"load {start['load_average']} → {machine_now()['load_average']}; flags {start.get('cpu_flags')}")
    for setup in names[1:]:
        for figure in ("decode", "train"):
            ratios = [result[setup][figure] / result["default"][figure] for result in rounds]
            each = ", ".join(f"{x:.2f}" for x in ratios)
            print(f"{figure}: {setup} ÷ default per round {each}; median {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
