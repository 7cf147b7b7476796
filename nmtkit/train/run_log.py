"""``train_log.jsonl``: one JSON record per line, appended, valid JSON whatever happens, and
never a line lost.

Why a module: ``json.dumps`` writes a NaN loss as bare ``NaN``, which no strict JSON reader
accepts; and a record appended onto a full disk could be left half-written, so that the next
record continues a torn line.  Here non-finite numbers become ``null`` and a failed append is
taken back (the log ends with its last complete record) before the one-line error.

Whose file: the log is appended to, and replaced only as a regular file of the save dir that
holds nothing but nmtkit's records (:meth:`RunLog.check`, before any training).  A symbolic or
hard link (a shared log, a text file elsewhere) or a line nmtkit did not write is refused in one
line: rewriting it would delete what others wrote.

Superseded records: after ``kill -9`` the log holds records written after checkpoint_last.pt,
for updates the resumed run trains (and logs) again; a run starting over in the save dir redoes
every update of an earlier one.  Those records are kept, marked ``"superseded": true``, never
deleted; readers of the run's history skip them.  Each checkpoint stores how many lines the log
had (:meth:`RunLog.count`), which tells the records its state wrote from the later ones.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import time
from pathlib import Path
from typing import Any, BinaryIO, Optional, cast

from nmtkit.errors import InputError
from nmtkit.utils.textio import atomic_write, output_error, refuse_linked_output

#: Events that record the history of runs rather than work of an update: never superseded.
LOG_HISTORY_EVENTS = ("start", "end", "interrupted", "early_stop", "diverged")

#: The field that marks a record of updates a later run redid (kept for the history, not current).
SUPERSEDED = "superseded"

#: How every record nmtkit writes begins (``time`` first, ASCII JSON): tells a record torn by a
#: kill from a line someone else wrote.
_RECORD_START = b'{"time": '


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
        # O_NOFOLLOW: a symbolic link put there meanwhile is refused, never written through
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
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

    def check(self) -> None:
        """Refuse a log nmtkit must neither append to nor replace, before any training: a symbolic
        or hard link, something not a regular file, or a line that is not one of nmtkit's records
        (``path:line`` named).  A record torn by a kill (the last line, unfinished) is nmtkit's."""
        if self.enabled:
            self._read()

    def _read(self) -> tuple[list[bytes], bytes]:
        """The complete lines and the torn tail of a log :meth:`check` accepts."""
        refuse_linked_output(self.path, appended=True)
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return [], b""
        except OSError as exc:
            raise InputError(self.path, None, f"cannot read: {exc.strerror or exc}") from None
        parts = data.split(b"\n")
        complete, torn = parts[:-1], parts[-1]
        for lineno, line in enumerate(complete, 1):
            if _record(line) is None:
                raise InputError(self.path, lineno, "not a record of nmtkit's training log (a JSON object with "
                                 "\"time\" and \"event\"); nmtkit-train keeps only its own records there: "
                                 "move the file away or remove the line")
        if torn and not _torn_record(torn):
            raise InputError(self.path, len(complete) + 1, "not a record of nmtkit's training log (an unfinished "
                             "line nmtkit did not write): move the file away or remove the line")
        return complete, torn

    def supersede(self, kept_records: Optional[int], update: Optional[int]) -> Optional[str]:
        """Mark the records of updates the resumed run will redo ``"superseded": true``; returns
        what was marked (lines named), or None when nothing was.

        Records after the first ``kept_records`` lines are marked, except the run-history events
        (:data:`LOG_HISTORY_EVENTS`).  For a checkpoint without that count, records with an update
        beyond ``update`` are.  With no checkpoint the run starts over: ``kept_records`` 0.  A
        record torn by the kill (no final newline) is kept as a superseded ``torn`` record holding
        its text.  The file is replaced (atomically) only after :meth:`check`'s tests pass.
        """
        if not self.enabled:
            return None
        complete, torn = self._read()
        out, marked = [], []
        for index, line in enumerate(complete):
            rec = _record(line)
            assert rec is not None  # _read refused any other line
            if not rec.get(SUPERSEDED) and not _kept(index, rec, kept_records, update):
                line = record_line({**rec, SUPERSEDED: True}).encode("utf-8")
                marked.append(index + 1)
            out.append(line)
        if torn:
            text = torn.decode("ascii", errors="replace")
            out.append(record_line({"time": round(time.time(), 3), "event": "torn", SUPERSEDED: True, "text": text}).encode())
            marked.append(len(complete) + 1)
        if marked:
            with atomic_write(self.path, "wb") as fh:
                cast(BinaryIO, fh).write(b"".join(line + b"\n" for line in out))
        self._records = len(out)
        if not marked:
            return None
        torn_note = f"; line {marked[-1]} was torn by a kill and is kept as an \"event\": \"torn\" record" if torn else ""
        return (f"marked {len(marked)} record(s) of {self.path} superseded (line{'s' if len(marked) > 1 else ''} "
                f"{line_ranges(marked)}: updates this run redoes; kept, with \"{SUPERSEDED}\": true){torn_note}")


def line_ranges(numbers: list[int]) -> str:
    """``3-7, 9, 12-13`` for sorted line numbers."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _record(line: bytes) -> Optional[dict]:
    """A log line as nmtkit's record (a JSON object with a numeric ``time`` and a string
    ``event``), or None when it is not one."""
    try:
        rec = json.loads(line, parse_constant=_no_constant)
    except (ValueError, RecursionError):  # RecursionError: a line nested thousands deep
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("event"), str):
        return None
    when = rec.get("time")
    return rec if isinstance(when, (int, float)) and not isinstance(when, bool) else None


def _no_constant(name: str) -> None:
    """``NaN``/``Infinity`` in a line: nmtkit writes them as null, so the line is not its record."""
    raise ValueError(name)


def _torn_record(tail: bytes) -> bool:
    """Whether an unfinished last line can be the start of one of nmtkit's records."""
    return tail.isascii() and (tail.startswith(_RECORD_START) or _RECORD_START.startswith(tail))


def _kept(index: int, rec: dict, kept_records: Optional[int], update: Optional[int]) -> bool:
    """Whether record ``index`` (a line number from 0) stays current in :meth:`RunLog.supersede`."""
    if kept_records is not None and index < kept_records:
        return True
    redone = kept_records is not None or (update is not None and (rec.get("update") or 0) > update)
    return rec.get("event") in LOG_HISTORY_EVENTS or not redone
