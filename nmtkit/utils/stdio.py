"""Standard streams and special files: UTF-8 in any locale, ``-`` for stdout, devices written in place.

Why: nmtkit decodes every input as UTF-8, so its output must be UTF-8 too, whatever the locale
(``LC_ALL=C``, ISO-8859-1): otherwise a copied CJK word stops a run with a UnicodeEncodeError, or
Latin-1 comes out without a warning.  A closed stdin or stdout (``<&-``, ``>&-``) becomes a stream
that fails with one line on first use, and its descriptor is held on /dev/null so that no file
opened later takes it.  And an output that is not a regular file (``/dev/null``, a FIFO,
``/dev/stdout``, ``-``) must be written in place, in order: the atomic rename that protects
regular files would replace the device node or leave a FIFO's reader waiting forever.
"""
from __future__ import annotations

import codecs
import errno
import io
import os
import re
import stat
import sys
from typing import TYPE_CHECKING, Optional, Union

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

from nmtkit.errors import NmtkitError

#: The output (or input) name that means the standard stream.
STDIO = "-"

#: What an error about stdout or stdin names.
STDOUT_NAME = "<stdout>"
STDIN_NAME = "<stdin>"

_STD_PATHS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_FD_PATH = re.compile(r"^/(?:dev/fd|proc/(self|thread-self|[0-9]+)/fd)/([0-9]+)$")


def is_stdio(path: Union[str, os.PathLike, None]) -> bool:
    """Whether an input or output name is ``-`` (the standard stream)."""
    return path is not None and os.fspath(path) == STDIO


def display_name(path: Union[str, os.PathLike]) -> str:
    """The name an error uses: ``<stdout>`` for ``-``, else the path as given."""
    return STDOUT_NAME if is_stdio(path) else os.fspath(path)


def input_name(path: Union[str, os.PathLike]) -> str:
    """The name an error about an input uses: ``<stdin>`` for ``-``, else the path as given."""
    return STDIN_NAME if is_stdio(path) else os.fspath(path)


class _ClosedBuffer(io.BufferedIOBase):
    """Stands in for a standard stream whose descriptor was closed when the command started:
    any read or write fails with an OSError naming the stream (one line, not an AttributeError)."""

    def __init__(self, name: str, what: str) -> None:
        super().__init__()
        self.stream_name = name
        self.what = what

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def _fail(self, *args: object, **kwargs: object) -> bytes:
        raise OSError(errno.EBADF, f"standard {self.what} is closed", self.stream_name)

    read = read1 = readinto = readline = write = _fail  # type: ignore[assignment]

    def flush(self) -> None:
        """Nothing is ever buffered, so nothing can fail at exit."""


class _StdoutRaw(io.FileIO):
    """Descriptor 1 whose write errors name ``<stdout>``: Python's own stdout raises a bare
    ``No space left on device`` (on /dev/full, a full disk) that no one could tell from another."""

    def write(self, data: ReadableBuffer) -> int:
        try:
            return super().write(data)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, STDOUT_NAME) from None


def _named_stdout(stream: io.TextIOWrapper) -> io.TextIOWrapper:
    """A UTF-8 stdout on :class:`_StdoutRaw`, buffered like ``stream`` (line by line on a terminal)."""
    stream.flush()
    raw = _StdoutRaw(1, "w", closefd=False)
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", errors=ERRORS,
                            line_buffering=stream.line_buffering)


def stream_closed(stream: object) -> bool:
    """Whether ``stream`` (sys.stdin/sys.stdout) is missing or stands in for a closed descriptor."""
    return stream is None or isinstance(getattr(stream, "buffer", None), _ClosedBuffer)


def _hold_fd(fd: int) -> None:
    """Open /dev/null on a closed descriptor 0-2, so that a file opened later does not become
    our stdout (where a worker's print or a later reopening would write into it)."""
    try:
        os.fstat(fd)
        return
    except OSError:
        pass
    try:
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
    except OSError:
        pass


#: The error handler of the UTF-8 standard streams: bytes that came in undecodable (a file name in
#: argv, say, under ``LC_ALL=C``) go out as they came, as with ``surrogateescape``; any other
#: character UTF-8 cannot encode (a lone surrogate) is written as a backslash-u escape with four hex
#: digits rather than stopping the command.
ERRORS = "nmtkit-escape"


def _escape(exc: UnicodeError) -> tuple[Union[str, bytes], int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    chunk = exc.object[exc.start:exc.end]
    if all(0xDC80 <= ord(c) <= 0xDCFF for c in chunk):
        return bytes(ord(c) - 0xDC00 for c in chunk), exc.end
    return chunk.encode("ascii", "backslashreplace").decode("ascii"), exc.end


codecs.register_error(ERRORS, _escape)


def _is_utf8(stream: object) -> bool:
    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "ascii").name == "utf-8"
    except LookupError:
        return False


def use_utf8_stdio() -> None:
    """Make stdin, stdout and stderr UTF-8 whatever the locale, as Python's UTF-8 mode does
    (``surrogateescape`` on stdin, :data:`ERRORS` on stdout and stderr); a stream closed at
    start becomes one that fails with a one-line error on first use.  Idempotent."""
    for name, fd, what, errors in (("stdin", 0, "input", "surrogateescape"),
                                   ("stdout", 1, "output", ERRORS),
                                   ("stderr", 2, "error", ERRORS)):
        stream = getattr(sys, name)
        if stream is None:
            _hold_fd(fd)
            if fd == 2:  # no one reads diagnostics: discard them rather than fail the command
                setattr(sys, name, open(fd, "w", encoding="utf-8", errors=errors, closefd=False))
                continue
            label = STDIN_NAME if fd == 0 else f"<{name}>"
            # typeshed's _WrappedBuffer wants a ``name``; TextIOWrapper reads it only when asked, and a
            # closed stream has none to give
            stub = io.TextIOWrapper(_ClosedBuffer(label, what), encoding="utf-8",  # type: ignore[type-var]
                                    write_through=True)
            setattr(sys, name, stub)
            continue
        original = sys.__stdout__
        if fd == 1 and original is not None and stream is original and _fileno(stream) == 1:
            try:
                sys.stdout = _named_stdout(original)
                continue
            except (OSError, ValueError):
                pass
        if not (_is_utf8(stream) and getattr(stream, "errors", None) in (errors, "surrogateescape")) \
                and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(encoding="utf-8", errors=errors)
            except (OSError, ValueError, io.UnsupportedOperation):
                pass


def _fileno(stream: object) -> Optional[int]:
    try:
        return stream.fileno()  # type: ignore[attr-defined]
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None


def _own_fd(path: str) -> Optional[int]:
    """The descriptor number of this process that ``path`` names (/dev/stdout, /dev/fd/N,
    /proc/self/fd/N), or None."""
    if path in _STD_PATHS:
        return _STD_PATHS[path]
    m = _FD_PATH.match(path)
    if m is None:
        return None
    if m.group(1) is not None and m.group(1).isdigit() and int(m.group(1)) != os.getpid():
        return None  # another process's descriptor: open it by its path
    return int(m.group(2))


def direct_target(path: Union[str, os.PathLike]) -> Union[int, str, None]:
    """How to write ``path`` without a temporary file, or None where an atomic replace is right.

    ``-`` and names of this process's descriptors (``/dev/stdout``, ``/proc/self/fd/N``, symlinks
    to them) give the descriptor number; a character or block device, FIFO or socket (or a
    symlink to one) gives the path, to open and write in place.  A regular file, a directory or
    a path that does not exist gives None.  The symlink chain is followed by hand because
    ``/dev/stdout`` resolves to ``/proc/self/fd/1`` and then to ``pipe:[...]``, which is no path.
    """
    p = os.fspath(path)
    if p == STDIO:
        return 1
    current = os.path.abspath(p)
    for _ in range(40):  # the kernel's own limit on symlink hops
        fd = _own_fd(current)
        if fd is not None:
            return fd
        try:
            link = os.readlink(current)
        except OSError:
            break
        current = os.path.normpath(os.path.join(os.path.dirname(current), link))
    try:
        mode = os.stat(p).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return p


def names_stdin(path: Union[str, os.PathLike, None]) -> bool:
    """Whether an input option reads this process's standard input: ``-``, ``/dev/stdin``,
    ``/dev/fd/0`` or a symlink to them."""
    return path is not None and (os.fspath(path) == STDIO or direct_target(path) == 0)


def refuse_stdin_twice(inputs: list[tuple[str, Union[str, os.PathLike, None]]]) -> None:
    """One line when two input options (``(option, path)``; ``None``: not given) both read standard
    input: the second would get what the first left, or nothing, and fail far from the cause."""
    readers = [option for option, path in inputs if names_stdin(path)]
    if len(readers) > 1:
        raise NmtkitError(f"standard input can be read only once, but {' and '.join(readers)} both read it")
