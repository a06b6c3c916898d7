"""`slca train --estimator E --seed S --steps N`: a synchronous, controlled run for comparing estimators on
equal budgets and seeds. Plan per step: pick a task (seeded) → one group of G episodes through the serve
agent API (`return_trajectories`, `record: false`) → HierR scores (`workers.scoring.score_trajectory`) →
one update → publish vN straight to the server (`POST /admin/weights`) → one JSON line of metrics."""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
from pathlib import Path

from learner.settings import LearnerSettings
from slca.contracts import SegmentKind


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


def generate_group(api: str, task, settings: LearnerSettings, seed: int):
    """G episodes of one task through the agent API, as a scored `RolloutGroup`."""
    from slca.contracts import RolloutGroup, Trajectory
    from slca.contracts.wire import validate
    from workers.scoring import score_trajectory

    body = {"messages": task.messages, "tools": task.tools, "task_id": task.task_id,
            "ground_truth": task.ground_truth.model_dump(mode="json"), "n": settings.train_group_size,
            "temperature": settings.train_temperature, "top_p": 1.0, "max_tokens": settings.train_max_tokens,
            "max_turns": 3, "seed": seed, "record": False, "return_trajectories": True, "stream": False}  # fmt: skip
    reply = post_json(f"{api}/v1/agent/runs", body)
    trajs = [validate(Trajectory, run["trajectory"]) for run in reply["runs"]]
    rewards = [score_trajectory(t) for t in trajs]
    versions = [t.policy_version for t in trajs]
    return RolloutGroup(task_id=task.task_id, policy_version_min=min(versions), policy_version_max=max(versions),
                        trajectories=trajs, rewards=rewards)  # fmt: skip


def run_train_cli(args, config) -> int:
    from tqdm import tqdm

    import torch

    from learner.loop import run_dir_of
    from learner.model import load_policy
    from learner.publish import write_version
    from learner.trainer import Trainer
    from slca.cli import CliError

    settings = config.get(LearnerSettings).model_copy(update={"estimator": args.estimator, "seed": args.seed})
    common = config.common
    model_dir = Path(settings.init_model).expanduser() if settings.init_model else common.model_path()
    if not (model_dir / "config.json").is_file():
        raise CliError(f"model not found: {model_dir}")
    try:
        from sim.tasks import load_tasks

        tasks = load_tasks(args.pack, "train", args.seed)
    except (ImportError, ValueError) as exc:
        raise CliError(f"cannot load task pack {args.pack!r}: {exc}") from None
    run_dir = run_dir_of(settings, common) / f"train-{args.estimator}-{args.seed}"
    log_path = Path(args.log) if args.log else run_dir / "metrics.jsonl"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    server, api, token = None, args.api, common.admin_token
    if api is None:
        from learner.inprocess_server import InProcessServer

        server = InProcessServer(config).start()
        api, token = server.url, server.admin_token
    elif not token:
        raise CliError("--api needs common.admin_token to publish weights to that server")
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    try:
        policy = load_policy(model_dir, settings)
        trainer = Trainer(policy, settings)
        version = 0
        with open(log_path, "a") as log, tqdm(total=args.steps, desc=f"train {args.estimator}", unit="step") as bar:
            for step in range(1, args.steps + 1):
                task = rng.choice(tasks)
                t0 = time.perf_counter()
                group = generate_group(api.rstrip("/"), task, settings, rng.randrange(2**31))
                gen_s = time.perf_counter() - t0
                report = trainer.train_step([group])
                t1 = time.perf_counter()
                manifest = write_version(policy.model, model_dir, run_dir / "weights", version + 1, step, str(model_dir))
                post_json(f"{api.rstrip('/')}/admin/weights", {"version": manifest.version, "path": manifest.path}, token)
                version = manifest.version
                line = {"step": step, "estimator": args.estimator, "seed": args.seed, "task_id": task.task_id,
                        "version": version, "exec_mean": sum(r.exec for r in group.rewards) / group.size,
                        "pref_mean": sum(r.pref for r in group.rewards) / group.size, "loss": report.loss,
                        "tool_turns_mean": sum(_tool_turns(t) for t in group.trajectories) / group.size,
                        "tokens": report.tokens, "generate_s": gen_s, "step_s": report.seconds,
                        "publish_s": time.perf_counter() - t1, **report.metrics}  # fmt: skip
                log.write(json.dumps(line) + "\n")
                log.flush()
                bar.update(1)
                bar.set_postfix(exec=f"{line['exec_mean']:.2f}", loss=f"{report.loss:.3f}")
    finally:
        if server is not None:
            server.stop()
    print(f"wrote {log_path}")
    return 0


def _tool_turns(traj) -> int:
    """Model turns that wrote at least one tool call (the same count serve's slca_tool_turns observes)."""
    return len({seg.turn for seg in traj.segments if seg.kind == SegmentKind.TOOL_CALL})
