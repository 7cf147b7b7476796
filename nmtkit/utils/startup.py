"""Start-up of an inference command without the cyclic garbage collector walking what it builds.

Why: importing torch and sacremoses, loading a model and building the BPE tables create a few
hundred thousand objects that live until the process ends.  CPython's collector is triggered by
allocation counts, so it ran several full collections over that growing heap during start-up,
none of which could free anything: 0.2 s of `import torch, sacremoses` (0.91 against 0.71 s)
and 0.07 s of building the BPE tables on this project's CPU, 6 % of translating Multi30k's test
set with the int8 fast path (bench/README.md).  :func:`long_lived` pauses the collector for the
block and then freezes what the block built (:func:`gc.freeze`), so that later collections,
run as usual, no longer walk it.  Cyclic garbage made in the block is freed at the end of the
process rather than collected: start-up makes little of it.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def long_lived() -> Iterator[None]:
    """Run the block with the collector paused; what is alive after it is frozen (kept out of
    every later collection) and the collector runs again as it did before."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
