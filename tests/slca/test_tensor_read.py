"""slca.weights.tensor_read: one pass over a safetensors file — the library's tensors, the file's sha256, each tensor
in its own memory, malformed or changing files refused."""

from __future__ import annotations

import hashlib
import io
import json
import struct

import pytest
import torch
from safetensors.torch import load, save

from slca.weights.tensor_read import SafetensorsFormatError, read_tensors


def _tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "w": torch.randn(3, 5, generator=g),
        "b16": torch.randn(7, generator=g).to(torch.bfloat16),
        "ids": torch.arange(6, dtype=torch.int64).reshape(2, 3),
        "mask": torch.tensor([True, False, True]),
        "empty": torch.zeros(0, 4),
    }


def _read(data: bytes, size: int | None = None):
    return read_tensors(io.BufferedReader(io.BytesIO(data)), len(data) if size is None else size)


def test_the_library_s_tensors_and_the_file_s_sha256_each_tensor_in_its_own_memory():
    data = save(_tensors(), metadata={"format": "pt"})
    mine, digest = _read(data)
    theirs = load(data)
    assert digest == hashlib.sha256(data).hexdigest()
    assert mine.keys() == theirs.keys()
    for name, tensor in theirs.items():
        assert mine[name].dtype == tensor.dtype and mine[name].shape == tensor.shape and torch.equal(mine[name], tensor)
    # separate storages: freeing one tensor (after the engine copied it) frees its memory, not a shared buffer's
    pointers = [t.untyped_storage().data_ptr() for t in mine.values() if t.numel()]
    assert len(set(pointers)) == len(pointers)


def test_a_file_that_changes_size_while_read_is_an_error():
    data = save(_tensors())
    with pytest.raises(OSError, match="ended early"):
        _read(data[:-3], size=len(data))
    with pytest.raises(OSError, match="grew"):
        read_tensors(io.BufferedReader(io.BytesIO(data + b"x")), len(data))


def _file(header, data: bytes) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


F32_PAIR = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\x01\x00", "cut short"),
        (struct.pack("<Q", 1 << 40) + b"{}", "does not fit"),
        (struct.pack("<Q", 3) + b"{x}", "not JSON"),
        (_file([], b""), "not a JSON object"),
        (_file({"t": {**F32_PAIR, "dtype": "F4"}}, bytes(8)), "dtype 'F4'"),
        (_file({"t": {**F32_PAIR, "shape": [-2]}}, bytes(8)), "shape"),
        (_file({"t": {**F32_PAIR, "data_offsets": [0]}}, bytes(8)), "data_offsets"),
        (_file({"t": {**F32_PAIR, "data_offsets": [0, 16]}}, bytes(8)), "outside"),
        (_file({"t": {**F32_PAIR, "shape": [3]}}, bytes(8)), "for shape"),
        (_file({"a": F32_PAIR, "b": F32_PAIR}, bytes(8)), "overlap"),
        (_file({"t": {**F32_PAIR, "data_offsets": [4, 12]}}, bytes(12)), "a gap"),
        (_file({"t": F32_PAIR}, bytes(12)), "cover 8 of 12"),
    ],
)
def test_a_malformed_file_is_refused_with_where(data, says):
    with pytest.raises(SafetensorsFormatError, match=says):
        _read(data)
