"""``train_log.jsonl``: one JSON record per line, appended, and valid JSON whatever happens.

Why a module: ``json.dumps`` writes a NaN loss as bare ``NaN``, which no strict JSON reader
accepts; and a record appended onto a full disk could be left half-written, so that the next
record continues a torn line.  Here non-finite numbers become ``null`` and a failed append is
taken back (the log ends with its last complete record) before the one-line error.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path
from typing import Any

from nmtkit.utils.textio import output_error


def finite_or_null(value: Any) -> Any:
    """``value`` with every NaN or infinite float (also inside dicts and lists) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(v) for v in value]
    return value


def record_line(record: dict) -> str:
    """One record as strict JSON (no ``NaN``/``Infinity``), without the newline."""
    return json.dumps(finite_or_null(record), allow_nan=False)


def append_record(path: str | os.PathLike, record: dict) -> None:
    """Append ``record`` as one line; on failure (full disk, ``ulimit -f``) truncate the partial
    line away and raise an :class:`~nmtkit.errors.OutputError` naming ``path``."""
    data = (record_line(record) + "\n").encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    except OSError as exc:
        raise output_error(exc, Path(path)) from exc
    try:
        start = os.lseek(fd, 0, os.SEEK_END)
        view = memoryview(data)
        while view:  # os.write may write part of it (the disk filled up on the way)
            view = view[os.write(fd, view):]
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
        raise output_error(exc, Path(path)) from exc
    finally:
        os.close(fd)
