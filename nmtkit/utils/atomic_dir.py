"""Atomic output directories: built under a temporary name beside their destination and renamed
into place only on success (``nmtkit-preprocess``'s data directory, ``nmtkit-sample``'s corpus).

Why apart from :mod:`nmtkit.utils.textio`, whose files they use: a directory has its own rules
for what it may replace (:func:`check_replaceable`), and a failed build names the file under the
user's destination, never the temporary one.
"""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from nmtkit.errors import InputError, OutputError
from nmtkit.utils.tempfiles import remove_stale_temps, temp_prefix
from nmtkit.utils.textio import ensure_dir, output_error, output_mode


def check_replaceable(dest: str | os.PathLike, overwrite: bool, owned: Callable[[Path], bool] | None,
                      writer: str = "nmtkit") -> None:
    """Refuse a ``dest`` that :func:`atomic_directory` must not replace; call it before any work.

    A new or empty directory is fine.  A non-empty one is replaced only with ``overwrite`` and
    only if ``owned(dest)`` says nmtkit wrote it (``writer`` names what writes it): ``--overwrite``
    on someone's home or corpus directory would delete it, so that refusal never suggests it.
    """
    target = Path(dest)
    if target.exists() and not target.is_dir():
        raise InputError(str(target), None, "exists and is not a directory")
    try:
        empty = not target.is_dir() or not any(target.iterdir())
    except OSError as exc:
        raise output_error(exc, target) from exc
    if empty:
        return
    if owned is None or not owned(target):
        raise InputError(str(target), None, f"directory exists, is not empty and was not written by {writer}: "
                                            "choose a new or empty directory")
    if not overwrite:
        raise InputError(str(target), None, "directory exists and is not empty (use --overwrite to replace it)")


@contextlib.contextmanager
def atomic_directory(dest: str | os.PathLike, overwrite: bool = False, owned: Callable[[Path], bool] | None = None,
                     writer: str = "nmtkit") -> Iterator[Path]:
    """Build a directory under a temporary name and move it to ``dest`` only on success.

    An existing non-empty ``dest`` is refused unless ``overwrite`` and ``owned`` (see
    :func:`check_replaceable`); then the old directory is replaced only after the new one is
    complete.  A symlinked ``dest`` is built at its target and stays a link.  An OSError while
    filling it becomes an :class:`OutputError` naming the file as it would be under ``dest``.
    """
    target = Path(dest)
    if target.is_symlink():  # build at the link's target, as atomic_write does: the link stays a link
        target = Path(os.path.realpath(target))
    check_replaceable(target, overwrite, owned, writer)
    replacing = target.is_dir() and any(target.iterdir())  # allowed (--overwrite of nmtkit's own directory)
    ensure_dir(target.parent, for_path=target)
    dir_mode = output_mode(target, directory=True)
    try:
        remove_stale_temps(target.parent, target.name)  # what a killed earlier run left
        tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(target), suffix=".tmp", dir=target.parent))
    except OSError as exc:
        raise output_error(exc, target) from exc
    try:
        try:
            yield tmp
        except OutputError as exc:  # e.g. an atomic_write inside: name the file as under dest
            rel = _relative(exc.path, tmp)
            if rel is None:
                raise
            raise OutputError(target / rel, exc.reason) from exc
        except OSError as exc:
            rel = _relative(exc.filename, tmp) if exc.filename is not None else Path()
            if isinstance(exc, BrokenPipeError) or rel is None:
                raise  # not about the directory being written (an input, say)
            raise output_error(exc, target / rel if rel.parts else target) from exc
        try:
            os.chmod(tmp, dir_mode)  # mkdtemp makes it private (0700); the result should not be
            if replacing and target.exists():
                old = target.with_name(f".{target.name}.old-{os.getpid()}")
                os.replace(target, old)
                os.replace(tmp, target)
                shutil.rmtree(old, ignore_errors=True)
            else:  # the kernel renames a directory onto a missing or empty one only: never over another run's
                os.rename(tmp, target)
        except OSError as exc:
            if not replacing and exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise OutputError(target, "appeared while this run was writing it (another run into the same "
                                          "directory?) and is left as it is: use another directory, or --overwrite "
                                          "to replace it") from None
            raise output_error(exc, target) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _relative(path: str | os.PathLike, directory: Path) -> Path | None:
    """``path`` relative to ``directory``, or None when it lies outside."""
    if not isinstance(path, (str, os.PathLike)):
        return None
    try:
        return Path(os.path.abspath(path)).relative_to(os.path.abspath(directory))
    except ValueError:
        return None
