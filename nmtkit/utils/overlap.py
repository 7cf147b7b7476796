"""Outputs never replace inputs: one check that every command runs before it does any work.

Why: ``nmtkit-preprocess --trainpref corp/train --destdir corp --overwrite`` used to succeed and
delete the corpus it had just read, and ``--output`` equal to ``--input`` would replace the text
being translated.  Paths are compared as the file system sees them: symlinks and ``..`` resolved,
hard links and bind mounts caught by ``os.path.samefile`` where both exist.  An output is refused
when it *is* an input, *lies inside* an input directory, or (a directory) *contains* an input.
Standard streams (``-``) and devices (``/dev/null``) are never refused: writing them replaces
nothing.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional, Union

from nmtkit.errors import NmtkitError
from nmtkit.utils.stdio import direct_target, is_stdio

PathLike = Union[str, os.PathLike, None]


def _real(path: Union[str, os.PathLike]) -> Path:
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def _same(a: Union[str, os.PathLike], b: Union[str, os.PathLike]) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def relation(output: Union[str, os.PathLike], input_: Union[str, os.PathLike]) -> Optional[str]:
    """How ``output`` overlaps ``input_``: ``"is"``, ``"lies inside"``, ``"contains"`` or None."""
    if is_stdio(output) or is_stdio(input_) or direct_target(output) is not None:
        return None
    out, inp = _real(output), _real(input_)
    if out == inp or _same(output, input_):
        return "is"
    if inp in out.parents or any(_same(parent, input_) for parent in _existing_parents(out)):
        return "lies inside"
    if out in inp.parents:
        return "contains"
    return None


def _existing_parents(path: Path) -> list[Path]:
    """The existing directories above ``path`` (to catch an input directory reached by a bind mount)."""
    return [p for p in path.parents if p != Path(p.anchor) and p.is_dir()][:8]


def refuse_outputs_over_inputs(outputs: Iterable[tuple[str, PathLike]], inputs: Iterable[tuple[str, PathLike]]) -> None:
    """Raise a one-line :class:`NmtkitError` if an output is, lies inside or contains an input, or
    if two outputs are one file (devices and ``-`` excepted: writes to them do not replace).

    ``outputs`` and ``inputs`` are ``(option, path)`` pairs; None paths are skipped.  The message
    names both options and paths as the user gave them, and suggests no ``--overwrite``.
    """
    given_inputs: list[tuple[str, Union[str, os.PathLike]]] = [
        (opt, p) for opt, p in inputs if p is not None and os.fspath(p) != ""]
    given_outputs: list[tuple[str, Union[str, os.PathLike]]] = [
        (opt, p) for opt, p in outputs if p is not None and os.fspath(p) != ""]
    for k, (opt_a, a) in enumerate(given_outputs):  # two outputs in one file: the second would replace the first
        for opt_b, b in given_outputs[k + 1:]:
            if relation(b, a) == "is":
                raise NmtkitError(f"{os.fspath(b)}: {opt_b} is the same file as {opt_a} {os.fspath(a)}; "
                                  f"one would replace the other: give them different files")
    for out_opt, out in given_outputs:
        for in_opt, inp in given_inputs:
            rel = relation(out, inp)
            if rel is None:
                continue
            what = "is" if rel == "is" else rel
            raise NmtkitError(f"{os.fspath(out)}: {out_opt} {what} the input {os.fspath(inp)} ({in_opt}); "
                              f"nmtkit never writes over what it reads: choose another {out_opt}")
