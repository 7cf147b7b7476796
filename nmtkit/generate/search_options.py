"""The search's settings, with their one default and their one check.

Why a module of its own, free of torch: ``nmtkit-translate``'s flags take their defaults from
:class:`SearchOptions` when the command is defined, and ``--help`` must not wait for torch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from nmtkit.errors import NmtkitError
from nmtkit.utils.checks import finite_message, require_at_least, require_at_most, require_choice

#: Length penalty forms (see :mod:`nmtkit.generate.search.rules`).
LENPEN_FORMS = ("fairseq", "gnmt")

#: Upper bounds (absolute, for the penalties): far beyond any use, and inside what the search's
#: arithmetic holds; larger values overflowed (a length ** lenpen, an int64 length, an inf score).
LIMITS = {"--beam": 100_000, "--max-len-a": 1000.0, "--max-len-b": 1_000_000, "--lenpen": 10.0, "--unkpen": 1000.0}


def check_search_options(o: "SearchOptions") -> None:
    """The library's one check of the search options, in the words the command line's option
    types use too (:mod:`nmtkit.utils.checks`); every :class:`SearchOptions` runs it when made."""
    require_at_least("--beam", o.beam, 1)
    require_at_least("--nbest", o.nbest, 1)
    if o.nbest > o.beam:
        raise NmtkitError(f"--nbest must be <= --beam ({o.beam}), got {o.nbest}")
    require_at_least("--min-len", o.min_len, 0)
    require_at_least("--max-len-b", o.max_len_b, 0)
    for flag, value in (("--max-len-a", o.max_len_a), ("--lenpen", o.lenpen), ("--unkpen", o.unkpen)):
        if not math.isfinite(value):
            raise NmtkitError(finite_message(flag, value))
    require_at_least("--max-len-a", o.max_len_a, 0)
    for flag, value in (("--beam", o.beam), ("--max-len-a", o.max_len_a), ("--max-len-b", o.max_len_b)):
        require_at_most(flag, value, LIMITS[flag])
    for flag, value in (("--lenpen", o.lenpen), ("--unkpen", o.unkpen)):
        require_at_least(flag, value, -LIMITS[flag])
        require_at_most(flag, value, LIMITS[flag])
    require_choice("--lenpen-form", o.lenpen_form, LENPEN_FORMS)
    check_length_bounds(o.max_len_a, o.max_len_b, o.min_len)


def check_length_bounds(max_len_a: float, max_len_b: int, min_len: int) -> None:
    """Refuse length settings that leave no room for a translation: an output bound
    ``int(a * source tokens + b)`` of 0 for a one-token source (every such line empty), or a
    ``--min-len`` above it (``</s>`` forced at the bound would cut those outputs mid-sentence).
    The one-token source has the smallest bound of any non-empty line."""
    bound = int(max_len_a + max_len_b)
    shown = f"int({max_len_a:g} * 1 + {max_len_b}) = {bound}"
    if bound < 1:
        raise NmtkitError(f"--max-len-a {max_len_a:g} --max-len-b {max_len_b} allow no output token for a one-token "
                          f"source ({shown}): its translation would be empty; raise --max-len-b")
    if min_len > bound:
        raise NmtkitError(f"--min-len {min_len} is above the output bound of a one-token source ({shown}, from "
                          "--max-len-a and --max-len-b): such translations would be cut at the bound; lower --min-len "
                          "or raise --max-len-b")


@dataclass(frozen=True)
class SearchOptions:
    """Every setting of the search, with its one default (``nmtkit-translate``'s flags, the
    library, validation BLEU during training).  Checked once, when made
    (:func:`check_search_options`): a bad value is a one-line :class:`NmtkitError` naming the flag."""

    beam: int = 5
    nbest: int = 1
    max_len_a: float = 1.5
    max_len_b: int = 10
    min_len: int = 1
    lenpen: float = 1.0
    lenpen_form: str = "fairseq"
    unkpen: float = 0.0

    def __post_init__(self) -> None:
        check_search_options(self)

