"""``train_log.jsonl``: one JSON record per line, appended, valid JSON whatever happens, and
repaired when a resumed run redoes updates.

Why a module: ``json.dumps`` writes a NaN loss as bare ``NaN``, which no strict JSON reader
accepts; and a record appended onto a full disk could be left half-written, so that the next
record continues a torn line.  Here non-finite numbers become ``null`` and a failed append is
taken back (the log ends with its last complete record) before the one-line error.

Repair: after ``kill -9`` the log holds records written after checkpoint_last.pt, for updates
the resumed run trains (and logs) again.  Each checkpoint stores how many records the log had
(:meth:`RunLog.count`), so :meth:`RunLog.prune` can cut back to it.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Optional

from nmtkit.utils.textio import atomic_write, output_error

#: Events that record the history of runs rather than work of an update: kept when a resumed run
#: drops the records of updates it redoes.
LOG_HISTORY_EVENTS = ("start", "end", "interrupted", "early_stop", "diverged")


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


class RunLog:
    """The ``train_log.jsonl`` of one save dir, written by the main process only (``enabled``):
    appends timestamped records and keeps count of them, so that a checkpoint can say how much of
    the log its state has written."""

    def __init__(self, path: Path, enabled: bool = True) -> None:
        self.path = path
        self.enabled = enabled
        self._records: Optional[int] = None  # lines in the file, counted on first use

    def append(self, record: dict) -> None:
        """Append ``record`` with the current time first (the log is never overwritten)."""
        if not self.enabled:
            return
        count = self.count()
        append_record(self.path, {"time": round(time.time(), 3), **record})
        self._records = count + 1

    def count(self) -> int:
        """Complete records in the file (counted once, then kept up to date)."""
        if self._records is None:
            try:
                self._records = self.path.read_bytes().count(b"\n")
            except OSError:
                self._records = 0
        return self._records

    def prune(self, kept_records: Optional[int], update: Optional[int]) -> int:
        """Drop the records that describe updates the resumed run will redo; returns how many.

        Records after the first ``kept_records`` go, except the run-history events
        (:data:`LOG_HISTORY_EVENTS`).  For a checkpoint without that count, records with an update
        beyond ``update`` go.  With no checkpoint the run starts over: ``kept_records`` 0.  A record torn by the kill (no final newline) always goes.
        """
        if not self.enabled or not self.path.is_file():
            return 0
        parts = self.path.read_bytes().split(b"\n")
        complete, torn = parts[:-1], parts[-1]
        keep, n_records = [], 0
        for line in complete:  # positions count readable records only: a line edited in is not one
            rec = _record(line)
            if rec is None:
                continue
            if _kept(n_records, rec, kept_records, update):
                keep.append(line)
            n_records += 1
        dropped = len(complete) - len(keep) + (1 if torn.strip() else 0)
        if dropped:
            with atomic_write(self.path, "wb") as fh:
                fh.write(b"".join(line + b"\n" for line in keep))
        self._records = len(keep)
        return dropped


def _record(line: bytes) -> Optional[dict]:
    """A log line as its record, or None when it is not one (unreadable lines are dropped)."""
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: a line nested thousands deep
        return None
    return rec if isinstance(rec, dict) else None


def _kept(index: int, rec: dict, kept_records: Optional[int], update: Optional[int]) -> bool:
    """Whether record ``index`` (counting readable records) survives :meth:`RunLog.prune`."""
    if kept_records is not None and index < kept_records:
        return True
    redone = kept_records is not None or (update is not None and (rec.get("update") or 0) > update)
    return rec.get("event") in LOG_HISTORY_EVENTS or not redone
