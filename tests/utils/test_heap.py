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
