"""SIGTERM ends every command like Ctrl-C; temporary files of killed runs are removed
by the next run, never those of a process still writing them."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from nmtkit.cli.preprocess import command as preprocess
from nmtkit.utils.tempfiles import LEGACY_MAX_AGE_S, stale_temps
from nmtkit.utils.textio import atomic_write
from tests.helpers import dead_pid


def test_only_dead_or_old_temporaries_are_stale(tmp_path):
    dead, live = dead_pid(), os.getppid()
    names = {
        f".out.txt.{dead}.abcd_123.tmp": True,
        f".out.txt.{live}.abcd_123.tmp": False,  # its writer is still running
        ".out.txt.abcd_123.tmp": False,  # older nmtkit's name, but fresh
        f".out.txt.old-{dead}": True,
        f".other.txt.{dead}.abcd_123.tmp": False,  # another output's
        "out.txt": False,
    }
    for name in names:
        (tmp_path / name).write_text("x")
    old = tmp_path / ".out.txt.zzzz9999.tmp"
    old.write_text("x")
    t = time.time() - LEGACY_MAX_AGE_S - 60
    os.utime(old, (t, t))
    names[old.name] = True
    assert sorted(p.name for p in stale_temps(tmp_path, "out.txt")) == sorted(n for n, s in names.items() if s)
    with atomic_write(tmp_path / "out.txt") as fh:  # the next write of out.txt clears its leftovers
        fh.write("new\n")
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {n for n, s in names.items() if not s}


def test_preprocess_removes_a_killed_runs_temporary_directory(tiny_parallel, tmp_path):
    dest = tmp_path / "bin"
    killed = tmp_path / f".bin.{dead_pid()}.k1ll3d00.tmp"
    killed.mkdir()
    (killed / "train.en-de.en.bin").write_bytes(b"\0" * 10)
    running = tmp_path / f".bin.{os.getppid()}.runn1ng0.tmp"
    running.mkdir()
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(tiny_parallel / "train"), "--destdir", str(dest)])
    assert res.exit_code == 0, res.output
    assert not killed.exists() and running.exists() and (dest / "meta.json").exists()


def _hidden(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


@pytest.mark.slow
def test_preprocess_sigterm_exits_130_and_leaves_nothing(tmp_path):
    raw = tmp_path / "raw"
    res = subprocess.run([sys.executable, "-m", "nmtkit.cli.main", "sample", "--out", str(raw), "--train", "20000"],
                         capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "nmtkit.cli.preprocess", "-s", "en", "-t", "de", "--trainpref", str(raw / "train"),
                             "--validpref", str(raw / "valid"), "--destdir", str(out / "bin"), "--tokenizer", "moses",
                             "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not _hidden(out) and proc.poll() is None:
        time.sleep(0.02)  # the temporary directory appears once the inputs are read
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err
    assert list(out.iterdir()) == []  # no temporary directory, no half-written destination


@pytest.mark.slow
def test_translate_sigterm_exits_130_and_removes_its_temporary_output(random_ckpt, tmp_path):
    out = tmp_path / "hyp.txt"
    proc = subprocess.Popen([sys.executable, "-m", "nmtkit.cli.translate", "--path", str(random_ckpt), "--threads", "1",
                             "--output", str(out), "--quiet"], stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdin.write(b"the cat sees the dog .\n")
    proc.stdin.flush()
    deadline = time.time() + 60
    while time.time() < deadline and not _hidden(tmp_path):
        time.sleep(0.05)  # the --output temporary file exists once translating has begun
    assert _hidden(tmp_path)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    err = err.decode()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err
    assert _hidden(tmp_path) == [] and not out.exists()


def test_every_command_turns_sigterm_into_an_interrupt():
    import click

    from nmtkit.cli.common import handle_errors

    cleaned = []

    @click.command()
    @handle_errors("nmtkit-x")
    def cmd() -> None:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises before this ends
        finally:
            cleaned.append(True)

    def unhandled(*_args) -> None:  # noqa: ANN002
        raise RuntimeError("SIGTERM reached the default handler")  # rather than killing the test run

    original = signal.signal(signal.SIGTERM, unhandled)
    try:
        res = CliRunner().invoke(cmd, [])
        assert signal.getsignal(signal.SIGTERM) is unhandled  # restored after the command
    finally:
        signal.signal(signal.SIGTERM, original)
    assert res.exit_code == 130 and res.output.strip() == "nmtkit-x: interrupted" and cleaned == [True]


@pytest.mark.slow
def test_sample_sigterm_exits_130_and_leaves_no_temporary_directory(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "nmtkit.cli.main", "sample", "--out", str(tmp_path / "s"),
                             "--train", "1000000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not _hidden(tmp_path):
        time.sleep(0.02)  # the temporary directory appears once writing begins
    assert _hidden(tmp_path)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err
    assert list(tmp_path.iterdir()) == []
