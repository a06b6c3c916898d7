"""Data-parallel training (torchrun, gloo on CPU): each rank steps on its own groups and DDP averages the gradients,
so two ranks with one group each must take the very step one process takes on both groups; and `slca learn` under
torchrun runs its ranks on disjoint groups, rank 0 publishing. (Was bench/learner_ddp_smoke.py, a script.)"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ops.bench.learner_step import synthetic_group
from slca.contracts import encode_entry
from slca.redis_server import free_port

REPO = Path(__file__).resolve().parents[2]
VOCAB = 128
DDP_ENV = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def _groups():
    """Two groups of the same shape (so each rank's loss is divided by the same token totals), distinct tokens."""
    rng = random.Random(0)
    return [synthetic_group(rng, 4, 16, 8, VOCAB, i) for i in range(2)]


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


def _one_step(model_dir: Path, groups) -> dict:
    """One `Trainer.train_step`: the gradients the optimizer applied, the grad norm, the parameters after."""
    from learner.model import load_policy
    from learner.settings import LearnerSettings
    from learner.trainer import Trainer

    torch.set_num_threads(1)
    settings = LearnerSettings(precision="fp32", lr=1e-3, skip_zero_advantage_groups=False)
    policy = load_policy(model_dir, settings)
    trainer = Trainer(policy, settings)
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
        "params": params,
        "distributed": policy.distributed,
    }


def _rank(rank: int, world: int, port: int, model_dir: Path, out: Path) -> None:
    os.environ.update(
        WORLD_SIZE=str(world), RANK=str(rank), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )
    import torch.distributed as dist

    try:
        torch.save(_one_step(model_dir, [_groups()[rank]]), out / f"rank{rank}.pt")
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


@pytest.mark.slow  # ~10-20 s on CPU: three processes load torch and transformers
def test_two_gloo_ranks_take_the_step_one_process_takes_on_both_groups(tmp_path, monkeypatch):
    import torch.multiprocessing as mp

    for name in DDP_ENV:
        monkeypatch.delenv(name, raising=False)
    model_dir = _model_dir(tmp_path)
    mp.spawn(_rank, args=(2, free_port(), model_dir, tmp_path), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    single = _one_step(model_dir, _groups())
    group0_only = _one_step(model_dir, _groups()[:1])

    assert all(r["distributed"] for r in ranks) and not single["distributed"]
    assert single["grads"] and set(ranks[0]["grads"]) == set(single["grads"])
    for name, grad in single["grads"].items():
        for r in ranks:  # every rank applied the average of both ranks' gradients
            torch.testing.assert_close(r["grads"][name], grad, rtol=1e-4, atol=1e-7)
    for r in ranks:
        assert r["grad_norm"] == pytest.approx(single["grad_norm"], rel=1e-4)
        for name, param in single["params"].items():  # hence the same weights after the step, on both ranks
            torch.testing.assert_close(r["params"][name], param, rtol=1e-5, atol=1e-6)
    # the check has teeth: rank 0's own group alone gives another gradient than the average
    assert group0_only["grad_norm"] != pytest.approx(single["grad_norm"], rel=1e-3)


@pytest.mark.slow
def test_slca_learn_under_torchrun_splits_groups_between_ranks_and_rank0_publishes(
    redis_server, tiny_model_dir, tmp_path
):
    import redis

    from slca.contracts import Streams, WeightManifest
    from slca.contracts.wire import load_json

    client = redis.Redis.from_url(redis_server.url)
    rng = random.Random(0)
    groups = [synthetic_group(rng, 4, 32, 16, 49152, i) for i in range(4)]  # 2 ranks × 2 steps × 1 group
    for g in groups:
        client.xadd(Streams().groups, encode_entry(g, id=g.group_id))
    env = {
        **{k: v for k, v in os.environ.items() if k not in DDP_ENV},
        "SLCA_REDIS_URL": redis_server.url,
        "SLCA_DATA_DIR": str(tmp_path),
        "SLCA_MODEL": str(tiny_model_dir),
        "OMP_NUM_THREADS": "1",
        "SLCA_LEARNER__PRECISION": "fp32",
        "SLCA_LEARNER__BLOCK_MS": "100",
        "PYTHONPATH": str(REPO),
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "-m",
            "slca",
            "learn",
            "--max-steps",
            "2",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-3000:]

    states = []
    for rank in (0, 1):
        checkpoints = tmp_path / "learner" / f"rank{rank}" / "checkpoints"
        latest = checkpoints / (checkpoints / "LATEST").read_text().strip()
        states.append(json.loads((latest / "state.json").read_text()))
    assert [s["step"] for s in states] == [2, 2]
    consumed = [set(s["consumed"]) for s in states]
    assert all(len(c) == 2 for c in consumed) and not consumed[0] & consumed[1]
    assert consumed[0] | consumed[1] == {g.group_id for g in groups}
    manifest = load_json(WeightManifest, client.get(Streams().weights_latest))
    assert manifest.version == states[0]["version"] == 2 and manifest.verify() == []
    client.close()
