"""A small checker for the nested dicts nmtkit reads back (checkpoints, ``meta.json``).

Why: a file with the right format but the wrong contents (hand-made, edited, or written by
another nmtkit version) would otherwise fail deep inside torch or the registry with a
``KeyError``/``TypeError`` traceback.  Checking it against a schema when it is read turns that
into one line naming the file and the field (``ckpt.pt: field 'model_name' missing``).

A schema is a plain value:

* a type (``str``, ``int``, ``float``, ``bool``, ``dict``, ``list`` or any class): ``isinstance``
  (``bool`` is never taken as ``int``/``float``; an ``int`` is a ``float``);
* a dict ``{"name": spec, "name?": spec}``: an object with those fields (``?``: may be
  absent); other fields are allowed (newer writers may add some);
* :class:`ListOf`, :class:`DictOf`, :class:`Choice`, :class:`Nullable`, :class:`Check`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from nmtkit.errors import InputError

_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
               dict: "an object", list: "a list"}


@dataclass(frozen=True)
class ListOf:
    """A list whose every item matches ``item``."""

    item: Any


@dataclass(frozen=True)
class DictOf:
    """An object with string keys whose every value matches ``value`` and, given ``key`` (a
    :class:`Check`), every key passes it: keys that become file names (a data directory's splits)."""

    value: Any
    key: Optional["Check"] = None


@dataclass(frozen=True)
class Choice:
    """One of a few fixed values."""

    values: tuple


@dataclass(frozen=True)
class Nullable:
    """``spec`` or ``None``."""

    spec: Any


@dataclass(frozen=True)
class Check:
    """Any value for which ``test`` is true; ``description`` completes "must be ..."."""

    test: Callable[[Any], bool]
    description: str


def describe(spec: Any) -> str:
    """What a value matching ``spec`` is, for "field 'x' must be ..."."""
    if isinstance(spec, dict):
        return "an object"
    if isinstance(spec, ListOf):
        return "a list"
    if isinstance(spec, DictOf):
        return "an object"
    if isinstance(spec, Choice):
        return "one of " + ", ".join(repr(v) for v in spec.values)
    if isinstance(spec, Nullable):
        return describe(spec.spec) + " or null"
    if isinstance(spec, Check):
        return spec.description
    return _TYPE_NAMES.get(spec, f"a {getattr(spec, '__name__', spec)}")


def _is_instance(value: Any, typ: type) -> bool:
    if typ in (int, float) and isinstance(value, bool):
        return False
    if typ is float:
        return isinstance(value, (int, float))
    return isinstance(value, typ)


def _matches_shallow(value: Any, spec: Any) -> bool:
    if isinstance(spec, (dict, DictOf)):
        return isinstance(value, dict)
    if isinstance(spec, ListOf):
        return isinstance(value, list)
    if isinstance(spec, Choice):
        return any(type(value) is type(v) and value == v for v in spec.values)
    if isinstance(spec, Nullable):
        return value is None or _matches_shallow(value, spec.spec)
    if isinstance(spec, Check):
        return bool(spec.test(value))
    return _is_instance(value, spec)


def validate(value: Any, spec: Any, path: str, field: str = "") -> None:
    """Raise an :class:`InputError` naming ``path`` and the first field of ``value`` that does
    not match ``spec`` (``field``: where ``value`` sits, empty for the whole file)."""
    if not _matches_shallow(value, spec):
        got = type(value).__name__
        what = f"field '{field}' must be" if field else "must be"
        raise InputError(path, None, f"{what} {describe(spec)}, not {got} {_short(value)}".rstrip())
    if isinstance(spec, Nullable):
        if value is not None:
            validate(value, spec.spec, path, field)
    elif isinstance(spec, dict):
        for key, sub in spec.items():
            name = key.rstrip("?")
            if name not in value:
                if key.endswith("?"):
                    continue
                raise InputError(path, None, f"field '{_join(field, name)}' missing")
            validate(value[name], sub, path, _join(field, name))
    elif isinstance(spec, DictOf):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InputError(path, None, f"field '{field}' has a key that is not a string: {_short(key)}")
            if spec.key is not None and not spec.key.test(key):
                raise InputError(path, None, f"field '{field}' has a key that must be {spec.key.description}, not {_short(key)}")
            validate(item, spec.value, path, _join(field, key))
    elif isinstance(spec, ListOf):
        for k, item in enumerate(value):
            validate(item, spec.item, path, f"{field}[{k}]")


def _join(field: str, name: str) -> str:
    return f"{field}.{name}" if field else name


def _short(value: Any) -> str:
    """A value as it may appear in a one-line message (scalars only, cut short)."""
    if isinstance(value, (dict, list, tuple)) or value is None or hasattr(value, "shape"):
        return ""
    text = repr(value)
    return f"({text[:40]}...)" if len(text) > 40 else f"({text})"
