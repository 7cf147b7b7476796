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
def test_released_pages_leave_the_resident_set():
    """What a freed 256 MB block kept resident in the heap (keep_freed_memory) leaves after a release."""
    import torch

    def rss_mb() -> float:
        with open("/proc/self/status") as fh:
            return int(fh.read().split("VmRSS:")[1].split()[0]) / 1024

    heap.keep_freed_memory()
    keep = torch.ones(1 << 20)  # a live block above the freed one, so the heap's top cannot shrink past it
    block = torch.empty(1 << 26)  # 256 MB from the heap
    block.fill_(1.0)
    top = torch.ones(1 << 20)
    del block
    before = rss_mb()
    assert heap.release_free_pages() is True
    assert before - rss_mb() > 200
    del keep, top


def test_periodic_release_runs_every_interval_updates(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "release_free_pages", lambda: calls.append(1) or True)
    ticker = heap.PeriodicRelease(enabled=True, interval=3)
    assert [ticker.after_update(u) for u in range(1, 8)] == [False, False, True, False, False, True, False]
    assert len(calls) == 2
    assert heap.PeriodicRelease(enabled=False, interval=1).after_update(1) is False


def test_release_is_a_no_op_off_glibc(monkeypatch):
    monkeypatch.setattr(heap.platform, "libc_ver", lambda: ("musl", "1.2"))
    assert heap.release_free_pages() is False
