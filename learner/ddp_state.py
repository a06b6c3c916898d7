"""Rank 0's training state on every rank at start: weights, optimizer state and step.

Only rank 0 keeps a checkpoint (`learner.loop`): its consumed ids, weights and optimizer state are one record, so
ranks can never disagree on what was applied, and hosts need no shared disk. At start rank 0 loads it and sends
it here. DDP's constructor already broadcast rank 0's weights, but before the checkpoint was loaded, and it never
touches the optimizer: AdamW's moments differing between ranks would make the same averaged gradient give
different weights on each rank, so they are sent too, with the optimizer's hyperparameters (a checkpoint's
param_groups replace the configured ones on rank 0).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from learner.ddp_comm import broadcast_in_place, broadcast_json


def broadcast_training_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int, device) -> int:
    """Make every rank's `model` and `optimizer` rank 0's; returns rank 0's `step`. Called on every rank."""
    main = dist.get_rank() == 0
    for tensor in model.state_dict().values():  # the same module on every rank: the same order
        _broadcast_in_place(tensor, device)
    header = None
    if main:
        saved = optimizer.state_dict()
        flat = {f"{index}/{key}": value for index, per in saved["state"].items() for key, value in per.items()}
        odd = [name for name, value in flat.items() if not isinstance(value, torch.Tensor)]
        if odd:
            raise TypeError(f"optimizer state entries that are not tensors cannot be sent: {odd[:5]}")
        header = {
            "step": step,
            "param_groups": saved["param_groups"],
            "tensors": [
                [name, list(t.shape), str(t.dtype).removeprefix("torch."), t.device.type] for name, t in flat.items()
            ],
        }
    header = broadcast_json(header, device)
    received: dict[int, dict[str, torch.Tensor]] = {}
    for name, shape, dtype, kind in header["tensors"]:
        if main:
            tensor = flat[name].to(device)
        else:
            tensor = torch.empty(shape, dtype=getattr(torch, dtype), device=device)
        broadcast_in_place(tensor)
        index, _, key = name.partition("/")
        # where rank 0 keeps it: AdamW's `step` is a CPU tensor even under NCCL, which moves only CUDA ones
        received.setdefault(int(index), {})[key] = tensor.cpu() if kind == "cpu" else tensor
    if not main and (received or header["param_groups"]):
        groups = [_tuples(g) for g in header["param_groups"]]
        # load_state_dict moves the moments where their parameters live and leaves a non-capturable `step` as it is
        optimizer.load_state_dict({"state": received, "param_groups": groups})
    return int(header["step"])


def _broadcast_in_place(tensor: torch.Tensor, device) -> None:
    if tensor.device == torch.device(device) and tensor.is_contiguous():
        broadcast_in_place(tensor)
        return
    staged = tensor.detach().to(device).contiguous()
    broadcast_in_place(staged)
    with torch.no_grad():
        tensor.copy_(staged)


def _tuples(group: dict) -> dict:
    """JSON has no tuples: `betas` comes back a list; give AdamW its tuple back, as rank 0 has it."""
    return {k: tuple(v) if k == "betas" else v for k, v in group.items()}
