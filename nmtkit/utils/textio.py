"""Line-exact text input and atomic output.

Why this module exists: Python's ``str.splitlines`` and text-mode files treat ``\\r``,
U+2028, U+0085 and friends as line breaks, which silently adds lines to a corpus and
breaks parallelism.  Everything in nmtkit reads text through here, splitting on ``\\n``
only, decoding UTF-8 strictly and naming file and line on failure.  Outputs are written
to a temporary file or directory and renamed into place only on success.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import BinaryIO, Iterator, TextIO

from nmtkit.errors import InputError


def decode_line(raw: bytes, path: str, lineno: int) -> str:
    """Decode one raw line (without its ``\\n``) as strict UTF-8, or raise naming file:line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, lineno, f"invalid UTF-8 at byte {exc.start}") from None
    if text.endswith("\r"):
        text = text[:-1]  # tolerate CRLF files; a stray \r inside a line is kept as text
    return text


def iter_binary_lines(stream: BinaryIO, path: str) -> Iterator[tuple[int, str]]:
    """Yield ``(lineno, text)`` for each ``\\n``-terminated line of a byte stream.

    A final line without a trailing newline is still yielded.  Only ``\\n`` ends a line.
    """
    lineno = 0
    for raw in stream:  # binary iteration splits on b"\n" only
        lineno += 1
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        yield lineno, decode_line(raw, path, lineno)


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """Yield ``(lineno, text)`` for a file; a missing file is an :class:`InputError`."""
    p = str(path)
    if p == "-":
        yield from iter_binary_lines(sys.stdin.buffer, "<stdin>")
        return
    try:
        fh = open(p, "rb")
    except FileNotFoundError:
        raise InputError(p, None, "no such file") from None
    except IsADirectoryError:
        raise InputError(p, None, "is a directory, expected a text file") from None
    except PermissionError:
        raise InputError(p, None, "permission denied") from None
    with fh:
        yield from iter_binary_lines(fh, p)


def read_lines(path: str | os.PathLike, allow_empty_file: bool = False) -> list[str]:
    """Read a whole text file as a list of lines (no terminators).

    An empty file is an error unless ``allow_empty_file``: an empty corpus is almost
    always a mistake in a pipeline, and scoring or training on it silently is worse.
    """
    lines = [text for _, text in iter_lines(path)]
    if not lines and not allow_empty_file:
        raise InputError(str(path), None, "file is empty")
    return lines


def check_parallel(paths: list[str], counts: list[int]) -> None:
    """Raise if line-parallel files have different line counts, naming every file and count."""
    if len(set(counts)) > 1:
        detail = ", ".join(f"{p} has {n} lines" for p, n in zip(paths, counts))
        raise InputError(None, None, f"files are not parallel: {detail}")


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[TextIO]:
    """Open a temporary file beside ``path`` and rename it over ``path`` only on success."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        kwargs = {"encoding": encoding, "newline": "\n"} if "b" not in mode else {}
        with open(tmp, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_directory(dest: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Build a directory under a temporary name and move it to ``dest`` only on success.

    An existing non-empty ``dest`` is refused unless ``overwrite``; with ``overwrite`` the
    old directory is replaced only after the new one is complete.
    """
    target = Path(dest)
    if target.exists() and not target.is_dir():
        raise InputError(str(target), None, "exists and is not a directory")
    if target.is_dir() and any(target.iterdir()) and not overwrite:
        raise InputError(str(target), None, "directory exists and is not empty (use --overwrite to replace it)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private (0700); the result should not be
        if target.exists():
            old = target.with_name(f".{target.name}.old-{os.getpid()}")
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
