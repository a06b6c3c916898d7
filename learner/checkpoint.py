"""Learner checkpoints: model, optimizer, step, version and the ids of every group applied.

Layout: `<run_dir>/checkpoints/step-<n>/` (written atomically) and `<run_dir>/checkpoints/LATEST` (the name
of the newest complete one, replaced atomically after it). A restart loads LATEST; groups whose ids are in
`consumed` are acknowledged without being applied again."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from slca.atomic import commit_dir, remove_stale_temps, temp_dir_next_to, write_text_atomic

STATE_NAME = "state.json"


@dataclass
class LearnerState:
    step: int = 0
    version: int = 0
    """Newest weight version this learner published (0: the base model)."""
    consumed: list[str] = field(default_factory=list)
    """Ids of the groups applied (or deliberately dropped), in order: every one not yet acknowledged, and the newest
    `learner.consumed_ids_kept` of the others (`kept_ids`)."""
    dropped_stale: int = 0


def kept_ids(ids: list[str], keep: int, pending: set[str]) -> list[str]:
    """`ids` (in order) without those acknowledged beyond the newest `keep`: a group whose entry is acknowledged is
    never delivered again, so its id need not be remembered for ever; one in `pending` (applied, not acknowledged
    yet) is redelivered after a crash and must be recognised."""
    acked = [i for i in ids if i not in pending]
    kept = set(acked[-keep:]) if keep else set()
    return [i for i in ids if i in pending or i in kept]


def save_checkpoint(run_dir: Path, state: LearnerState, model, optimizer, keep: int = 2) -> Path:
    from safetensors.torch import save_file

    root = run_dir / "checkpoints"
    remove_stale_temps(root)
    target = root / f"step-{state.step:08d}"
    if target.exists():  # a previous run crashed after writing it but before LATEST moved: rewrite
        shutil.rmtree(target)
    tmp = temp_dir_next_to(target)
    tensors = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(_untie(tensors), str(tmp / "model.safetensors"))
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    (tmp / STATE_NAME).write_text(json.dumps(asdict(state)))
    commit_dir(tmp, target)
    write_text_atomic(root / "LATEST", target.name)
    for old in sorted(p for p in root.glob("step-*") if p != target)[: -keep + 1 or None]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def _untie(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """safetensors refuses shared storage (tied embeddings): clone the duplicates."""
    seen: set[int] = set()
    out = {}
    for k, v in tensors.items():
        ptr = v.untyped_storage().data_ptr()
        out[k] = v.clone() if ptr in seen else v
        seen.add(ptr)
    return out


def load_checkpoint(run_dir: Path, model, optimizer) -> LearnerState | None:
    from safetensors.torch import load_file

    latest = run_dir / "checkpoints" / "LATEST"
    if not latest.is_file():
        return None
    path = run_dir / "checkpoints" / latest.read_text().strip()
    state = LearnerState(**json.loads((path / STATE_NAME).read_text()))
    device = next(model.parameters()).device
    missing, unexpected = model.load_state_dict(
        load_file(str(path / "model.safetensors"), device=str(device)), strict=False
    )
    if unexpected or [m for m in missing if "lm_head" not in m]:
        raise RuntimeError(f"checkpoint {path} does not fit the model: missing {missing}, unexpected {unexpected}")
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location=device, weights_only=True))
    return state
