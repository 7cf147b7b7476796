"""A failed checkpoint or log write (``ulimit -f``, a full disk) is one line naming the file, exit
status 1, the previous file byte-identical and no temporary file left (issue 20, kind 4).

The commands run in subprocesses: the file-size limit and stderr must be their own."""
from __future__ import annotations

import errno
import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from nmtkit.cli.train import command as train
from nmtkit.errors import OutputError
from nmtkit.train.run_log import append_record, record_line

from tests.helpers import make_checkpoint


def train_args(data: Path, save: Path, *extra: str) -> list[str]:
    return [str(data), "--arch", "luong_tiny", "--save-dir", str(save), "--batch-size", "2", "--seed", "3",
            "--no-progress", "--threads", "1", "--device", "cpu", *extra]


def run_limited(module: str, args: list[str], max_file_bytes: int | None = None) -> subprocess.CompletedProcess:
    """``python -m module args`` with ``RLIMIT_FSIZE`` at ``max_file_bytes`` (the limit of ``ulimit -f``)."""

    def limit() -> None:
        if max_file_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          preexec_fn=limit, timeout=300)


def error_line(proc: subprocess.CompletedProcess) -> str:
    """The one error line, last on stderr (where the console's progress lines go too)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert [line for line in lines if ": error: " in line] == lines[-1:], proc.stderr
    return lines[-1]


def temp_files(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


@pytest.fixture
def trained(data_dir: Path, tmp_path: Path) -> Path:
    """One epoch of luong_tiny (3 updates): checkpoint_last.pt and friends (about 4 MB each)."""
    save = tmp_path / "c"
    res = CliRunner().invoke(train, train_args(data_dir, save, "--max-epoch", "1"))
    assert res.exit_code == 0, res.output
    return save


@pytest.mark.slow
def test_train_past_ulimit_f_is_one_line_and_keeps_the_checkpoint(data_dir, trained):
    before = (trained / "checkpoint_last.pt").read_bytes()
    limit = len(before) // 2  # the log and the plot fit, a checkpoint does not
    proc = run_limited("nmtkit.cli.train", train_args(data_dir, trained, "--max-epoch", "2"), limit)
    assert proc.returncode == 1, proc.stderr
    assert error_line(proc) == f"nmtkit-train: error: {trained / 'checkpoint_last.pt'}: File too large"
    assert (trained / "checkpoint_last.pt").read_bytes() == before
    assert temp_files(trained) == []
    for line in (trained / "train_log.jsonl").read_text().splitlines():
        json.loads(line)


def test_average_output_past_ulimit_f_is_one_line_and_keeps_the_old_output(tmp_path):
    inputs = [make_checkpoint(tmp_path / f"c{i}.pt", seed=i) for i in range(2)]
    out = tmp_path / "avg.pt"
    shutil.copyfile(inputs[0], out)  # an earlier average that must survive
    before = out.read_bytes()
    proc = run_limited("nmtkit.cli.average", ["-i", *map(str, inputs), "-o", str(out)], len(before) // 2)
    assert proc.returncode == 1, proc.stderr
    assert error_line(proc) == f"nmtkit-average: error: {out}: File too large"
    assert out.read_bytes() == before
    assert temp_files(tmp_path) == []


@pytest.fixture
def tiny_tmpfs(tmp_path: Path):  # noqa: ANN201
    """A factory mounting a tmpfs of a given size (root only; the test is skipped otherwise)."""
    mounted: list[Path] = []

    def mount(size_bytes: int) -> Path:
        point = tmp_path / f"tmpfs{len(mounted)}"
        point.mkdir()
        if shutil.which("mount") is None or os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root and mount(8)")
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(point)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", str(point)], check=False)


@pytest.mark.slow
def test_train_on_a_full_disk_is_one_line_and_keeps_the_checkpoint(data_dir, trained, tiny_tmpfs):
    size = (trained / "checkpoint_last.pt").stat().st_size
    save = tiny_tmpfs(size + size // 2)  # room for the checkpoint, not for its replacement beside it
    for name in ("checkpoint_last.pt", "train_log.jsonl"):
        shutil.copyfile(trained / name, save / name)
    before = (save / "checkpoint_last.pt").read_bytes()
    proc = run_limited("nmtkit.cli.train", train_args(data_dir, save, "--max-epoch", "2", "--no-epoch-checkpoints"))
    assert proc.returncode == 1, proc.stderr
    assert error_line(proc) == f"nmtkit-train: error: {save / 'checkpoint_last.pt'}: No space left on device"
    assert (save / "checkpoint_last.pt").read_bytes() == before
    assert temp_files(save) == []


def test_average_on_a_full_disk_is_one_line(tmp_path, tiny_tmpfs):
    inputs = [make_checkpoint(tmp_path / f"c{i}.pt", seed=i) for i in range(2)]
    out = tiny_tmpfs(inputs[0].stat().st_size // 2) / "avg.pt"
    proc = run_limited("nmtkit.cli.average", ["-i", *map(str, inputs), "-o", str(out)])
    assert proc.returncode == 1, proc.stderr
    assert error_line(proc) == f"nmtkit-average: error: {out}: No space left on device"
    assert list(out.parent.iterdir()) == []


def test_a_failed_log_append_leaves_no_torn_record(tmp_path, monkeypatch):
    log = tmp_path / "train_log.jsonl"
    append_record(log, {"event": "start"})
    before = log.read_bytes()
    real_write = os.write

    def half_then_full(fd: int, data) -> int:  # noqa: ANN001
        if len(data) > 4:
            return real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(OutputError) as err:
        append_record(log, {"event": "train", "loss": 1.5, "text": "x" * 40})
    monkeypatch.setattr(os, "write", real_write)
    assert str(err.value) == f"{log}: No space left on device"
    assert log.read_bytes() == before


def test_log_records_are_strict_json_with_non_finite_numbers_as_null():
    line = record_line({"loss": float("nan"), "gnorm": float("inf"), "nested": {"ppl": -float("inf")},
                        "history": [1.0, float("nan")], "update": 3})
    assert "NaN" not in line and "Infinity" not in line
    assert json.loads(line) == {"loss": None, "gnorm": None, "nested": {"ppl": None}, "history": [1.0, None], "update": 3}
