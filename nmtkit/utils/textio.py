"""Line-exact text input and atomic output.

Why this module exists: Python's ``str.splitlines`` and text-mode files treat ``\\r``,
U+2028, U+0085 and friends as line breaks, which silently adds lines to a corpus and
breaks parallelism.  Everything in nmtkit reads text through here, splitting on ``\\n``
only, decoding UTF-8 strictly (or, for translation, replacing bad bytes with a warning),
dropping a UTF-8 byte-order mark at the start of a line (of a file, or of one
concatenated into it) and naming file and line on failure.  Outputs are written to a temporary file or directory and
renamed into place only on success; they get the usual permissions under the umask, and a
failed write is an :class:`~nmtkit.errors.OutputError` naming the user's path (never the
temporary one) with the reason.  Output directories are :mod:`nmtkit.utils.atomic_dir`'s.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import IO, Any, BinaryIO, Callable, Iterator, Optional, Sequence

from nmtkit.errors import InputError, OutputError
from nmtkit.utils.stdio import STDIN_NAME, direct_target, display_name, input_name, stream_closed
from nmtkit.utils.tempfiles import remove_stale_temps, temp_prefix


#: The UTF-8 encoding of U+FEFF: Windows editors put it at the start of "UTF-8" files.
UTF8_BOM = b"\xef\xbb\xbf"


#: The problem reported for a line whose invalid UTF-8 was replaced (lenient decoding).
INVALID_UTF8_REPLACED = "invalid UTF-8 replaced"


def decode_line(raw: bytes, path: str, lineno: int, *, strict: bool = True,
                on_invalid: Optional[Callable[[InputError], None]] = None) -> str:
    """Decode one raw line (without its ``\\n``) as UTF-8.

    ``strict``: invalid UTF-8 raises an :class:`InputError` naming file:line (a corpus must be
    clean).  Otherwise the bad bytes become U+FFFD and ``on_invalid`` is told, once for the
    line, with an :class:`InputError` naming file:line: a translator should not lose every
    later line because one is damaged.
    A byte-order mark starting a line is dropped: it is not text, and kept it would become part
    of the first word (a ``\\ufeffA`` vocabulary entry, a reference that no longer matches).  Any
    line, not only the first: ``cat a.txt b.txt`` puts b.txt's mark at the start of a later line.
    """
    if raw.startswith(UTF8_BOM):
        raw = raw[len(UTF8_BOM):]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if strict:
            raise InputError(path, lineno, f"invalid UTF-8 at byte {exc.start}") from None
        text = raw.decode("utf-8", errors="replace")
        if on_invalid is not None:
            on_invalid(InputError(path, lineno, INVALID_UTF8_REPLACED))
    if text.endswith("\r"):
        text = text[:-1]  # tolerate CRLF files; a stray \r inside a line is kept as text
    return text


def read_error(path: str, lineno: int, exc: OSError) -> InputError:
    """The one-line error of a read that failed at line ``lineno`` of ``path`` (EIO and the like)."""
    return InputError(path, lineno, f"read error: {exc.strerror or exc}")


def iter_binary_lines(stream: BinaryIO, path: str, *, strict: bool = True,
                      on_invalid: Optional[Callable[[InputError], None]] = None) -> Iterator[tuple[int, str]]:
    """Yield ``(lineno, text)`` for each ``\\n``-terminated line of a byte stream.

    A final line without a trailing newline is still yielded.  Only ``\\n`` ends a line.
    ``strict``/``on_invalid``: see :func:`decode_line`.
    """
    lineno = 0
    lines = iter(stream)  # binary iteration splits on b"\n" only
    while True:
        try:
            raw = next(lines)
        except StopIteration:
            return
        except OSError as exc:  # a failed read is this input's error, not the output's (handle_errors' guess)
            if exc.filename is not None:  # it names its stream already (a closed stdin)
                raise
            raise read_error(path, lineno + 1, exc) from exc
        lineno += 1
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        yield lineno, decode_line(raw, path, lineno, strict=strict, on_invalid=on_invalid)


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """Yield ``(lineno, text)`` for a file; a missing file is an :class:`InputError`."""
    p = str(path)
    if p == "-":
        yield from iter_binary_lines(sys.stdin.buffer, STDIN_NAME)
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
        raise InputError(input_name(path), None, "file is empty")
    return lines


def iter_parallel_chunks(paths: Sequence[str], size: int,
                         names: Optional[Sequence[str]] = None) -> Iterator[list[list[str]]]:
    """Line-parallel files read together, ``size`` lines at a time: one list of lines per file.

    Why: scoring a million lines needs one chunk in memory, not every file.  The checks are
    :func:`read_lines`' and :func:`check_parallel`'s (an empty file, unequal line counts, named
    by ``names``, default the paths with ``-`` as ``<stdin>``); they end the iteration with an
    error, so a caller that only reports after the last chunk never reports a partial result."""
    iters = [iter_lines(p) for p in paths]
    names = [str(n) for n in names] if names is not None else [input_name(p) for p in paths]
    counts = [0] * len(iters)
    while True:
        chunk = [[text for _, text in itertools.islice(it, size)] for it in iters]
        for k, lines in enumerate(chunk):
            counts[k] += len(lines)
        if len({len(lines) for lines in chunk}) > 1:  # a file ended early: count the others to the end
            for k, it in enumerate(iters):
                counts[k] += sum(1 for _ in it)
        elif chunk and chunk[0]:
            yield chunk
            continue
        for name, n in zip(names, counts):
            if n == 0:
                raise InputError(name, None, "file is empty")
        check_parallel(names, counts)
        return


def check_parallel(paths: list[str], counts: list[int]) -> None:
    """Raise if line-parallel files have different line counts, naming every file and count."""
    if len(set(counts)) > 1:
        detail = ", ".join(f"{p} has {n} lines" for p, n in zip(paths, counts))
        raise InputError(None, None, f"files are not parallel: {detail}")


def _umask() -> int:
    """The process umask (os offers no getter: set it and put it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def output_mode(target: Path, directory: bool = False) -> int:
    """Permissions for an output: those of the file it replaces, else the usual ones under the umask.

    Why: mkstemp/mkdtemp create private (0600/0700) files, which would leave a corpus or a
    checkpoint unreadable to the rest of a group; ``open()`` would have given 0666 & ~umask.
    """
    with contextlib.suppress(OSError):
        st = target.stat()
        if stat.S_ISDIR(st.st_mode) == directory:
            return stat.S_IMODE(st.st_mode)
    return (0o777 if directory else 0o666) & ~_umask()


def output_error(exc: OSError, target: str | os.PathLike) -> OutputError:
    """An OSError met while writing ``target``, as one line naming ``target`` and the reason."""
    return OutputError(target, exc.strerror or str(exc) or type(exc).__name__)


def ensure_dir(directory: str | os.PathLike, for_path: str | os.PathLike | None = None) -> Path:
    """``mkdir -p directory``, failing with an :class:`OutputError` that says what is wrong.

    A component that is a file gives "``a`` is a file, not a directory" (``mkdir`` itself says
    only "File exists").  The error names ``for_path`` (the output the user asked for) if given.
    """
    d = Path(directory)
    named = for_path if for_path is not None else d
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        for anc in reversed([d, *d.parents]):
            if anc.exists() and not anc.is_dir():
                raise OutputError(named, f"{anc} is a file, not a directory") from None
        raise output_error(exc, named) from exc
    return d


def _from_write(exc: OSError, tmp: str) -> bool:
    """Whether an OSError raised while the caller wrote our temporary file came from that file."""
    return not isinstance(exc, BrokenPipeError) and exc.filename in (None, tmp)


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` and rename it over ``path`` only on success.

    The one way nmtkit writes a file.  On any failure the temporary file is removed and the
    previous ``path`` is left as it was; an OSError of the write itself (full disk, no
    permission, a parent that is a file) becomes an :class:`OutputError` naming ``path``.
    The result gets :func:`output_mode` permissions.  ``-`` is stdout, and a device, FIFO,
    socket or ``/dev/stdout`` is written in place (:func:`nmtkit.utils.stdio.direct_target`):
    only regular files and new paths are replaced atomically.  A symlink is written through: its
    target is replaced, the link stays.
    """
    how = direct_target(path)
    if how is not None:
        with _write_in_place(path, how, mode, encoding) as direct:
            yield direct
        return
    target = Path(path)
    if target.is_symlink():  # write through the link, as a shell's ``>`` does: the link stays a link
        target = Path(os.path.realpath(target))
    ensure_dir(target.parent, for_path=target)
    if target.is_dir():
        raise OutputError(target, "is a directory")
    file_mode = output_mode(target)
    try:
        remove_stale_temps(target.parent, target.name)  # what a killed earlier write left
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(target), suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise output_error(exc, target) from exc
    fh: Optional[IO[Any]] = None
    try:
        try:
            os.chmod(tmp, file_mode)
            binary = "b" in mode
            fh = open(fd, mode, encoding=None if binary else encoding, newline=None if binary else "\n")
        except BaseException:
            if fh is None:
                os.close(fd)
            raise
        try:
            yield fh
        except OSError as exc:
            if _from_write(exc, tmp):
                raise output_error(exc, target) from exc
            raise
        try:
            fh.flush()
            os.fsync(fh.fileno())
            fh.close()
            os.replace(tmp, target)
        except OSError as exc:
            raise output_error(exc, target) from exc
    except BaseException:
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()  # may fail again flushing its buffer onto the full disk
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def refuse_linked_output(path: str | os.PathLike, appended: bool = False) -> None:
    """Refuse a file nmtkit rewrites again and again (a save dir's checkpoints and log) unless it
    is a regular file of its own or absent.

    Why: :func:`atomic_write` writes through a symbolic link, right for an output named once on the
    command line; a save dir's files are replaced on every save, and through a link that would
    write over the link's target (another run's checkpoint, a shared log).  A file that is
    ``appended`` to must not be a hard link either: another name would get the records.
    """
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InputError(str(p), None, f"cannot check: {exc.strerror or exc}") from None
    how = "appends to" if appended else "replaces"
    if stat.S_ISLNK(st.st_mode):
        gone = "" if p.exists() else ", which does not exist"
        raise InputError(str(p), None, f"is a symbolic link to {os.readlink(p)}{gone}: nmtkit {how} this file as one "
                                       "of its own and would write over the link's target; remove the link "
                                       "(or put the file itself there) or use another directory")
    if stat.S_ISDIR(st.st_mode):
        raise InputError(str(p), None, "is a directory, where nmtkit writes a file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(str(p), None, f"is not a regular file (a device, pipe or socket), and nmtkit {how} it")
    if appended and st.st_nlink > 1:
        raise InputError(str(p), None, f"has {st.st_nlink} hard links: nmtkit appends to this file, and the other "
                                       "names would get its records; copy it or use another directory")


@contextlib.contextmanager
def _write_in_place(path: str | os.PathLike, how: int | str, mode: str, encoding: str | None) -> Iterator[IO[Any]]:
    """:func:`atomic_write`'s branch for stdout, descriptors and special files: written directly,
    in order, never closing a standard stream; an OSError of the write names ``path``
    (``<stdout>`` for ``-``)."""
    name = display_name(path)
    binary = "b" in mode
    text_encoding, newline = (None, None) if binary else (encoding, "\n")
    std = {1: sys.stdout, 2: sys.stderr}.get(how) if isinstance(how, int) else None
    own: Optional[IO[Any]] = None
    fh: IO[Any]
    try:
        if std is not None:
            if stream_closed(std):
                raise OutputError(name, "standard output is closed" if how == 1 else "standard error is closed")
            std.flush()  # what was printed before comes first
            fh = std.buffer if binary else std
        elif isinstance(how, int):
            own = fh = open(os.dup(how), mode, encoding=text_encoding, newline=newline)
        else:
            own = fh = open(how, mode, encoding=text_encoding, newline=newline)
    except OSError as exc:
        raise output_error(exc, name) from exc
    try:
        try:
            yield fh
            fh.flush()
        except OSError as exc:
            if isinstance(exc, BrokenPipeError) or exc.filename is not None:
                raise
            raise output_error(exc, name) from exc
    finally:
        if own is not None:
            with contextlib.suppress(OSError):
                own.close()
