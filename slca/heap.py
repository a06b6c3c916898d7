"""Keeping a long-running process's freed memory returnable to the system (glibc's malloc): the learner, `slca
sft` and the training benches (`learner.heap_mmap_threshold_kib`), and serve (`serve.heap_mmap_threshold_kib`).

glibc serves a request above its mmap threshold with its own mapping, unmapped on free; below it, from a heap
that returns memory only from its top. The threshold starts at 128 KiB but rises to the size of each mapped
block freed, up to 32 MiB — so after the first large free, the activations and logits of a training step (a few
MiB to ~30 MiB each, a different size every step) land in the heap, and its holes pile up: `slca bench sft` grew
to 24 GB RSS in 19 minutes and was OOM-killed on a 24 GiB machine. A fixed threshold stops the rise (glibc turns
its dynamic adjustment off once one is set): with 1 MiB the same bench peaked at ~11 GB and fell back to ~2 GB
between windows. The price is a page fault per touched page of each large tensor, small beside a step's
matmuls. In serve the holes sat in the per-thread arenas (64 MiB heaps) of the engine's threads instead."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys

M_MMAP_THRESHOLD = -3
"""mallopt's parameter number (malloc.h)."""
ENV = "MALLOC_MMAP_THRESHOLD_"
log = logging.getLogger(__name__)


def fix_mmap_threshold(kib: int) -> bool:
    """Set glibc's mmap threshold to `kib` KiB for this process (0: leave glibc's dynamic threshold). The
    operator's own `MALLOC_MMAP_THRESHOLD_` wins (glibc read it at start). False where nothing was set: not
    Linux/glibc, disabled, or refused."""
    if kib <= 0 or ENV in os.environ or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others have no mallopt
        return False
    ok = bool(mallopt(M_MMAP_THRESHOLD, int(kib) * 1024))
    if not ok:
        log.warning("mallopt(M_MMAP_THRESHOLD, %d KiB) refused; freed training memory may stay in the heap", kib)
    return ok
