"""Keeping a long-running process's freed memory returnable to the system (glibc's malloc): the learner, `slca
sft` and the training benches (`learner.heap_mmap_threshold_kib`), and serve (`serve.heap_mmap_threshold_kib`).

glibc serves a request above its mmap threshold with its own mapping, unmapped on free; below it, from a heap
that returns memory only from its top. The threshold starts at 128 KiB but rises to the size of each mapped
block freed, up to 32 MiB — so after the first large free, the activations and logits of a training step (a few
MiB to ~30 MiB each, a different size every step) land in the heap, and its holes pile up: `slca bench sft` grew
to 24 GB RSS in 19 minutes and was OOM-killed on a 24 GiB machine. A fixed threshold stops the rise (glibc turns
its dynamic adjustment off once one is set): with 1 MiB the same bench peaked at ~11 GB and fell back to ~2 GB
between windows. The price is a page fault per touched page of each large tensor, small beside a step's
matmuls. In serve the holes sat in the per-thread arenas (64 MiB heaps) of the engine's threads instead.

What stays below the threshold (the blocks of under 1 MiB a swap or a step frees: small tensors, Python objects,
buffers of the threads that read and hash the files) still fragments those arenas, and a heap returns only its top:
serve grew ≈ 18 MiB per swap and the learner ≈ 460 MiB in 20 steps in a 45-minute soak. `trim` (glibc's
`malloc_trim(0)`: every arena's free pages, anywhere in the heap, given back with `madvise`) after each swap and
each step returns them; `serve.heap_trim_after_swap`, `learner.heap_trim_after_step`."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
import sys

M_MMAP_THRESHOLD = -3
"""mallopt's parameter number (malloc.h)."""
ENV = "MALLOC_MMAP_THRESHOLD_"
log = logging.getLogger(__name__)


@functools.cache
def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def trim() -> bool:
    """Give the free pages of every malloc arena back to the system (glibc's `malloc_trim(0)`; milliseconds for a
    few GiB of heap). True when some memory was released; False where it released none or there is no glibc."""
    if not sys.platform.startswith("linux"):
        return False
    malloc_trim = getattr(_libc(), "malloc_trim", None)
    if malloc_trim is None:  # musl and others
        return False
    return bool(malloc_trim(0))


def fix_mmap_threshold(kib: int) -> bool:
    """Set glibc's mmap threshold to `kib` KiB for this process (0: leave glibc's dynamic threshold). The
    operator's own `MALLOC_MMAP_THRESHOLD_` wins (glibc read it at start). False where nothing was set: not
    Linux/glibc, disabled, or refused."""
    if kib <= 0 or ENV in os.environ or not sys.platform.startswith("linux"):
        return False
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:  # musl and others have no mallopt
        return False
    ok = bool(mallopt(M_MMAP_THRESHOLD, int(kib) * 1024))
    if not ok:
        log.warning("mallopt(M_MMAP_THRESHOLD, %d KiB) refused; freed training memory may stay in the heap", kib)
    return ok


def own_memory_mib(field: str = "VmRSS") -> float:
    """This process's `field` of /proc/self/status in MiB (VmRSS: resident now, VmHWM: its peak); 0 elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def available_memory_mib(meminfo: str = "/proc/meminfo") -> float | None:
    """The machine's memory available to a new allocation (MemAvailable: free plus what the kernel can reclaim)
    in MiB; None where the kernel does not say."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


ONEDNN_CACHES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")
"""oneDNN's own primitive cache, and the LRU cache torch's mkldnn bridge (ideep) keeps of primitives and their
descriptors: both 1,024 entries by default, both keyed by shape."""


def bound_onednn_cache(entries: int) -> bool:
    """oneDNN (torch's and vLLM's CPU matmuls: bf16 on CPUs that compute it natively) caches a compiled primitive per
    shape, and torch's bridge to it (ideep) another LRU of them — each 1,024 entries by default at up to ~2 MiB an
    entry — so a process that meets new lengths (a server's prompts, a learner's groups) keeps climbing. Bound both
    before the first primitive exists (each variable is read once): with only oneDNN's bounded a learner of varied
    lengths still grew 8 MiB a step, with neither 14, with fixed lengths 0 (bench/learner-memory/growth). An
    operator's own setting of either variable wins; `entries` 0 leaves both defaults. Whether this call set any."""
    if entries <= 0:
        return False
    unset = [name for name in ONEDNN_CACHES if name not in os.environ]
    for name in unset:
        os.environ[name] = str(entries)
    return bool(unset)
