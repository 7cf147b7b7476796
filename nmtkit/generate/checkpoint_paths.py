"""``--path`` values as checkpoint file names: the one split and check.

Why a module of its own, free of torch: the commands check that no output replaces a checkpoint,
and that the checkpoints exist, before they import torch (slow) and load a model, so that
a wrong path is a one-line error at once.
"""
from __future__ import annotations

import os
from typing import Sequence, Union

from nmtkit.errors import InputError, NmtkitError
from nmtkit.utils.checks import not_a_checkpoint_file

PathsLike = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]


def split_checkpoint_paths(text: str) -> list[str]:
    """``--path``'s value as file names: ``a.pt:b.pt`` is two, but ``:``-separated parts that
    together name an existing file are that file (``run:1/a.pt:run:1/b.pt`` is two checkpoints in
    ``run:1``; the longest such name wins); an empty name between ``:``s is refused, not skipped.
    The one split, for loading and for the commands' checks that no output replaces a checkpoint."""
    parts = text.split(":")
    if len(parts) > 1 and not all(parts):
        if os.path.isfile(text):
            return [text]
        raise NmtkitError(f"--path {text!r}: an empty checkpoint name between ':'s")
    items, i = [], 0
    while i < len(parts):
        j = next((j for j in range(len(parts), i + 1, -1) if os.path.isfile(":".join(parts[i:j]))), i + 1)
        items.append(":".join(parts[i:j]))
        i = j
    return items


def checkpoint_paths(paths: PathsLike) -> list[str]:
    """``"a.pt:b.pt"``, a path or a list of paths -> the checkpoint files, each of which must exist
    (checked before any is loaded, so a typo in the second costs no loading of the first).
    A string that names an existing file is that one file, even with a ``:`` in its name; an
    empty name between ``:``s (``a.pt::b.pt``, a trailing ``:``) is refused, not skipped."""
    if isinstance(paths, (str, os.PathLike)):
        items = split_checkpoint_paths(os.fspath(paths))
    else:
        items = [os.fspath(p) for p in paths]
    if not items:
        raise NmtkitError("--path needs at least one checkpoint file")
    for p in items:
        if not os.path.isfile(p):
            raise InputError(p, None, not_a_checkpoint_file(p))
    return items
