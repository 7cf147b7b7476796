"""keep_freed_memory: applies on glibc Linux, a no-op elsewhere."""
from __future__ import annotations

import platform

import pytest

from nmtkit.utils import heap


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_it_applies_on_glibc_and_can_be_repeated():
    assert heap.keep_freed_memory() is True
    assert heap.keep_freed_memory() is True


def test_it_is_a_no_op_off_glibc(monkeypatch):
    monkeypatch.setattr(heap.platform, "libc_ver", lambda: ("musl", "1.2"))
    assert heap.keep_freed_memory() is False
    monkeypatch.setattr(heap.platform, "system", lambda: "Darwin")
    assert heap.keep_freed_memory() is False


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_freed_memory_goes_back_to_the_kernel():
    """After keep_freed_memory, a freed 200 MB buffer stays resident until release_freed_memory."""
    import torch

    def rss_mb() -> float:
        with open("/proc/self/status", encoding="ascii") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS")) / 1024

    heap.keep_freed_memory()
    buf = torch.ones(50_000_000)  # 200 MB, from the heap (below the raised mmap threshold), touched
    del buf
    kept = rss_mb()
    assert heap.release_freed_memory() is True
    assert rss_mb() < kept - 150


def test_release_is_a_no_op_off_glibc(monkeypatch):
    monkeypatch.setattr(heap.platform, "libc_ver", lambda: ("musl", "1.2"))
    assert heap.release_freed_memory() is False
