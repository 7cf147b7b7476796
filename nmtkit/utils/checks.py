"""The one wording of "this option's value is out of range", used by the library's checks and by
the command line's option types alike.

Why: a value click refuses when parsing (``--beam 0``) and the same value reaching the library
from Python (``Translator.from_checkpoint(beam=0)``) must read the same, so neither words it
on its own.  No click and no torch here: the library imports this.
"""
from __future__ import annotations

import os
from typing import Iterable

from nmtkit.errors import NmtkitError


def at_least_message(name: str, value: object, low: float) -> str:
    """``name must be >= low, got value`` (the models' Config checks read the same)."""
    return f"{name} must be >= {low}, got {value}"


def at_most_message(name: str, value: object, high: float) -> str:
    """``name must be <= high, got value``: the bounds that keep a value inside what torch and
    Python's floats can hold (a larger one was an overflow traceback, not a message)."""
    return f"{name} must be <= {high:g}, got {value}" if isinstance(high, float) else f"{name} must be <= {high}, got {value}"


def finite_message(name: str, value: object) -> str:
    """``name must be a finite number, got nan``."""
    return f"{name} must be a finite number, got {value}"


def one_of_message(name: str, value: object, choices: Iterable[str]) -> str:
    """``name must be one of a, b; got 'x'``."""
    return f"{name} must be one of {', '.join(choices)}; got {value!r}"


def require(ok: bool, message: str) -> None:
    """Raise a one-line :class:`NmtkitError` when a check fails."""
    if not ok:
        raise NmtkitError(message)


def require_at_least(name: str, value: float, low: float) -> None:
    require(value >= low, at_least_message(name, value, low))


def require_at_most(name: str, value: float, high: float) -> None:
    require(value <= high, at_most_message(name, value, high))


def require_choice(name: str, value: str, choices: Iterable[str]) -> None:
    choices = tuple(choices)
    require(value in choices, one_of_message(name, value, choices))


def not_a_checkpoint_file(path: str) -> str:
    """Why ``path`` (no regular file) cannot be a checkpoint: absent, a directory, or a device,
    pipe or socket (read once, where a checkpoint is read several times)."""
    if not os.path.exists(path):
        return "no such checkpoint file"
    if os.path.isdir(path):
        return "is a directory, not a checkpoint file"
    return "is not a regular file (a device, pipe or socket), so not a checkpoint file"


def text_lines(value: object, what: str) -> list[str]:
    """``value`` as a list of ``str`` lines, or a :class:`TypeError` naming ``what``.

    Why: the command line reads lines from files, so every line is text; a library caller may
    pass one string (iterated, it is its characters: BLEU 0 without a word), bytes, None, or a
    list holding a number, and would get a wrong answer or a failure deep inside."""
    if isinstance(value, (str, bytes, bytearray)):
        raise TypeError(f"{what} must be a list of str lines, not one {type(value).__name__} "
                        "(wrap a single line in a list)")
    try:
        lines = list(value)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(f"{what} must be a list of str lines, not {type(value).__name__}") from None
    for k, line in enumerate(lines):
        if not isinstance(line, str):
            raise TypeError(f"{what}[{k}] must be a str line, not {type(line).__name__} {line!r:.40}")
    return lines
