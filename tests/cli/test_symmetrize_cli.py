"""``nmtkit-symmetrize``: the guided-alignment recipe's symmetrization as a command."""
from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from nmtkit.cli.symmetrize import command as symmetrize
from nmtkit.evaluate.symmetrize import grow_diag_final_and, intersect


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


FWD = "0-0 1-1 2-1\n0-0 1-2\n"
REV = "0-0 1-1 2-2\n0-0 1-1\n"


def links(line: str) -> set[tuple[int, int]]:
    return {tuple(map(int, link.split("-"))) for link in line.split()}


def test_symmetrize_writes_both_directions(tmp_path: Path) -> None:
    fwd, rev = write(tmp_path / "a.fwd", FWD), write(tmp_path / "a.rev", REV)
    out, flipped = tmp_path / "en-de.align", tmp_path / "de-en.align"
    res = CliRunner().invoke(symmetrize, [fwd, rev, "-o", str(out), "--flipped-output", str(flipped)])
    assert res.exit_code == 0, res.output
    got = [links(line) for line in out.read_text(encoding="utf-8").splitlines()]
    want = [grow_diag_final_and(links(f), links(r)) for f, r in zip(FWD.splitlines(), REV.splitlines())]
    assert got == want and got[0] != links(FWD.splitlines()[0])
    assert [links(line) for line in flipped.read_text(encoding="utf-8").splitlines()] == [{(j, i) for i, j in s} for s in want]
    res = CliRunner().invoke(symmetrize, [fwd, rev, "--method", "intersect"])
    assert res.exit_code == 0
    assert [links(line) for line in res.stdout.splitlines()] == [intersect(links(f), links(r))
                                                               for f, r in zip(FWD.splitlines(), REV.splitlines())]


def test_bad_inputs_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    fwd, rev = write(tmp_path / "a.fwd", FWD), write(tmp_path / "short.rev", "0-0\n")
    out = tmp_path / "o.align"
    res = CliRunner().invoke(symmetrize, [fwd, rev, "-o", str(out)])
    assert res.exit_code == 1 and res.output.strip() == f"nmtkit-symmetrize: error: {fwd} has 2 lines, {rev} has 1: not the same sentence pairs"
    bad = write(tmp_path / "bad.rev", "0-0\n1:2\n")
    res = CliRunner().invoke(symmetrize, [fwd, bad, "-o", str(out)])
    (line,) = res.output.strip().splitlines()
    assert res.exit_code == 1 and line.startswith(f"nmtkit-symmetrize: error: {bad}:2") and not out.exists()
