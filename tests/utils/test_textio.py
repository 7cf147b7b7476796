"""Reading and writing files: BOMs dropped, failed writes named by the user's path with the
previous file intact and no temporary left, outputs readable by others (umask, not 0600)."""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from nmtkit.errors import InputError, OutputError
from nmtkit.utils.atomic_dir import atomic_directory
from nmtkit.utils.textio import atomic_write, ensure_dir, read_lines


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


# -- BOM ------------------------------------------------------------------------------------
def test_bom_is_dropped_where_it_starts_a_line(tmp_path):
    """At the start of any line (``cat a.txt b.txt`` puts b.txt's there), not only the first:
    kept, it glued itself to the line's first word.  Inside a line it is text (a no-break space)."""
    p = tmp_path / "x.txt"
    p.write_bytes(b"\xef\xbb\xbfA b\n\xef\xbb\xbfC\nx\xef\xbb\xbfy\n")
    assert read_lines(p) == ["A b", "C", "x\ufeffy"]


def test_bom_with_crlf_and_a_bom_only_file(tmp_path):
    p = tmp_path / "x.txt"
    p.write_bytes(b"\xef\xbb\xbfA\r\nB\r\n")
    assert read_lines(p) == ["A", "B"]
    p.write_bytes(b"\xef\xbb\xbf\n")
    assert read_lines(p) == [""]


# -- permissions ----------------------------------------------------------------------------
def test_atomic_write_gives_the_usual_permissions(tmp_path, umask_022):
    with atomic_write(tmp_path / "out.txt") as fh:
        fh.write("x\n")
    assert mode(tmp_path / "out.txt") == 0o644


def test_atomic_write_follows_the_umask_and_keeps_an_existing_files_mode(tmp_path):
    old = os.umask(0o077)
    try:
        with atomic_write(tmp_path / "private.txt") as fh:
            fh.write("x\n")
    finally:
        os.umask(old)
    assert mode(tmp_path / "private.txt") == 0o600
    target = tmp_path / "shared.txt"
    target.write_text("old\n")
    target.chmod(0o640)
    with atomic_write(target) as fh:
        fh.write("new\n")
    assert mode(target) == 0o640 and target.read_text() == "new\n"


def test_atomic_directory_gives_the_usual_permissions(tmp_path, umask_022):
    with atomic_directory(tmp_path / "d") as tmp:
        with atomic_write(tmp / "a.txt") as fh:
            fh.write("a\n")
    assert mode(tmp_path / "d") == 0o755 and mode(tmp_path / "d" / "a.txt") == 0o644


# -- failed writes ----------------------------------------------------------------------------
def test_enospc_while_writing_names_the_path_keeps_the_old_file_and_removes_the_temp(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("previous\n")
    with pytest.raises(OutputError) as info:
        with atomic_write(target) as fh:
            fh.write("partial\n")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert str(info.value) == f"{target}: No space left on device"
    assert target.read_text() == "previous\n" and leftovers(tmp_path) == []


def test_enospc_at_the_final_flush_is_caught_too(tmp_path, monkeypatch):
    target = tmp_path / "out.bin"

    def full(fd):  # noqa: ANN001
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OutputError, match=r"out\.bin: No space left on device"):
        with atomic_write(target, "wb") as fh:
            fh.write(b"data")
    assert not target.exists() and leftovers(tmp_path) == []


def test_an_unrelated_oserror_inside_the_block_is_not_blamed_on_the_output(tmp_path):
    with pytest.raises(FileNotFoundError):
        with atomic_write(tmp_path / "out.txt") as fh:
            fh.write("x")
            open(tmp_path / "missing-input.txt")  # noqa: SIM115 - an input the caller reads
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_directory_names_the_users_path_not_the_temporary_one(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(OutputError) as info:
            with atomic_write(ro / "data.txt") as fh:
                fh.write("x")
        assert str(info.value) == f"{ro / 'data.txt'}: Permission denied"
        with pytest.raises(OutputError) as info:
            with atomic_directory(ro / "data"):
                pass
        assert str(info.value) == f"{ro / 'data'}: Permission denied"
        assert ".tmp" not in str(info.value)
    finally:
        ro.chmod(0o755)


def test_permission_denied_on_the_temporary_file_names_the_users_path(tmp_path, monkeypatch):
    """The same as above where the tests run as root: mkstemp fails naming its own path."""
    import tempfile

    def denied(prefix: str, suffix: str, dir: Path):  # noqa: A002, ANN202
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.path.join(dir, f"{prefix}abc123{suffix}"))

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    monkeypatch.setattr(tempfile, "mkdtemp", denied)
    for writer in (atomic_write, atomic_directory):
        with pytest.raises(OutputError) as info:
            with writer(tmp_path / "data"):
                pass
        assert str(info.value) == f"{tmp_path / 'data'}: Permission denied"


def test_a_parent_that_is_a_file_is_named_as_such(tmp_path):
    (tmp_path / "f").write_text("a file\n")
    for path in (tmp_path / "f" / "out.txt", tmp_path / "f" / "sub" / "out.txt"):
        with pytest.raises(OutputError) as info:
            with atomic_write(path) as fh:
                fh.write("x")
        assert str(info.value) == f"{path}: {tmp_path / 'f'} is a file, not a directory"
    with pytest.raises(OutputError, match="is a file, not a directory"):
        ensure_dir(tmp_path / "f" / "plots")


def test_error_inside_an_atomic_directory_names_the_file_under_dest(tmp_path, monkeypatch):
    dest = tmp_path / "corpus"
    with pytest.raises(OutputError) as info:
        with atomic_directory(dest) as tmp:
            with atomic_write(tmp / "train.en") as fh:
                fh.write("x")
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert str(info.value) == f"{dest / 'train.en'}: No space left on device"
    with pytest.raises(OutputError) as info:
        with atomic_directory(dest) as tmp:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp / "train.bin"))
    assert str(info.value) == f"{dest / 'train.bin'}: No space left on device"
    assert not dest.exists() and leftovers(tmp_path) == []


def test_atomic_write_refuses_a_directory_target(tmp_path):
    with pytest.raises(OutputError, match="is a directory"):
        with atomic_write(tmp_path) as fh:
            fh.write("x")


def test_read_errors_are_still_input_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_lines(tmp_path / "nope.txt")


class _FailingStream:
    """One good line, then a read that fails as a hung-up terminal or /proc/self/mem does."""

    def __init__(self) -> None:
        self.lines = [b"good line\n"]

    def __iter__(self):  # noqa: ANN204
        return self

    def __next__(self) -> bytes:
        if self.lines:
            return self.lines.pop()
        raise OSError(5, "Input/output error")


def test_a_failed_read_names_the_input_and_line():
    from nmtkit.errors import InputError
    from nmtkit.utils.textio import iter_binary_lines

    got = []
    with pytest.raises(InputError, match=r"^in\.txt:2: read error: Input/output error$"):
        for item in iter_binary_lines(_FailingStream(), "in.txt"):
            got.append(item)
    assert got == [(1, "good line")]


def test_a_failed_read_ends_streamed_input_with_an_error_after_the_lines_before():
    from nmtkit.errors import InputError
    from nmtkit.utils.streaming import iter_input_lines

    items = list(iter_input_lines(_FailingStream(), "<stdin>"))
    assert items[0] == (0, "good line") and len(items) == 2
    assert isinstance(items[1][1], InputError) and str(items[1][1]) == "<stdin>:2: read error: Input/output error"


def test_atomic_write_writes_through_a_symlink(tmp_path):
    """An output path that is a symlink (a results file linked into place) keeps the link and
    replaces its target, as a shell's > does; a dangling link creates its target."""
    from nmtkit.utils.textio import atomic_write

    real, link = tmp_path / "real.txt", tmp_path / "link.txt"
    real.write_text("old\n", encoding="utf-8")
    link.symlink_to(real.name)
    with atomic_write(link) as fh:
        fh.write("new\n")
    assert link.is_symlink() and real.read_text(encoding="utf-8") == "new\n"
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to("made.txt")
    with atomic_write(dangling) as fh:
        fh.write("x\n")
    assert dangling.is_symlink() and (tmp_path / "made.txt").read_text(encoding="utf-8") == "x\n"
