"""`slca train --estimator E --seed S --steps N`: a synchronous, controlled run for comparing estimators on
equal budgets and seeds. Plan per step: pick `learner.groups_per_step` distinct tasks (seeded) → per task one group
of G episodes through the serve agent API (`return_trajectories`, `record: false`) → HierR scores
(`workers.scoring.score_trajectory`, with the configured `workers` settings and the trained model's own tokenizer,
as the online workers score) → one update on the step's groups → publish vN through the online learner's path
(`slca.weights.publish`: files, then `SET`+`PUBLISH` on Redis) → wait until the server serves vN → one JSON line of
metrics (the groups' reward means, timings and the learner's `StepStats.to_log()`).

The run stops after `--steps` steps or `--minutes` minutes of wall clock, whichever comes first (`--steps 0`: the
minutes alone; the clock starts at the first step). It trains on the pack's train split, or on the fixed tasks of
`--tasks-file` (JSON lines of `Task`, as `sim.tasks.write_jsonl` writes them), narrowed to `--task-ids` if given.
With `learner.loss.kl_beta` > 0 a frozen copy of the starting weights is the KL reference.

Who answers the rollouts' tool calls: the server's agent loop, through the sim's provider (`serve/tools.py`), as each
offered definition says — a pack's real tool (`x-mode: real`) runs for real, a simulated one (the catalog's) is SGLS.
`--tools sgls` offers every definition as `x-mode: simulated` instead (the same parameter and response schemas, as
the fidelity replay does: `sim.fidelity.replay.simulated`), so SGLS answers every call: training on the simulator
instead of the real tools. The in-process server's simulator takes the configured `[sim]` section (`sim.backend`,
`sim.world_seed`, ...), as `slca up` gives it to serve.

Which server follows the announcement: the in-process one (no `--api`) subscribes under a stream prefix of
its own, `<common.stream_prefix>:train:<run id>`, so that a controlled run never hot-swaps the servers of a
live system sharing the Redis, nor starts from its weights; with `--api`, the server at that URL must follow
`<common.stream_prefix>:weights` on the configured Redis (`weights.follow`)."""

from __future__ import annotations

import dataclasses
import json
import random
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from learner.settings import LearnerSettings
from slca.contracts import SegmentKind, Streams, Trajectory

SWAP_TIMEOUT_S = 600.0
"""How long to wait for the server to serve a published version."""


def post_json(url: str, body: dict, token: str | None = None, timeout: float = 900) -> dict:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        from slca.cli import CliError

        raise CliError(f"{url}: HTTP {exc.code}: {exc.read()[:500].decode(errors='replace')}") from None


def get_json(url: str, timeout: float = 30) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def scoring_settings(config, model_dir: Path):
    """The configured `workers` settings, decoding with the trained model's own tokenizer unless one is set
    (`workers.tokenizer`): the online workers score the same way (`WorkerSettings.with_tokenizer_of`)."""
    scoring = config.section("workers")
    return scoring.model_copy(update={"tokenizer": scoring.tokenizer or str(model_dir)})


def wait_served(api: str, version: int, timeout_s: float = SWAP_TIMEOUT_S) -> float:
    """Block until the server reports `version` as its policy version (it swaps after the announcement)."""
    from slca.cli import CliError

    t0 = time.perf_counter()
    served = None
    while time.perf_counter() - t0 < timeout_s:
        served = get_json(f"{api}/v1/models")["data"][0].get("policy_version")
        if served is not None and served >= version:
            return time.perf_counter() - t0
        time.sleep(0.05)
    raise CliError(
        f"{api} still serves v{served} {timeout_s:.0f}s after v{version} was announced: does it follow "
        "the weights channel on this Redis (weights.follow), and did the load fail (its log)?"
    )


def offered_tools(tools: list[dict], source: str = "real") -> list[dict]:
    """The definitions the rollouts are offered: as given (`real`), or each as `x-mode: simulated` (`sgls`)."""
    if source == "real":
        return tools
    if source != "sgls":
        raise ValueError(f"unknown tool source {source!r}; known: real, sgls (`--tools`)")
    from sim.fidelity.replay import simulated

    return [simulated(t) if isinstance(t.get("function"), dict) else t for t in tools]


def generate_group(api: str, task, settings: LearnerSettings, seed: int, scoring, tools: str = "real"):
    """G episodes of one task through the agent API, as a `RolloutGroup` scored with `scoring` settings; the tool
    calls answered by `tools` (`offered_tools`)."""
    from slca.contracts import RolloutGroup, Trajectory
    from slca.contracts.wire import validate
    from workers.scoring import score_trajectory

    body = {
        "messages": task.messages,
        "tools": offered_tools(task.tools, tools),
        "task_id": task.task_id,
        "ground_truth": task.ground_truth.model_dump(mode="json"),
        "n": settings.train_group_size,
        "temperature": settings.train_temperature,
        "top_p": 1.0,
        "max_tokens": settings.train_max_tokens,
        "max_turns": 3,
        "seed": seed,
        "record": False,
        "return_trajectories": True,
        "stream": False,
    }
    reply = post_json(f"{api}/v1/agent/runs", body)
    trajs = [validate(Trajectory, run["trajectory"]) for run in reply["runs"]]
    rewards = [score_trajectory(t, scoring) for t in trajs]
    versions = [t.policy_version for t in trajs]
    return RolloutGroup(
        task_id=task.task_id,
        policy_version_min=min(versions),
        policy_version_max=max(versions),
        trajectories=trajs,
        rewards=rewards,
    )


@dataclasses.dataclass(frozen=True)
class Budget:
    """When a run stops: after `steps` steps (0: no limit) or `minutes` of wall clock since `started` (0: no limit),
    whichever comes first; a step that has started is finished."""

    steps: int
    minutes: float
    started: float = dataclasses.field(default_factory=lambda: time.monotonic())

    def __post_init__(self) -> None:
        from slca.cli import CliError

        if self.steps < 0 or self.minutes < 0:
            raise CliError("--steps and --minutes must be ≥ 0")
        if not self.steps and not self.minutes:
            raise CliError("--steps 0 runs on --minutes alone: give --minutes M > 0")

    def allows(self, done: int) -> bool:
        """Whether a step may start after `done` steps."""
        if self.steps and done >= self.steps:
            return False
        return not self.minutes or self.elapsed_s() < self.minutes * 60

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def from_now(self) -> Budget:
        """The same budget, its clock started now (at the first step: loading the model and starting the server
        do not count)."""
        return dataclasses.replace(self, started=time.monotonic())


def training_tasks(args) -> list:
    """The tasks a run draws from: `--tasks-file` (train tasks only), else the pack's train split; narrowed to
    `--task-ids` (comma-separated) when given."""
    from slca.cli import CliError

    try:
        from sim.tasks import load_tasks, read_jsonl

        tasks = read_jsonl(args.tasks_file) if args.tasks_file else load_tasks(args.pack, "train", args.seed)
    except (ImportError, ValueError, OSError) as exc:
        source = args.tasks_file or f"task pack {args.pack!r}"
        raise CliError(f"cannot load {source}: {exc}") from None
    if held_out := sorted(t.task_id for t in tasks if t.split != "train"):
        raise CliError(f"{args.tasks_file}: not train tasks (never train on held-out ones): {', '.join(held_out[:5])}")
    if args.task_ids:
        tasks = only_ids(tasks, [i.strip() for i in args.task_ids.split(",") if i.strip()])
    if not tasks:
        raise CliError("no task to train on")
    return tasks


def only_ids(tasks: list, ids: list[str]) -> list:
    """The tasks named by `ids`, in their order; an id that is not among `tasks` is an error."""
    from slca.cli import CliError

    by_id = {t.task_id: t for t in tasks}
    if missing := [i for i in ids if i not in by_id]:
        raise CliError(f"--task-ids: not among the training tasks: {', '.join(missing[:5])}")
    return [by_id[i] for i in dict.fromkeys(ids)]


def pick_tasks(rng: random.Random, tasks: list, k: int) -> list:
    """`k` distinct tasks (all of them when there are fewer), drawn with `rng`."""
    return rng.sample(tasks, min(k, len(tasks)))


def run_train_cli(args, config) -> int:
    from tqdm import tqdm

    import redis
    import torch

    from learner.loop import run_dir_of
    from learner.model import load_policy, reference_for
    from learner.trainer import Trainer
    from slca.cli import CliError
    from slca.models.paths import find_model_dir, how_to_make
    from slca.weights import WeightsSettings, publish

    budget = Budget(args.steps, args.minutes or 0.0)
    settings = config.get(LearnerSettings).model_copy(update={"estimator": args.estimator, "seed": args.seed})
    common = config.common
    name = settings.init_model or common.model
    model_dir = find_model_dir(name, common.cache_dir, hint=f"{how_to_make(name)}, or set learner.init_model")
    scoring = scoring_settings(config, model_dir)
    tasks = training_tasks(args)
    run_dir = run_dir_of(settings, common) / f"train-{args.estimator}-{args.seed}"
    log_path = Path(args.log) if args.log else run_dir / "metrics.jsonl"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    client = redis.Redis.from_url(common.redis_or_default())
    try:
        client.ping()  # before any work: every version is announced there
    except redis.ConnectionError as exc:
        raise CliError(
            f"cannot reach Redis at {common.redis_or_default()} (weights are announced there; set "
            f"common.redis_url): {exc}"
        ) from None
    server, api, streams = open_server(config, args.api)
    # its own server signs with a key of its own when none is configured (`InProcessServer`)
    weights = server.weights if server is not None else config.get(WeightsSettings)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    try:
        policy = load_policy(model_dir, settings)
        trainer = Trainer(policy, settings, reference_for(model_dir, settings, policy.device))
        version, step = 0, 0
        total, budget = args.steps or None, budget.from_now()
        with open(log_path, "a") as log, tqdm(total=total, desc=f"train {args.estimator}", unit="step") as bar:
            while budget.allows(step):
                step += 1
                picked = pick_tasks(rng, tasks, settings.groups_per_step)
                t0 = time.perf_counter()
                groups = [
                    generate_group(api, task, settings, rng.randrange(2**31), scoring, args.tools) for task in picked
                ]
                gen_s = time.perf_counter() - t0
                report = trainer.train_step(groups)
                manifest, publish_s = publish(
                    policy.model,
                    model_dir,
                    run_dir / "weights",
                    version,
                    step,
                    str(model_dir),
                    client,
                    streams,
                    weights.keep_versions,
                    weights_key=weights.key,
                )
                swap_s = wait_served(api, manifest.version)
                version = manifest.version
                line = {
                    "step": step,
                    "estimator": args.estimator,
                    "seed": args.seed,
                    "task_id": picked[0].task_id,
                    "task_ids": [t.task_id for t in picked],
                    "version": version,
                    # the versions that sampled this step's rollouts: on-policy means the one trained last step
                    "rollout_version_min": min(g.policy_version_min for g in groups),
                    "rollout_version_max": max(g.policy_version_max for g in groups),
                    **group_means(groups),
                    "loss": report.loss,
                    "scorer_version": scoring.scorer_version,
                    "tokens": report.tokens,
                    "generate_s": gen_s,
                    "step_s": report.seconds,
                    "publish_s": publish_s,
                    "swap_s": swap_s,
                    "elapsed_s": budget.elapsed_s(),
                    **report.stats.to_log(),
                }
                log.write(json.dumps(line) + "\n")
                log.flush()
                bar.update(1)
                bar.set_postfix(exec=f"{line['exec_mean']:.2f}", loss=f"{report.loss:.3f}")
    finally:
        if server is not None:
            server.stop()
            client.delete(streams.weights_latest)  # the run's private announcement key
        client.close()
    print(f"wrote {log_path}")
    return 0


def open_server(config, api: str | None) -> tuple[object | None, str, Streams]:
    """(in-process server or None, base URL, the streams whose weight announcements that server follows)."""
    common = config.common
    if api is not None:
        return None, api.rstrip("/"), Streams(common.stream_prefix)
    from ops.experiments.inprocess_server import InProcessServer

    streams = Streams(f"{common.stream_prefix}:train:{uuid.uuid4().hex[:12]}")
    server = InProcessServer(following_candidate(config), streams.prefix, sim_settings=sim_settings(config)).start()
    return server, server.url, streams


def sim_settings(config):
    """The configured `[sim]` section for the server's tools (as `slca up`'s serve gets it); None without the sim."""
    try:
        return config.section("sim").with_cache_of(config.common)
    except ModuleNotFoundError:
        return None


def following_candidate(config):
    """`config` with `serve.follow_candidate` on: a controlled run has no callers to protect, and its rollouts must
    come from the version it just trained (on-policy), not from a promoted one held back by the gate."""
    from dataclasses import replace

    raw = {name: dict(values) for name, values in config.raw.items()}
    raw["serve"] = {**raw.get("serve", {}), "follow_candidate": True}
    return replace(config, raw=raw)


def tool_turns(traj: Trajectory) -> int:
    """Model turns that wrote at least one tool call (what serve's slca_tool_turns observes)."""
    return len({seg.turn for seg in traj.segments if seg.kind == SegmentKind.TOOL_CALL})


def group_means(groups: list) -> dict[str, float]:
    """Means over every member of the step's groups: exec, pref, model turns with a call, omission rate, and task
    success (component 'success'; members without it left out, the key absent when none has it)."""
    rewards = [r for g in groups for r in g.rewards]
    trajectories = [t for g in groups for t in g.trajectories]
    n = len(rewards)
    means = {
        "exec_mean": sum(r.exec for r in rewards) / n,
        "pref_mean": sum(r.pref for r in rewards) / n,
        "tool_turns_mean": sum(tool_turns(t) for t in trajectories) / n,
        "omission_rate": sum(r.omission_penalized for r in rewards) / n,
    }
    successes = [r.components["success"] for r in rewards if "success" in r.components]
    if successes:
        means["success_mean"] = sum(successes) / len(successes)
    return means
