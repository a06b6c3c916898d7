"""Reading a safetensors file in one pass: hashed as read, each tensor read straight into its own memory.

Why not `safetensors.torch.load(file bytes)`: it copies every tensor out of the bytes it is given, so each swap held
the file twice (0.5 GiB more in serve for the 135M model's fp32 versions); and with every tensor in one buffer, no
tensor's memory could go back before all had been loaded. Here the bytes land once, in the tensors themselves, and
are hashed there: what is loaded is exactly what was hashed, and each tensor is freed as soon as the engine has
copied it (`serve/engines/vllm_worker_ext.py`). The format is small and fixed: a little-endian u64 header length, a
JSON header (tensor name → dtype, shape, data offsets; an optional `__metadata__` map), then the data. The checks
the library makes on the header are made here — known dtypes, offsets that match each shape, tensors that tile the
data with no gap or overlap — and a file that fails one is refused with the reason.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import sys
from dataclasses import dataclass
from typing import BinaryIO

import torch

DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
"""The safetensors dtype names a model's weights use."""

MAX_HEADER_BYTES = 100_000_000
"""The library's own bound on the JSON header."""


class SafetensorsFormatError(ValueError):
    """The bytes are not a well-formed safetensors file; the message says where."""


@dataclass(frozen=True)
class Span:
    name: str
    dtype: torch.dtype
    shape: list[int]
    begin: int
    end: int


def read_tensors(f: BinaryIO, size: int) -> tuple[dict[str, torch.Tensor], str]:
    """(name → tensor, sha256 hex of the file's bytes) for the open safetensors file `f` of `size` bytes, read from
    its start to its end once. Raises SafetensorsFormatError for a malformed header, OSError for a file that is not
    `size` bytes long."""
    if sys.byteorder != "little":  # the bytes are little-endian and are used as they are
        raise SafetensorsFormatError("a big-endian machine: safetensors data would need byte swapping")
    digest = hashlib.sha256()
    head = _exactly(f, 8, digest)
    (header_len,) = struct.unpack("<Q", head)
    if header_len > MAX_HEADER_BYTES or 8 + header_len > size:
        raise SafetensorsFormatError(f"header length {header_len} does not fit in {size} bytes")
    spans = _spans(_exactly(f, header_len, digest), size - 8 - header_len)
    tensors = {}
    for span in spans:  # in file order: they tile the data
        tensor = torch.empty(span.shape, dtype=span.dtype)
        if tensor.numel():
            raw = tensor.reshape(-1).view(torch.uint8).numpy()  # the tensor's own bytes, written in place
            if f.readinto(memoryview(raw)) != raw.nbytes:
                raise OSError("the file ended early (changed while it was read)")
            digest.update(raw)
        tensors[span.name] = tensor
    if f.read(1):
        raise OSError("the file grew while it was read")
    return tensors, digest.hexdigest()


def _exactly(f: BinaryIO, n: int, digest) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise SafetensorsFormatError(f"{len(data)} bytes where {n} were expected: the file is cut short")
    digest.update(data)
    return data


def _spans(header_bytes: bytes, data_len: int) -> list[Span]:
    """The header's tensors in file order, each checked, and checked to tile the `data_len` data bytes."""
    try:
        header = json.loads(header_bytes)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SafetensorsFormatError(f"header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise SafetensorsFormatError("header is not a JSON object")
    header.pop("__metadata__", None)
    spans = sorted((_span(name, entry, data_len) for name, entry in header.items()), key=lambda s: (s.begin, s.end))
    covered = 0
    for span in spans:
        if span.begin != covered:
            raise SafetensorsFormatError(
                f"{span.name}: starts at {span.begin}, expected {covered} (a gap or an overlap)"
            )
        covered = span.end
    if covered != data_len:
        raise SafetensorsFormatError(f"tensors cover {covered} of {data_len} data bytes")
    return spans


def _span(name: str, entry, data_len: int) -> Span:
    if not isinstance(entry, dict):
        raise SafetensorsFormatError(f"{name}: entry is not an object")
    dtype = DTYPES.get(entry.get("dtype"))
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if dtype is None:
        raise SafetensorsFormatError(f"{name}: dtype {entry.get('dtype')!r} is not one of {', '.join(DTYPES)}")
    if not isinstance(shape, list) or not all(_natural(d) for d in shape):
        raise SafetensorsFormatError(f"{name}: shape {shape!r} is not a list of non-negative integers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_natural(o) for o in offsets)):
        raise SafetensorsFormatError(f"{name}: data_offsets {offsets!r} is not two non-negative integers")
    begin, end = offsets
    if not begin <= end <= data_len:
        raise SafetensorsFormatError(f"{name}: data_offsets [{begin}, {end}] outside the {data_len} data bytes")
    if math.prod(shape) * dtype.itemsize != end - begin:
        raise SafetensorsFormatError(f"{name}: {end - begin} bytes for shape {shape} of {dtype}")
    return Span(name, dtype, shape, begin, end)


def _natural(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
