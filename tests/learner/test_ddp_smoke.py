"""Data-parallel training (torchrun, gloo on CPU): rank 0 reads every group, hands each rank its share, DDP averages
the gradients, and rank 0 alone checkpoints, acknowledges and publishes (`learner.ddp_orders`, `learner.follower`).

The step N ranks take equals the step one process takes on all their groups — whatever their shapes, and when a
rank has no group; rank 0's training state reaches every rank at start; `slca learn` under torchrun runs one
consumer; and a rank killed mid-run costs no group and applies none twice."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ops.bench.learner_step import synthetic_group
from slca.contracts import encode_entry
from slca.redis_server import free_port
from tests.support.learner import MECHANICS
from tests.support.processes import run_as_group
from tests.support.wait import wait_for

REPO = Path(__file__).resolve().parents[2]
VOCAB = 128
DDP_ENV = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


SPLITS = {
    "split": ([0], [1, 2]),  # uneven shares of groups of different shapes
    "alone": ([0, 1, 2], []),  # rank 1 has no group: it runs an empty forward to take part in the average
}


def _groups():
    """Three groups of different shapes (members, prompt and generated lengths), distinct tokens: a rank's loss
    must be divided by the step's totals over every rank, not its own."""
    rng = random.Random(0)
    return [synthetic_group(rng, g, p, n, VOCAB, i) for i, (g, p, n) in enumerate([(4, 16, 8), (3, 12, 20), (2, 9, 5)])]


def _model_dir(root: Path) -> Path:
    """A randomly initialised Llama of a few thousand parameters (no download, no cache)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    path = root / "model"
    LlamaForCausalLM(config).save_pretrained(path)
    return path


def _trainer(model_dir: Path):
    from learner.model import load_policy
    from learner.settings import LearnerSettings
    from learner.trainer import Trainer

    torch.set_num_threads(1)
    settings = LearnerSettings(precision="fp32", lr=1e-3, skip_zero_advantage_groups=False, ddp_timeout_s=60)
    return Trainer(load_policy(model_dir, settings), settings)


def _one_step(model_dir: Path, groups) -> dict:
    """One `Trainer.train_step`: the gradients the optimizer applied, the report, the parameters after."""
    trainer = _trainer(model_dir)
    policy = trainer.policy
    seen: dict[str, torch.Tensor] = {}
    step = trainer.optimizer.step

    def recording_step(*args, **kwargs):
        seen.update({n: p.grad.detach().clone() for n, p in policy.model.named_parameters() if p.grad is not None})
        return step(*args, **kwargs)

    trainer.optimizer.step = recording_step
    report = trainer.train_step(groups)
    params = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    return {
        "grads": seen,
        "grad_norm": report.stats.grad_norm,
        "loss": report.loss,
        "tokens": report.tokens,
        "row_tokens": report.row_tokens,
        "group_ids": report.group_ids,
        "log": report.stats.to_log(),
        "params": params,
        "distributed": policy.distributed,
    }


def _state_of(trainer) -> dict:
    opt = trainer.optimizer.state_dict()
    return {
        "params": {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters()},
        "moments": {f"{i}/{k}": v.clone() for i, per in opt["state"].items() for k, v in per.items()},
        "lr": opt["param_groups"][0]["lr"],
    }


def _rank(rank: int, world: int, port: int, model_dir: Path, out: Path) -> None:
    os.environ.update(
        WORLD_SIZE=str(world), RANK=str(rank), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )
    import torch.distributed as dist

    from learner.ddp import Ranks
    from learner.ddp_orders import Orders
    from learner.ddp_state import broadcast_training_state

    groups = _groups()
    try:
        result = {name: _one_step(model_dir, [groups[i] for i in split[rank]]) for name, split in SPLITS.items()}
        # rank 0's orders: each rank receives its share, validated against the contract again
        orders = Orders(Ranks(rank, world), torch.device("cpu"))
        if rank == 0:
            orders.wait()
            result["handed"] = [g.model_dump_json() for g in groups[:2]]
            result["mine"] = [g.model_dump_json() for g in orders.step(groups[:2])]
            orders.stop()
        else:
            received = [orders.receive() for _ in range(3)]
            result["kinds"] = [o.kind for o in received]
            result["mine"] = [g.model_dump_json() for g in received[1].groups]
        # rank 0's training state (as a checkpoint leaves it: moved weights, AdamW moments, another lr) reaches a
        # fresh rank 1
        trainer = _trainer(model_dir)
        if rank == 0:
            params = [p for p in trainer.policy.model.parameters() if p.requires_grad]
            gen = torch.Generator().manual_seed(1)
            for p in params:
                p.grad = torch.randn(p.shape, generator=gen)
            trainer.optimizer.step()  # local: no collective
            trainer.optimizer.param_groups[0]["lr"] = 3e-4
        result["step"] = broadcast_training_state(trainer.policy.model, trainer.optimizer, 7 if rank == 0 else 0, "cpu")
        result["state"] = _state_of(trainer)
        torch.save(result, out / f"rank{rank}.pt")
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


@pytest.mark.slow  # ~20-30 s on CPU: three processes load torch and transformers, four DDP steps
def test_ranks_take_the_step_one_process_takes_on_all_groups__orders_and_state_reach_every_rank(tmp_path, monkeypatch):
    import torch.multiprocessing as mp

    for name in DDP_ENV:
        monkeypatch.delenv(name, raising=False)
    model_dir = _model_dir(tmp_path)
    mp.spawn(_rank, args=(2, free_port(), model_dir, tmp_path), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    groups = _groups()
    single = _one_step(model_dir, groups)
    group0_only = _one_step(model_dir, groups[:1])

    assert not single["distributed"] and single["grads"]
    for case in SPLITS:
        for r in ranks:
            step = r[case]
            assert step["distributed"] and set(step["grads"]) == set(single["grads"])
            for name, grad in single["grads"].items():  # every rank applied the gradient of all three groups
                torch.testing.assert_close(step["grads"][name], grad, rtol=1e-4, atol=1e-7)
            for name, param in single["params"].items():  # hence the same weights after the step, on both ranks
                torch.testing.assert_close(step["params"][name], param, rtol=1e-5, atol=1e-6)
            # and every rank reports the whole step, as one process does
            assert step["grad_norm"] == pytest.approx(single["grad_norm"], rel=1e-4)
            assert step["loss"] == pytest.approx(single["loss"], rel=1e-4, abs=1e-7)
            assert (step["tokens"], step["row_tokens"]) == (single["tokens"], single["row_tokens"])
            assert step["group_ids"] == ranks[0][case]["group_ids"] and len(step["group_ids"]) == 3
            assert step["log"].keys() == single["log"].keys()
            for key, value in single["log"].items():
                assert step["log"][key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    # the check has teeth: rank 0's own group alone gives another gradient than the whole step's
    assert group0_only["grad_norm"] != pytest.approx(single["grad_norm"], rel=1e-3)

    assert ranks[1]["kinds"] == ["wait", "step", "stop"]
    handed = ranks[0]["handed"]  # each rank's share, the same contract after the trip
    assert ranks[0]["mine"] == handed[:1] and ranks[1]["mine"] == handed[1:]

    assert ranks[0]["step"] == ranks[1]["step"] == 7
    sent, got = ranks[0]["state"], ranks[1]["state"]
    assert got["lr"] == sent["lr"] == 3e-4 and sent["moments"] and got["moments"].keys() == sent["moments"].keys()
    for name, value in sent["moments"].items():
        torch.testing.assert_close(got["moments"][name], value, rtol=0, atol=0)
    for name, value in sent["params"].items():
        torch.testing.assert_close(got["params"][name], value, rtol=0, atol=0)
    assert any(not torch.equal(v, single["params"][n]) for n, v in sent["params"].items())


def _learn_env(redis_url: str, data_dir: Path, model_dir: Path, **learner: str) -> dict[str, str]:
    env = {
        **{k: v for k, v in os.environ.items() if k not in DDP_ENV},
        "SLCA_REDIS_URL": redis_url,
        "SLCA_DATA_DIR": str(data_dir),
        "SLCA_MODEL": str(model_dir),
        "SLCA_LOG_LEVEL": "INFO",
        "OMP_NUM_THREADS": "1",
        "SLCA_LEARNER__PRECISION": "fp32",
        "SLCA_LEARNER__BLOCK_MS": "100",
        "PYTHONPATH": str(REPO),
        **{f"SLCA_LEARNER__{k.upper()}": json.dumps(v) for k, v in MECHANICS.items()},  # one group per rank a step
    }
    env.update({f"SLCA_LEARNER__{k.upper()}": v for k, v in learner.items()})
    return env


def _torchrun(*extra: str, max_steps: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        str(free_port()),
        *extra,
        "-m",
        "slca",
        "learn",
        "--max-steps",
        str(max_steps),
    ]


def _checkpoint(data_dir: Path) -> dict:
    root = data_dir / "learner" / "checkpoints"
    return json.loads((root / (root / "LATEST").read_text().strip() / "state.json").read_text())


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _add_groups(client, n: int, start: int = 0):
    from slca.contracts import Streams

    rng = random.Random(start)
    groups = [synthetic_group(rng, 4, 32, 16, 49152, i) for i in range(start, start + n)]
    for g in groups:
        client.xadd(Streams().groups, encode_entry(g, id=g.group_id))
    return groups


@pytest.mark.slow
def test_slca_learn_under_torchrun_has_one_consumer_both_ranks_train_and_rank0_publishes(
    redis_server, tiny_model_dir, tmp_path
):
    import redis

    from slca.contracts import Streams, WeightManifest
    from slca.contracts.wire import load_json

    client = redis.Redis.from_url(redis_server.url)
    groups = _add_groups(client, 4)  # 2 steps × 2 ranks × 1 group
    proc = run_as_group(
        _torchrun(max_steps=2), timeout=300, env=_learn_env(redis_server.url, tmp_path, tiny_model_dir), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-3000:]

    streams = Streams()
    consumers = client.xinfo_consumers(streams.groups, "learner")
    assert [c["name"] for c in consumers] == [b"learner-0"], "rank 0 is the one consumer"
    assert client.xpending(streams.groups, "learner")["pending"] == 0
    state = _checkpoint(tmp_path)  # rank 0's, where one process keeps it; no other rank keeps one
    assert state["step"] == 2 and sorted(state["consumed"]) == sorted(g.group_id for g in groups)
    assert not (tmp_path / "learner" / "rank1" / "checkpoints").exists()
    steps = _lines(tmp_path / "learner" / "metrics.jsonl")
    assert [len(s["groups"]) for s in steps] == [2, 2]  # each step: both ranks' groups
    trained = _lines(tmp_path / "learner" / "rank1" / "metrics.jsonl")
    assert [t["step"] for t in trained] == [1, 2]
    assert [t["trained"] for t in trained] == [s["groups"][1:] for s in steps], "rank 1 trained its share"
    manifest = load_json(WeightManifest, client.get(streams.weights_latest))
    assert manifest.version == state["version"] == 2 and manifest.verify() == []
    client.close()


def _children(pid: int) -> list[int]:
    """Processes whose parent is `pid` (from /proc/<n>/stat: the parent is the field after the name's ')')."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # gone meanwhile
            continue
        if fields and int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _worker_pid(agent_pid: int, rank: int, restart: int) -> int | None:
    """The pid of torchrun's worker of `rank` in its `restart`-th start (from the worker's environment)."""
    for pid in _children(agent_pid):
        try:
            env = dict(kv.split("=", 1) for kv in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in kv)
        except OSError:
            continue
        if env.get("RANK") == str(rank) and env.get("TORCHELASTIC_RESTART_COUNT") == str(restart):
            return pid
    return None


@pytest.mark.slow  # torchrun starts two ranks twice (torch and the model loaded four times)
def test_a_killed_rank_is_restarted_and_no_group_is_lost_or_applied_twice(redis_server, tiny_model_dir, tmp_path):
    """Rank 1 gets SIGKILL after the first published version; torchrun (--max-restarts 1) restarts both ranks,
    they resume from rank 0's checkpoint and rank 0's pending groups, and the run goes on to later versions."""
    import redis

    from slca.contracts import Streams, WeightManifest
    from slca.contracts.wire import load_json

    client = redis.Redis.from_url(redis_server.url)
    streams = Streams()
    first = _add_groups(client, 2)  # the first step's groups only: the kill must land mid-run
    log = open(tmp_path / "torchrun.log", "wb")
    agent = subprocess.Popen(
        _torchrun("--max-restarts", "1", max_steps=4),
        env=_learn_env(redis_server.url, tmp_path, tiny_model_dir, DDP_TIMEOUT_S="20"),
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def log_tail() -> str:
        return (tmp_path / "torchrun.log").read_text(errors="replace")[-4000:]

    def latest() -> WeightManifest | None:
        raw = client.get(streams.weights_latest)
        return load_json(WeightManifest, raw) if raw else None

    try:
        before = wait_for(latest, 120, "version 1", alive=lambda: agent.poll() is None, detail=log_tail)
        victim = _worker_pid(agent.pid, 1, 0)
        assert victim is not None, "rank 1 of the first start not found"
        os.kill(victim, signal.SIGKILL)
        rest = _add_groups(client, 6, start=2)  # three more steps, for the restarted ranks
        agent.wait(timeout=150)
    finally:
        if agent.poll() is None:
            for worker in _children(agent.pid):  # torchrun starts each rank in a session of its own
                os.kill(worker, signal.SIGKILL)
            os.killpg(agent.pid, signal.SIGKILL)
            agent.wait()
        log.close()
    assert agent.returncode == 0, log_tail()
    starts = (tmp_path / "torchrun.log").read_text(errors="replace").count("groups consumed so far")
    assert starts == 2, f"rank 0 started {starts} times, not twice (once, then once restarted)"

    every = sorted(g.group_id for g in first + rest)
    state = _checkpoint(tmp_path)
    assert state["step"] == 4
    assert sorted(state["consumed"]) == every, "a group was lost or applied twice"
    applied = [gid for line in _lines(tmp_path / "learner" / "metrics.jsonl") for gid in line["groups"]]
    assert sorted(applied) == every, f"the step log shows a group lost or applied twice: {applied}"
    after = latest()
    assert after.version > before.version and after.verify() == []
    assert [c["name"] for c in client.xinfo_consumers(streams.groups, "learner")] == [b"learner-0"]
    assert client.xpending(streams.groups, "learner")["pending"] == 0, "entries left unacknowledged"
    client.close()
