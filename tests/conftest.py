"""Shared fixtures: tiny corpora written on the fly (tests never read ../shared). It applies to
every folder under tests/; the plain helper functions live in tests/helpers.py."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.helpers import make_checkpoint, write

torch.set_num_threads(1)


@pytest.fixture
def tiny_parallel(tmp_path: Path) -> Path:
    """A 6-pair en-de corpus under tmp_path/raw/{train,valid,test}.{en,de}; returns the raw dir."""
    en = ["the cat sits .", "the dog runs .", "a cat sees the dog .", "the dog sees a cat .", "Anna sees the cat .", "the man sleeps ."]
    de = ["die Katze sitzt .", "der Hund läuft .", "eine Katze sieht den Hund .", "der Hund sieht eine Katze .", "Anna sieht die Katze .", "der Mann schläft ."]
    raw = tmp_path / "raw"
    for split in ("train", "valid", "test"):
        write(raw / f"{split}.en", "\n".join(en) + "\n")
        write(raw / f"{split}.de", "\n".join(de) + "\n")
    return raw


@pytest.fixture
def data_dir(tiny_parallel: Path, tmp_path: Path) -> Path:
    """``tiny_parallel`` preprocessed (word level, train + valid) into tmp_path/bin."""
    from click.testing import CliRunner

    from nmtkit.cli.preprocess import command as preprocess

    dest = tmp_path / "bin"
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(tiny_parallel / "train"),
                                          "--validpref", str(tiny_parallel / "valid"), "--destdir", str(dest)])
    assert res.exit_code == 0, res.output
    return dest


@pytest.fixture
def random_ckpt(tmp_path: Path) -> Path:
    return make_checkpoint(tmp_path / "random.pt")


@pytest.fixture
def saved_figures(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """PNG file name -> the matplotlib Figure written there, for commands that plot: lets a
    test check what is drawn, not only that a PNG exists."""
    from nmtkit.evaluate import plots

    figures: dict[str, object] = {}
    real = plots._save_png

    def save(fig, path, stack=None):  # noqa: ANN001, ANN202
        figures[Path(path).name] = fig
        real(fig, path, stack)

    monkeypatch.setattr(plots, "_save_png", save)
    return figures
