"""Translate's progress bar on a terminal: the total is known when the input is a file."""
from __future__ import annotations

import io

from click.testing import CliRunner
from rich.console import Console

from nmtkit.utils.progress import count_lines


def test_count_lines(tmp_path):
    (tmp_path / "a").write_bytes(b"x\ny\n")
    (tmp_path / "b").write_bytes(b"x\ny")
    (tmp_path / "c").write_bytes(b"")
    assert [count_lines(tmp_path / n) for n in "abc"] == [2, 2, 0]
    assert count_lines(tmp_path) is None and count_lines(tmp_path / "none") is None and count_lines("/dev/null") is None


def test_the_progress_bar_of_a_file_input_has_its_total(random_ckpt, tmp_path, monkeypatch):
    import nmtkit.cli.translate as translate_cli
    import nmtkit.utils.progress as progress

    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=100)
    monkeypatch.setattr(progress, "console", terminal)  # stderr as a terminal: the live bar is drawn
    monkeypatch.setattr(translate_cli, "console", terminal)
    src = tmp_path / "in.txt"
    src.write_text("the cat sits .\nthe dog runs .\na cat sees the dog .\n", encoding="utf-8")
    res = CliRunner().invoke(translate_cli.command, ["--path", str(random_ckpt), "--input", str(src), "--device", "cpu",
                                                     "--beam", "1"])
    assert res.exit_code == 0, res.output
    drawn = screen.getvalue()
    assert "3/3" in drawn and "/?" not in drawn, drawn[-500:]
