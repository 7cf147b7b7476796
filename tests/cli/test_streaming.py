"""nmtkit-translate on a pipe translates each line as soon as the input pauses."""
from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
import time

import pytest

from nmtkit.utils.streaming import PAUSE, iter_raw_lines
from tests.helpers import make_checkpoint


def test_reader_yields_lines_and_pauses_and_holds_partial_lines():
    r, w = os.pipe()
    with os.fdopen(r, "rb", buffering=0) as rf:
        it = iter_raw_lines(rf, pause_s=0.05)
        os.write(w, b"one\ntw")
        assert next(it) == b"one\n"
        assert next(it) is PAUSE  # "tw" is not a line yet: only "one" is handed on
        os.write(w, "o \xe9\n".encode("utf-8") + b"\xff bad\nlast")
        assert next(it) == "two \xe9\n".encode("utf-8")
        assert next(it) == b"\xff bad\n"  # bytes as they came: decoding (and its errors) is the caller's
        assert next(it) is PAUSE
        os.close(w)
        assert list(it) == [b"last"]  # a final line without newline still counts


def test_regular_file_is_read_without_pauses(tmp_path):
    p = tmp_path / "in.txt"
    p.write_bytes(b"a\nb\r\nc")
    with open(p, "rb") as fh:
        assert list(iter_raw_lines(fh)) == [b"a\n", b"b\r\n", b"c"]


def _read_line(stream, timeout: float) -> bytes:  # noqa: ANN001
    ready, _, _ = select.select([stream], [], [], timeout)
    assert ready, f"no output within {timeout} s"
    return stream.readline()


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["luong_tiny", "transformer_test"])
def test_translate_answers_each_line_before_the_next_arrives(tmp_path, arch):
    random_ckpt = make_checkpoint(tmp_path / "random.pt", arch)
    proc = subprocess.Popen([sys.executable, "-m", "nmtkit.cli.translate", "--path", str(random_ckpt), "--threads", "1",
                             "--beam", "2", "--quiet"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(b"the cat sees the dog .\n")
        proc.stdin.flush()
        first = _read_line(proc.stdout, 20.0)  # includes loading torch and the model
        proc.stdin.write(b"Anna sleeps .\n")
        proc.stdin.flush()
        second = _read_line(proc.stdout, 10.0)
        rest, err = proc.communicate(timeout=30)  # closes stdin: the end of input
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert rest == b""
    batch = subprocess.run([sys.executable, "-m", "nmtkit.cli.translate", "--path", str(random_ckpt), "--threads", "1",
                            "--beam", "2", "--quiet"], input=b"the cat sees the dog .\nAnna sleeps .\n", capture_output=True, timeout=120)
    assert batch.stdout == first + second  # the same translations, in input order


@pytest.mark.slow
def test_bursty_pipe_loses_and_reorders_nothing(random_ckpt, tmp_path):
    lines = [f"the cat {'sees the dog ' * (k % 4)}." if k % 7 else "" for k in range(60)]
    src = tmp_path / "in.txt"
    src.write_text("".join(l + "\n" for l in lines))
    cmd = [sys.executable, "-m", "nmtkit.cli.translate", "--path", str(random_ckpt), "--threads", "1", "--beam", "2",
           "--max-len-b", "4", "--quiet"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def feed() -> None:
        data = src.read_bytes()
        for k in range(0, len(data), 37):  # lines cut anywhere, with pauses in between
            proc.stdin.write(data[k:k + 37])
            proc.stdin.flush()
            if k % 3 == 0:
                time.sleep(0.02)
        proc.stdin.close()

    t = threading.Thread(target=feed)
    t.start()
    out = proc.stdout.read()  # (communicate() would close stdin under the feeder)
    t.join()
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert proc.returncode == 0, err
    from_file = subprocess.run([*cmd, "--input", str(src)], capture_output=True, timeout=120)
    assert out == from_file.stdout and out.count(b"\n") == len(lines)


class _Counted(bytes):
    """A chunk as ``os.read`` returns it, counting the bytes that ``+`` copies into new objects."""

    copied = 0

    def __add__(self, other):  # noqa: ANN001, ANN204
        _Counted.copied += len(self) + len(other)
        return bytes(self) + bytes(other)

    def __radd__(self, other):  # noqa: ANN001, ANN204
        _Counted.copied += len(other) + len(self)
        return bytes(other) + bytes(self)


def test_a_long_line_from_a_pipe_is_copied_a_linear_number_of_times(monkeypatch):
    """A 128 MiB line without newline took 89 s from a pipe (3 s from a file): every read was
    appended to everything read so far.  Structural, not timed: count what ``+`` copies while
    the reader assembles one line delivered in 4,000 small reads."""
    import types

    from nmtkit.utils import streaming

    n_chunks, chunk = 4000, b"x" * 64
    reads = iter([_Counted(chunk)] * n_chunks + [_Counted(b"\n"), b""])
    monkeypatch.setattr(streaming, "os", types.SimpleNamespace(read=lambda fd, n: next(reads), fstat=os.fstat))
    _Counted.copied = 0
    r, w = os.pipe()  # a real pipe, so the reader takes its pipe path; the data comes from the fake read
    try:
        with os.fdopen(r, "rb", buffering=0) as rf:
            lines = [x for x in iter_raw_lines(rf, pause_s=0.01) if x is not PAUSE]
    finally:
        os.close(w)
    total = n_chunks * len(chunk) + 1
    assert lines == [chunk * n_chunks + b"\n"]
    assert _Counted.copied <= 2 * total, f"{_Counted.copied:,} bytes copied for a {total:,}-byte line (quadratic)"
