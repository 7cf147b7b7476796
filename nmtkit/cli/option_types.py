"""The option types of nmtkit's commands: numbers that must be finite or within a range, and
choices, refused in the library's own words (:mod:`nmtkit.utils.checks`), so that a bad value
reads the same from the command line and from Python."""
from __future__ import annotations

from typing import Any, Optional

import click

from nmtkit.utils.checks import at_least_message, at_most_message, finite_message, one_of_message


class FiniteFloat(click.FloatRange):
    """A float option that must be a finite number (click's ``FloatRange`` lets ``nan`` and
    ``inf`` through, and a ``nan`` learning rate or length penalty fails silently later)."""

    name = "float"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        import math

        out = super().convert(value, param, ctx)
        if out is not None and not math.isfinite(out):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return out

    def _describe_range(self) -> str:
        """No ``[x<=None]`` in ``--help`` for a float without bounds."""
        return "" if self.min is None and self.max is None else super()._describe_range()


def _flag_name(param: Any) -> str:
    opts = getattr(param, "opts", None) or [getattr(param, "name", "value")]
    return next((o for o in opts if o.startswith("--")), opts[0])


class AtLeast(click.IntRange):
    """An int option ``>= low`` (and ``<= high`` where given) refused in the library's words
    (:mod:`nmtkit.utils.checks`), for options the library checks too: ``--beam 0`` and
    ``--beam 100001`` read the same from the command line and from Python, and both are usage errors."""

    def __init__(self, low: int, high: Optional[int] = None) -> None:
        super().__init__(min=low, max=high)
        self.low = low

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        out = click.INT.convert(value, param, ctx)  # not a number: click's own message
        if out < self.low:
            raise click.UsageError(at_least_message(_flag_name(param), out, self.low), ctx)
        if self.max is not None and out > self.max:
            raise click.UsageError(at_most_message(_flag_name(param), out, self.max), ctx)
        return out


class Within(FiniteFloat):
    """A finite float option inside ``[low, high]`` (either end may be open), refused in the
    library's words as :class:`AtLeast` is: the search's bounds (:data:`nmtkit.generate.search_options.LIMITS`)
    are usage errors on the command line and the same message from Python."""

    def __init__(self, low: Optional[float] = None, high: Optional[float] = None) -> None:
        super().__init__(min=low, max=high)

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        import math

        out = click.FLOAT.convert(value, param, ctx)  # not a number: click's own message
        if not math.isfinite(out):
            raise click.UsageError(finite_message(_flag_name(param), out), ctx)
        if self.min is not None and out < self.min:
            raise click.UsageError(at_least_message(_flag_name(param), out, self.min), ctx)
        if self.max is not None and out > self.max:
            raise click.UsageError(at_most_message(_flag_name(param), out, self.max), ctx)
        return out


class OneOf(click.Choice):
    """A choice refused in the library's words (:func:`nmtkit.utils.checks.one_of_message`)."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            raise click.UsageError(one_of_message(_flag_name(param), value, self.choices), ctx) from None


#: ``--seed``: what ``torch.manual_seed`` accepts (a larger one was an overflow traceback).
SEED = click.IntRange(0, 2**64 - 1)
