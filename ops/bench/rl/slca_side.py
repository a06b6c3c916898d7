"""slca's side of `slca bench rl`: the online pipeline as `slca up` runs it (serve + scoring workers +
assembler + learner + the task feed), on its own redis-server and a temporary data directory, for a fixed
wall time after serve is ready.

Counts come from the components' own records: completions generated and tokens sampled from serve's
/metrics (`slca_trajectories_recorded_total`, `slca_tokens_generated_total`, read at the window's start and
end), optimizer updates and the groups they used from the learner's `metrics.jsonl` (steps whose timestamp
falls in the window). The window starts once the learner has logged its first (cold) step, as TRL's side starts
after its first step. A step counts as an update only if it trained some group (`groups_trained` > 0); groups,
completions and tokens trained are the learner's own counts of what went through the loss (`groups_trained`,
`trajectories_trained`, `tokens_trained` of `StepStats.to_log()`), so the groups that success-variance screening
or zero advantages left out are not counted as trained. Memory and CPU from /proc over the whole process tree
(`TreeSampler`).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ops.observe.procs import TreeSampler
from ops.bench.rl.report import MEMORY_SAMPLE_S, PSS_EVERY_S, SideResult, SideSpec
from ops.bench.slca_up import bench_sets, copy_logs, ready, role_of, set_args, sigterm_as_interrupt, stop, up_argv
from ops.observe.scrape import sample_value, scrape
from slca.redis_server import RedisServer, free_port

log = logging.getLogger("slca.bench.rl")


@dataclass
class SlcaSpec(SideSpec):
    max_turns: int = 1
    extra_sets: tuple[str, ...] = ()
    """More `--set section.field=value` for the pipeline (e.g. serve.engine=hf)."""
    ready_timeout_s: float = 900.0
    as_shipped: bool = False
    """The learner's gradient checkpointing and the training-task probe as `slca up` ships them (on), not off as the
    throughput comparison otherwise sets them (issue 40: the 2× and the 6 GiB measured in one run)."""


AS_COMPARED = ("ops.probe_enabled=false", "learner.gradient_checkpointing=false")
"""What the throughput comparison turns off unless `--as-shipped`: the probe's evaluations (TRL has none) and the
learner's activation recomputation (TRL's side keeps its activations)."""


def pipeline_sets(spec: SlcaSpec, data_dir: Path, redis_url: str, port: int) -> list[str]:
    """The configuration of the measured pipeline: `slca up`'s defaults but for what the comparison fixes."""
    sets = [
        *bench_sets(data_dir, port),
        f"common.model={spec.model}",
        f"common.redis_url={redis_url}",
        f"ops.feed_pack={spec.pack}",
        f"ops.feed_max_tokens={spec.max_new_tokens}",
        f"ops.feed_max_turns={spec.max_turns}",
        f"workers.group_size={spec.group_size}",
        # as TRL's side runs (ops/bench/rl/trl_side.py): neither side recomputes activations the other keeps
        *(() if spec.as_shipped else AS_COMPARED),
        *spec.extra_sets,
    ]
    return set_args(sets)


def _serve_counts(url: str) -> tuple[float, float]:
    text = scrape(url + "/metrics", 5.0) or ""
    return (
        sample_value(text, "slca_trajectories_recorded_total") or 0.0,
        sample_value(text, "slca_tokens_generated_total") or 0.0,
    )


@dataclass
class StepCounts:
    steps: int = 0
    """Optimizer steps logged in the window."""
    updates: int = 0
    """Steps with at least one group of non-zero advantage."""
    groups_trained: int = 0
    trajectories_trained: int = 0
    """Completions in the loss (the members of the trained groups)."""
    tokens_trained: int = 0
    model_tokens: int = 0
    """Tokens the learner's forward passes ran in the updates (its packed rows: `tokens_per_s × step_s`)."""
    prompt_tokens: int = 0
    """Of `model_tokens`, those not in the loss (the prompts: once per group with `learner.share_prefix`)."""


def learner_steps(metrics_path: Path, start: float, end: float) -> StepCounts:
    """The learner's steps logged between wall-clock `start` and `end`: all of them, and the updates (steps that
    trained some group) with the groups, completions and tokens they trained."""
    out = StepCounts()
    for row in _rows(metrics_path):
        if start <= row.get("ts", 0) <= end:
            # the learner's own counts, not `len(groups) - skipped_zero`: `skipped_zero` leaves out only the groups
            # of zero advantage, so the groups success-variance screening dropped would count as trained
            trained = int(row.get("groups_trained") or 0)
            out.steps += 1
            if trained > 0:
                out.updates += 1
                out.groups_trained += trained
                out.trajectories_trained += int(row.get("trajectories_trained") or 0)
                # `tokens` also holds the zero-advantage groups' tokens; `tokens_trained` is the loss's own count
                out.tokens_trained += int(row.get("tokens_trained") or 0)
                ran = round(float(row.get("tokens_per_s") or 0.0) * float(row.get("step_s") or 0.0))
                out.model_tokens += ran
                out.prompt_tokens += max(0, ran - int(row.get("tokens_trained") or 0))
    return out


def _rows(metrics_path: Path) -> list[dict]:
    rows = []
    if metrics_path.is_file():
        for line in metrics_path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by the stop
    return rows


def first_step_logged(metrics_path: Path) -> bool:
    return bool(_rows(metrics_path))


def run_slca_side(spec: SlcaSpec, log_dir: Path) -> SideResult:
    log_dir.mkdir(parents=True, exist_ok=True)
    with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="slca-bench-rl-") as tmp:
        data_dir = Path(tmp) / "var"
        server = RedisServer(Path(tmp) / "redis", appendonly=True).start()
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        argv = up_argv(pipeline_sets(spec, data_dir, server.url, port), spec.ready_timeout_s + spec.seconds + 120)
        out = open(log_dir / "slca-up.log", "wb")
        began = time.monotonic()
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        sampler = TreeSampler([proc.pid, server.proc.pid], role_of, MEMORY_SAMPLE_S, pss_every_s=PSS_EVERY_S).start()
        try:
            while not ready(url):
                if proc.poll() is not None or time.monotonic() - began > spec.ready_timeout_s:
                    raise RuntimeError(
                        f"slca up did not become ready; see {log_dir / 'slca-up.log'} and "
                        f"the pipeline logs copied beside it"
                    )
                time.sleep(1.0)
            metrics = data_dir / "learner" / "metrics.jsonl"
            while not first_step_logged(metrics):  # the cold first step is excluded, as on TRL's side
                if proc.poll() is not None or time.monotonic() - began > spec.ready_timeout_s + spec.seconds:
                    raise RuntimeError(f"the learner logged no step; see {log_dir / 'slca-up.log'}")
                time.sleep(1.0)
            startup = time.monotonic() - began
            cpu0 = dict(sampler.cpu_s)
            (done0, tokens0), t0, wall0 = _serve_counts(url), time.monotonic(), time.time()
            time.sleep(max(0.0, spec.seconds - (time.monotonic() - t0)))
            (done1, tokens1), seconds, wall1 = _serve_counts(url), time.monotonic() - t0, time.time()
            sampler.sample()
            cpu = sampler.cpu_by_role(since=cpu0)
        finally:
            stop(proc)
            sampler.stop()
            server.kill()
            out.close()
            copy_logs(data_dir / "logs", log_dir)
        # after the clean-up, not in it: a stop before the window began (no wall0) propagates as itself
        steps = learner_steps(data_dir / "learner" / "metrics.jsonl", wall0, wall1)
    return SideResult(
        name="slca",
        seconds=seconds,
        completions=int(done1 - done0),
        completions_trained=steps.trajectories_trained,
        updates=steps.updates,
        generated_tokens=int(tokens1 - tokens0),
        peak_rss_bytes=sampler.peak_rss_bytes,
        startup_s=startup,
        trained_tokens=steps.tokens_trained,
        steps=steps.steps,
        prompt_tokens_trained=steps.prompt_tokens,
        model_tokens_trained=steps.model_tokens,
        cpu_s_by_process=cpu,
        peak_rss_by_process=sampler.peak_rss_by_role,
        peak_pss_bytes=sampler.peak_pss_bytes,
        peak_pss_by_process=sampler.peak_pss_by_role,
        memory_samples_per_s=sampler.samples_per_s,
        notes=[
            f"completions trained = groups of non-zero advantage in the learner's steps × "
            f"{spec.group_size}; window after the first (cold) step",
            f"{spec.max_turns} model turn(s) per episode, ≤ {spec.max_new_tokens} tokens each",
            "as shipped: the learner's gradient checkpointing and the training-task probe on"
            if spec.as_shipped
            else "as compared: the learner's gradient checkpointing and the training-task probe off (TRL has neither)",
        ],
        extra={"sets": [s for s in spec.extra_sets]},
    )
