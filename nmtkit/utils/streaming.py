"""Raw ``\\n`` lines of an input that may pause (a pipe, a terminal, a socket), with the pauses.

Why: a translator reading a pipe in buffers of 2,000 lines would keep the first line's answer
until 1,999 more lines or the end of input arrive, which never happens in an interactive
pipeline (``(echo A; sleep 8; echo B) | nmtkit-translate``).  :func:`iter_raw_lines` yields
:data:`PAUSE` whenever no complete new line arrived for ``pause_s`` seconds, so the caller can
translate and flush what it holds.  A regular file never pauses and is read exactly as before
(plain buffered iteration), so whole-file throughput does not change.
"""
from __future__ import annotations

import io
import os
import select
import stat
from typing import BinaryIO, Callable, Iterator, Optional, Union

from nmtkit.errors import InputError

#: Yielded when the input has paused (no complete new line within ``pause_s``).
PAUSE = None

#: How long the input must be quiet before what has arrived is handed on.
DEFAULT_PAUSE_S = 0.005

_CHUNK = 1 << 16


def _fd_that_can_pause(stream: BinaryIO) -> int | None:
    """The stream's file descriptor when it is a pipe, terminal, socket or FIFO; None for regular
    files and objects without one.  The stream must be unread: its descriptor is read directly."""
    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None
    if stat.S_ISREG(mode) or stat.S_ISBLK(mode):
        return None
    return fd


def iter_raw_lines(stream: BinaryIO, pause_s: float = DEFAULT_PAUSE_S) -> Iterator[Union[bytes, None]]:
    """Yield each line of ``stream`` as bytes with its ``\\n`` (the last one may lack it), and
    :data:`PAUSE` after lines when the input goes quiet.

    Lines split on ``\\n`` only, as iterating a binary file does.  On a pipe the descriptor is
    read with ``select`` + ``os.read`` (blocking mode untouched: it may be shared with other
    processes); a partial line is held until its ``\\n`` or the end of input.
    """
    fd = _fd_that_can_pause(stream)
    if fd is None:
        yield from stream
        return
    pending: list[bytes] = []  # the reads since the last \n, joined once it comes: a 128 MiB line
    paused = True  # read 64 KiB at a time is copied once, not once per read (quadratic)
    while True:
        if not paused:
            ready, _, _ = select.select([fd], [], [], pause_s)
            if not ready:
                paused = True
                yield PAUSE
                continue
        data = os.read(fd, _CHUNK)
        if not data:
            break
        pending.append(data)
        if b"\n" not in data:
            continue
        lines = b"".join(pending).split(b"\n")
        tail = lines.pop()
        pending = [tail] if tail else []
        for line in lines:
            yield line + b"\n"
        paused = False
    if pending:
        yield b"".join(pending)


def iter_input_lines(stream: BinaryIO, name: str, *, strict: bool = False,
                     on_invalid: Optional[Callable[[InputError], None]] = None,
                     pause_s: float = DEFAULT_PAUSE_S) -> Iterator[tuple[int, Union[str, InputError, None]]]:
    """Yield ``(0-based index, text)`` per ``\\n`` line of a file, pipe or terminal, and
    ``(k, PAUSE)`` when a pipe paused before line ``k``.

    One decoder for every kind of input (:func:`nmtkit.utils.textio.decode_line`), so a file,
    a pipe and a trickle from a terminal give the same text.  Lenient by default: invalid UTF-8
    becomes U+FFFD and ``on_invalid`` gets an :class:`InputError` naming ``name``:line, so no
    later line is lost.  With ``strict`` the error is *yielded* as ``(k, InputError)`` and the
    input ends there, so the caller can first write out every earlier line.
    """
    from nmtkit.utils.textio import decode_line, read_error

    k = 0
    raws = iter_raw_lines(stream, pause_s)
    while True:
        try:
            raw = next(raws)
        except StopIteration:
            return
        except OSError as exc:  # a failed read (a terminal that hung up, EIO): the input's error, not stdout's
            if exc.filename is not None:  # it names its stream already (a closed stdin)
                raise
            yield k, read_error(name, k + 1, exc)
            return
        if raw is PAUSE:  # the input paused after line k - 1
            yield k, PAUSE
            continue
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        try:
            yield k, decode_line(raw, name, k + 1, strict=strict, on_invalid=on_invalid)
        except InputError as exc:
            yield k, exc
            return
        k += 1
