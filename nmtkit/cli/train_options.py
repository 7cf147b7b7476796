"""``nmtkit-train``'s training flags, made from :class:`~nmtkit.train.options.TrainOptions`
(each field's :class:`~nmtkit.train.options.Flag`), as :mod:`nmtkit.cli.model_options` makes the
model flags from the models' Configs: an option, its default and its help are declared once,
where the option is.

A field becomes ``--field-name`` (or its ``Flag.name``) with the default's type and the flag's
range or choices; a bool is a switch (``--no-x`` for one that is on by default).  Fields the
flag marks ``preset`` default to None here ("not given"): the ``--arch`` preset's value, else
the field's default, fills them (:func:`nmtkit.train.options.resolve_train_options`).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import click

from nmtkit.cli.common import SEED, AtLeast, FiniteFloat
from nmtkit.generate.search_options import LIMITS as SEARCH_LIMITS
from nmtkit.train.options import Flag, TrainOptions

__all__ = ["train_options", "train_option_values"]


def _flagged() -> list[tuple[dataclasses.Field, Flag]]:
    return [(f, f.metadata["flag"]) for f in dataclasses.fields(TrainOptions) if "flag" in f.metadata]


def _type(default: Any, flag: Flag) -> click.ParamType:
    if flag.kind == "dir":
        return click.Path(file_okay=False)
    if flag.kind == "seed":
        return SEED
    if flag.kind == "beam":
        return AtLeast(1, int(SEARCH_LIMITS["--beam"]))
    if flag.choices:
        return click.Choice(flag.choices)
    sample = default[0] if isinstance(default, tuple) else default
    if isinstance(sample, int) and not isinstance(sample, bool):
        lo = None if flag.lo is None else int(flag.lo)
        hi = None if flag.hi is None else int(flag.hi)
        return click.IntRange(min=lo, max=hi)
    if isinstance(sample, float) or (sample is None and (flag.lo is not None or flag.hi is not None)):
        return FiniteFloat(flag.lo, flag.hi, min_open=flag.lo_open, max_open=flag.hi_open)
    return click.STRING


def _option(f: dataclasses.Field, flag: Flag) -> Callable:
    """The click option of one training option."""
    dashed = flag.name or "--" + f.name.replace("_", "-")
    helptext = flag.help or None
    if isinstance(f.default, bool):
        if f.default:  # on by default: the flag turns it off
            return click.option(dashed, f.name, is_flag=True, flag_value=False, default=True, help=helptext)
        return click.option(dashed, f.name, is_flag=True, help=helptext)
    default = None if flag.preset else f.default
    return click.option(dashed, f.name, type=_type(f.default, flag), default=default, nargs=flag.nargs,
                        show_default=not flag.preset and default is not None, metavar=flag.metavar, help=helptext)


def train_options() -> Callable[[Callable], Callable]:
    """Decorator adding one flag per training option that has a :class:`Flag`."""

    def deco(fn: Callable) -> Callable:
        for f, flag in reversed(_flagged()):  # click lists options in decorator order, top first
            fn = _option(f, flag)(fn)
        return fn

    return deco


def train_option_values(kw: dict[str, Any]) -> dict[str, Any]:
    """The training options among a command's parameters (by field name)."""
    names = {f.name for f in dataclasses.fields(TrainOptions)}
    return {k: v for k, v in kw.items() if k in names}
