"""Bytes, JSON and small integers between the learner's ranks — never pickle.

torch.distributed's `*_object` collectives pickle what they send, and unpickling what another process sent runs
whatever it says; the project sends nothing pickled across processes. Here a payload travels as a uint8 tensor,
its length sent first so that the receivers can allocate it. Tensors live on `device`: the CPU under gloo, the
rank's GPU under NCCL (which moves only CUDA tensors).

Each collective's work handle stays referenced here for a few more collectives (`_done`). Gloo's worker thread drops
its reference to a finished work a moment after `wait()` returns; when that reference is the last, the work's
destructor runs on that thread and needs the GIL (torch 2.13: its tensors' Python objects, its saved thread-local
state). When the process group is destroyed right after the last collective (`slca learn` stopping), the main thread
holds the GIL while it joins that worker thread in the group's destructor: a deadlock (seen: ranks hung at exit, the
worker waiting for the GIL in ~AsyncBroadcastWork). Kept here, the last reference is Python's, dropped by the main
thread.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import torch
import torch.distributed as dist

_kept: deque[Any] = deque(maxlen=8)
"""The work handles of the last few collectives."""


def _done(work) -> None:
    """Wait for a collective started with `async_op=True`, and keep its handle (see above)."""
    _kept.append(work)
    work.wait()


def broadcast_bytes(payload: bytes | None, device: torch.device) -> bytes:
    """Rank 0's `payload` on every rank (the others pass None)."""
    size = torch.tensor([len(payload) if payload is not None else 0], dtype=torch.int64, device=device)
    _done(dist.broadcast(size, src=0, async_op=True))
    n = int(size.item())
    if n == 0:
        return b""
    if payload is not None:
        buf = torch.frombuffer(bytearray(payload), dtype=torch.uint8).to(device)
    else:
        buf = torch.empty(n, dtype=torch.uint8, device=device)
    _done(dist.broadcast(buf, src=0, async_op=True))
    return payload if payload is not None else buf.cpu().numpy().tobytes()


def broadcast_json(obj: Any, device: torch.device) -> Any:
    """Rank 0's JSON-able `obj` on every rank (what the others pass is ignored)."""
    payload = json.dumps(obj).encode() if dist.get_rank() == 0 else None
    return json.loads(broadcast_bytes(payload, device))


def gather_json(obj: Any, device: torch.device) -> list[Any]:
    """Every rank's JSON-able `obj`, in rank order, on every rank."""
    payload = json.dumps(obj).encode()
    world = dist.get_world_size()
    sizes = gather_ints([len(payload)], device)
    longest = max(s[0] for s in sizes)
    buf = torch.zeros(longest, dtype=torch.uint8, device=device)
    buf[: len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    parts = [torch.empty(longest, dtype=torch.uint8, device=device) for _ in range(world)]
    _done(dist.all_gather(parts, buf, async_op=True))
    return [json.loads(p[: s[0]].cpu().numpy().tobytes()) for p, s in zip(parts, sizes)]


def gather_ints(values: list[int], device: torch.device) -> list[list[int]]:
    """Every rank's `values` (the same count on every rank), in rank order, on every rank: one collective."""
    mine = torch.tensor(values, dtype=torch.int64, device=device)
    parts = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    _done(dist.all_gather(parts, mine, async_op=True))
    return [p.tolist() for p in parts]


def broadcast_in_place(tensor: torch.Tensor) -> None:
    """Rank 0's `tensor` into every rank's (same shape and dtype, on the group's device)."""
    _done(dist.broadcast(tensor, src=0, async_op=True))
