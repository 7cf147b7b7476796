"""Keep freed memory in the process for the next training step (glibc's ``mallopt``).

Why: glibc serves an allocation above its mmap threshold (at most 32 MiB, however it adapts)
with a fresh ``mmap`` and returns it to the kernel on ``free``, so each such tensor costs a page
fault and a kernel zero-fill for every 4 KiB page it touches.  A training step of a Multi30k-sized
model allocates several of them (the ``[tokens, vocabulary]`` logits, log-probabilities and their
gradients, about 40 MB each) and frees them again.  A fresh buffer of that size cost several
times one from memory the process kept, and training ran faster so (bench/README.md).  PyTorch
has no caching allocator on the CPU, so the heap is told to keep what it frees instead: the process's resident memory then stays
at its peak rather than returning freed buffers to the system, which a training run reaches
again at the next long batch anyway.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import platform

#: glibc's ``mallopt`` parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: Allocations up to this size come from the heap (and stay there when freed).
MMAP_THRESHOLD = 1 << 30


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds; returns whether it applied (False off glibc/Linux)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, 2 * MMAP_THRESHOLD - 1))
    except (OSError, AttributeError):
        return False
