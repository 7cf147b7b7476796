"""``nmtkit-train``'s model flags, made from the registered models' Config dataclasses (as
fairseq derives its parser from dataclasses), so an option is declared once, where the model is.

Every field becomes ``--field-name`` with its declared type (bools ``--x/--no-x``) and the help
given to :func:`nmtkit.models.common.option`; defaults are None ("not given"), so the ``--arch``
preset, then the Config default, fill it.  Only the type is checked here: whether a value is in
range is the Config's ``validate()`` to say, with its own message (one check, one wording).
"""
from __future__ import annotations

import json
from typing import Any, Callable, Optional

import click

from nmtkit.cli.common import FiniteFloat
from nmtkit.errors import NmtkitError

__all__ = ["model_options", "pop_model_overrides", "parse_model_opts"]

_TYPES: dict[type, click.ParamType] = {int: click.INT, float: FiniteFloat(), str: click.STRING}


def _registry() -> Any:
    from nmtkit.models import registry  # registers every model

    return registry.REGISTRY


def _flag(opt: Any, n_models: int) -> Callable:
    """The click option of one :class:`~nmtkit.models.registry.ModelOption`."""
    dashed = "--" + opt.name.replace("_", "-")
    helptext = opt.help
    if len(opt.models) < n_models:  # say which models have it
        helptext = f"{', '.join(opt.models)}: {helptext}"
    if opt.type is bool:
        return click.option(f"{dashed}/--no-{dashed[2:]}", opt.name, default=None, help=helptext)
    metavar = "|".join(opt.choices) if opt.choices else None
    return click.option(dashed, opt.name, type=_TYPES[opt.type], default=None, metavar=metavar, help=helptext)


def model_options(registry: Optional[Any] = None) -> Callable[[Callable], Callable]:
    """Decorator adding one flag per model option of ``registry`` (default: nmtkit's), then
    ``--model-opt KEY=VALUE`` for any option, including those declared ``flag=False``."""
    registry = registry or _registry()
    options = [o for o in registry.model_options().values() if o.flag]
    n_models = len(registry.models)

    def deco(fn: Callable) -> Callable:
        fn = click.option("--model-opt", multiple=True, metavar="KEY=VALUE",
                          help="Any model option (repeatable). Model options left unset take the --arch "
                               "preset's value (--list-archs NAME shows them).")(fn)
        for opt in reversed(options):  # click lists options in decorator order, top first
            fn = _flag(opt, n_models)(fn)
        return fn

    return deco


def pop_model_overrides(kw: dict[str, Any], registry: Optional[Any] = None) -> dict[str, Any]:
    """Take the model flags and ``--model-opt`` pairs out of a command's parameters:
    option name -> value (None: not given)."""
    registry = registry or _registry()
    out = {name: kw.pop(name) for name, o in registry.model_options().items() if o.flag and name in kw}
    out.update(parse_model_opts(kw.pop("model_opt", ())))
    return out


def parse_model_opts(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``("window=5", "cell=gru")`` -> ``{"window": 5, "cell": "gru"}`` (JSON values, else strings)."""
    out = {}
    for item in pairs:
        if "=" not in item:
            raise NmtkitError(f"--model-opt expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        try:
            out[key.replace("-", "_")] = json.loads(value)
        except json.JSONDecodeError:
            out[key.replace("-", "_")] = value
        except RecursionError:
            raise NmtkitError(f"--model-opt {key}: the value is nested too deeply") from None
    return out
