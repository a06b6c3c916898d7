"""Which floating-point precision to run in, chosen from what the machine can do fast.

Machines of one kind differ in their CPU (docs/cpu-facts.md#machines): bf16 is fast only where the CPU has native bf16
instructions (`avx512_bf16` or AMX `amx_bf16`); elsewhere bf16 is emulated and slower than fp32. So
'auto' means: CUDA → bfloat16; a CPU with native bf16 → bfloat16; any other CPU → float32. Every component
that picks a precision asks here, prints the choice, and lets the user override it.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)

NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
DTYPES = ("auto", "bfloat16", "float16", "float32")


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The flags of the first CPU in /proc/cpuinfo (empty where there is no such file)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_has_native_bf16(flags: frozenset[str] | None = None) -> bool:
    flags = cpu_flags() if flags is None else flags
    return any(f in flags for f in NATIVE_BF16_FLAGS)


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@dataclass(frozen=True)
class Precision:
    dtype: str
    """'bfloat16', 'float16' or 'float32'."""
    reason: str
    """Why: 'requested', 'cuda', 'cpu has avx512_bf16', 'cpu lacks native bf16'."""

    def describe(self, what: str) -> str:
        return f"{what}: {self.dtype} ({self.reason})"


def choose_precision(
    requested: str = "auto", *, cuda: bool | None = None, flags: frozenset[str] | None = None
) -> Precision:
    """Resolve 'auto' (or validate an explicit dtype)."""
    if requested not in DTYPES:
        raise ValueError(f"unknown dtype {requested!r}; expected one of {', '.join(DTYPES)}")
    if requested != "auto":
        return Precision(requested, "requested")
    if cuda_available() if cuda is None else cuda:
        return Precision("bfloat16", "cuda")
    flags = cpu_flags() if flags is None else flags
    native = [f for f in NATIVE_BF16_FLAGS if f in flags]
    if native:
        return Precision("bfloat16", f"cpu has {'+'.join(native)}")
    return Precision("float32", "cpu lacks native bf16 (avx512_bf16/amx_bf16)")
