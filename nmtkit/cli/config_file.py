"""``--config FILE.yaml`` and ``--dump-config``, which every command takes (:class:`nmtkit.cli.common.NmtkitCommand`).

Why click's ``default_map`` fed by PyYAML: the options stay declared once, on each command, and
each value in a file is checked with its option's own click type, so a bad one is named with
the file and key.
"""
from __future__ import annotations

from typing import Any, Optional

import click


class ConfigFileError(click.ClickException):
    """A bad ``--config`` file: ``prog: error: FILE: key 'K': why``, one line, status 1 (bad input)."""

    exit_code = 1  # nmtkit.cli.common.EXIT_ERROR: bad input

    def __init__(self, message: str, prog: str) -> None:
        super().__init__(message)
        self.prog = prog

    def show(self, file: Any = None) -> None:
        click.echo(f"{self.prog}: error: {' '.join(self.message.split())}", file=file, err=file is None)


#: ``ctx.meta`` key: ``--dump-config`` was given.
DUMP_CONFIG = "nmtkit.dump_config"
#: ``ctx.meta`` key: the effective configuration of the running command (what ``--dump-config``
#: prints and ``nmtkit-train`` writes to its save dir as config.yaml).
EFFECTIVE_CONFIG = "nmtkit.config"


def _config_params(command: click.Command) -> dict[str, click.Parameter]:
    """Key -> parameter for a config file: each parameter's name (``max_tokens``, what
    ``--dump-config`` writes) and its long flags without dashes (``max-tokens``)."""
    out: dict[str, click.Parameter] = {}
    for param in command.params:
        if not param.expose_value or param.name is None or param.name in ("config", "dump_config"):
            continue
        out[param.name] = param
        for opt in getattr(param, "opts", []):
            if opt.startswith("--"):
                out[opt[2:]] = param
                out[opt[2:].replace("-", "_")] = param
    return out


def load_config(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> None:
    """``--config FILE.yaml`` (eager, so before every other option): its keys become the
    command's defaults (click's ``default_map``), which the command line overrides.  Each value
    is checked with its option's own type, so a bad one is named with the file and key."""
    if value is None or ctx.resilient_parsing:
        return
    import yaml

    command = ctx.command
    prog = getattr(command, "prog", None) or f"nmtkit-{command.name}"
    try:
        with open(value, encoding="utf-8") as fh:
            loaded = yaml.safe_load(fh)
    except OSError as exc:
        raise ConfigFileError(f"{value}: {exc.strerror or exc}", prog) from None
    except UnicodeDecodeError as exc:
        raise ConfigFileError(f"{value}: invalid UTF-8 at byte {exc.start}", prog) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigFileError(f"{value}{where}: not valid YAML ({getattr(exc, 'problem', None) or exc})", prog) from None
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise ConfigFileError(f"{value}: a config file is a mapping of option names to values, not a {type(loaded).__name__}", prog)
    known = _config_params(command)
    defaults: dict[str, Any] = {}
    for key, val in loaded.items():
        target = known.get(str(key))
        if target is None:
            import difflib

            close = difflib.get_close_matches(str(key), [p.name for p in known.values() if p.name], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigFileError(f"{value}: key {key!r} is not an option of {prog}{hint}", prog)
        if val is not None:
            try:
                target.type_cast_value(ctx, list(val) if isinstance(val, (list, tuple)) else val)
            except click.BadParameter as exc:
                raise ConfigFileError(f"{value}: key {key!r}: {exc.format_message()}", prog) from None
            except (TypeError, ValueError) as exc:
                raise ConfigFileError(f"{value}: key {key!r}: {exc}", prog) from None
        defaults[target.name] = val  # type: ignore[index]
    ctx.default_map = {**(ctx.default_map or {}), **defaults}


def want_dump(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        ctx.meta[DUMP_CONFIG] = True


def effective_config(params: dict[str, Any]) -> dict[str, Any]:
    """A command's parsed parameters as plain YAML values (tuples as lists), in declaration order."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}


def dump_config(config: dict[str, Any]) -> str:
    """``config`` as the YAML that ``--config`` reads back."""
    import yaml

    return yaml.safe_dump(config, sort_keys=False, allow_unicode=True, default_flow_style=False)
