"""nmtkit-translate input rules: invalid UTF-8 (issue 10 item 13) and n-best of blank lines (item 14)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from nmtkit.utils.streaming import iter_input_lines
from nmtkit.utils.textio import decode_line
from tests.helpers import invoke_translate

BAD = b"the cat\nbad \xff cat\nthe dog\n\xc3( and \xfe\nlast line\n"
WARN = "nmtkit-translate: warning: {}:{}: invalid UTF-8 replaced"


def test_decode_line_replaces_and_reports_once_per_line():
    seen = []
    text = decode_line(b"a \xff\xfe b", "f.txt", 7, strict=False, on_invalid=seen.append)
    assert text == "a \ufffd\ufffd b"
    assert [str(e) for e in seen] == ["f.txt:7: invalid UTF-8 replaced"]
    with pytest.raises(Exception, match="f.txt:7: invalid UTF-8 at byte 2"):
        decode_line(b"a \xff", "f.txt", 7)  # strict stays the default for corpora


@pytest.mark.parametrize("buffer", ["1", "100"])
def test_invalid_utf8_is_replaced_with_one_warning_per_line(random_ckpt, buffer):
    res = invoke_translate(["--path", str(random_ckpt), "--buffer-size", buffer, "--max-len-b", "3"], BAD)
    assert res.exit_code == 0, res.output
    assert res.stdout.count("\n") == 5  # every line translated, none lost
    warnings = [l for l in res.stderr.splitlines() if "warning" in l]
    assert warnings == [WARN.format("<stdin>", 2), WARN.format("<stdin>", 4)]


@pytest.mark.slow
def test_file_pipe_and_stdin_file_decode_alike(random_ckpt, tmp_path):
    """The same bytes from --input, from a regular file on stdin and through a pipe: same output."""
    src = tmp_path / "in.txt"
    src.write_bytes(BAD)
    base = [sys.executable, "-m", "nmtkit.cli.translate", "--path", str(random_ckpt), "--threads", "1", "-q", "--max-len-b", "3"]
    from_file = subprocess.run([*base, "--input", str(src)], capture_output=True, timeout=120)
    with open(src, "rb") as fh:
        from_stdin_file = subprocess.run(base, stdin=fh, capture_output=True, timeout=120)
    cat = subprocess.Popen(["cat", str(src)], stdout=subprocess.PIPE)
    from_pipe = subprocess.run(base, stdin=cat.stdout, capture_output=True, timeout=120)
    cat.wait()
    for proc in (from_file, from_stdin_file, from_pipe):
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == from_file.stdout and proc.stdout.count(b"\n") == 5
    assert from_file.stderr.decode().splitlines() == [WARN.format(src, 2), WARN.format(src, 4)]
    assert from_pipe.stderr.decode().splitlines() == [WARN.format("<stdin>", 2), WARN.format("<stdin>", 4)]
    strict = subprocess.run([*base, "--input", str(src), "--strict"], capture_output=True, timeout=120)
    assert strict.returncode == 1 and strict.stdout.count(b"\n") == 1
    assert strict.stderr.decode().strip() == f"nmtkit-translate: error: {src}:2: invalid UTF-8 at byte 4"


def test_iter_input_lines_strict_yields_the_error_last(tmp_path):
    src = tmp_path / "in.txt"
    src.write_bytes(BAD)
    with open(src, "rb") as fh:
        items = list(iter_input_lines(fh, "in.txt", strict=True))
    assert [t for _, t in items[:1]] == ["the cat"] and len(items) == 2
    assert str(items[1][1]) == "in.txt:2: invalid UTF-8 at byte 4"


def test_nbest_gives_every_line_n_entries_blank_ones_too(random_ckpt):
    res = invoke_translate(["--path", str(random_ckpt), "--nbest", "3", "--beam", "3", "--max-len-b", "3"], b"the cat\n\n   \nthe dog\n")
    assert res.exit_code == 0, res.output
    ids = [l.split(" ||| ")[0] for l in res.stdout.splitlines()]
    assert ids == ["0"] * 3 + ["1"] * 3 + ["2"] * 3 + ["3"] * 3
    blank = [l for l in res.stdout.splitlines() if l.startswith("1 |||")]
    assert blank == ["1 |||  ||| 0.0000"] * 3
    res = invoke_translate(["--path", str(random_ckpt), "--nbest", "2", "--beam", "2", "-v"], b"\n")
    assert [l.split("\t")[0] for l in res.stdout.splitlines()] == ["S-0"] + ["H-0", "D-0", "P-0", "A-0"] * 2
