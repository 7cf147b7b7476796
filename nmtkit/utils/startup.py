"""Start-up of an inference command without the cyclic garbage collector walking what it builds.

Why: importing torch and sacremoses, loading a model and building the BPE tables create a few
hundred thousand objects that live until the process ends.  CPython's collector is triggered by
allocation counts, so it ran several full collections over that growing heap during start-up,
none of which could free anything: a sizeable share of a short translate command's start-up
(bench/README.md).  :func:`long_lived` pauses the collector (for the
whole process) during the block, then moves every object it tracks at that point, the block's
and any left from before, into the permanent generation (:func:`gc.freeze`), so that later
collections, run as usual, no longer walk them.  Cyclic garbage made in the block is therefore
kept until the process ends: start-up makes little of it, and a command runs it once.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def long_lived() -> Iterator[None]:
    """Run the block with the collector paused; then every tracked object is frozen (kept out of
    every later collection) and the collector runs again if it ran before."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
