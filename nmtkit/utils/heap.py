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

The price is fragmentation: with a large vocabulary those tensors are hundreds of megabytes,
their sizes change with every batch, and a freed block that is slightly too small for the next
request stays resident beside the new one.  A transformer_tiny run on Hansards (16k joint BPE)
grew from 1.8 to 6.4 GB in 20 minutes so, against 2.7 GB flat with the 64 MB threshold, which
was a third slower.  :class:`PeriodicRelease` hands the free pages inside the heap back to the
kernel (``malloc_trim``) every :data:`RELEASE_INTERVAL` updates: resident memory stays near
what a step uses, and only the step after each release page-faults its buffers afresh.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import platform
from typing import Optional

#: glibc's ``mallopt`` parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: Allocations up to this size come from the heap (and stay there when freed).
MMAP_THRESHOLD = 1 << 30
#: Training updates between two releases of the heap's free pages.
RELEASE_INTERVAL = 100


def _glibc() -> Optional[ctypes.CDLL]:
    """The C library when it is glibc on Linux, else None."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    return _load_libc()


@functools.lru_cache(maxsize=1)
def _load_libc() -> Optional[ctypes.CDLL]:
    """Loaded once: ``find_library`` runs ``ldconfig -p`` in a subprocess, a fork of the whole
    training process, which the periodic release would otherwise pay every time."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds; returns whether it applied (False off glibc/Linux)."""
    libc = _glibc()
    if libc is None:
        return False
    try:
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, 2 * MMAP_THRESHOLD - 1))
    except AttributeError:
        return False


def release_free_pages() -> bool:
    """Return the free pages inside the heap to the kernel (``malloc_trim(0)``; glibc only):
    whether any were released."""
    libc = _glibc()
    try:
        return libc is not None and bool(libc.malloc_trim(0))
    except AttributeError:
        return False


class PeriodicRelease:
    """Calls :func:`release_free_pages` every ``interval`` updates (module docstring): the
    training loop ticks it after each update; disabled where the heap keeps nothing (not CPU)."""

    def __init__(self, enabled: bool, interval: int = RELEASE_INTERVAL) -> None:
        self.enabled, self.interval = enabled, interval

    def after_update(self, update: int) -> bool:
        """Whether this update released the heap's free pages."""
        return self.enabled and update % self.interval == 0 and release_free_pages()
