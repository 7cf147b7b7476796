"""Shared fixtures: tiny corpora written on the fly (tests never read ../shared)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


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


def make_checkpoint(path: Path, arch: str = "luong_tiny", seed: int = 0, words: str | None = None,
                    langs: tuple[str, str] = ("en", "de"), **overrides) -> Path:
    """An untrained but complete checkpoint (random weights) over a small vocabulary: fast to build,
    enough for everything that does not depend on translation quality."""
    from collections import Counter

    from nmtkit.data.dictionary import Dictionary
    from nmtkit.data.text_pipeline import TextPipeline
    from nmtkit.models import registry
    from nmtkit.checkpoint import model_payload, save_checkpoint

    vocab = (words or "the a cat dog sees sits runs man sleeps . , Anna die der eine Katze Hund sieht sitzt läuft Mann schläft").split()
    d = Dictionary.build(Counter(vocab))
    torch.manual_seed(seed)
    name, cfg = registry.resolve_config(arch, overrides)
    model = registry.build_model(name, cfg, d, d)
    save_checkpoint(path, model_payload(model, arch, TextPipeline(langs[0]), TextPipeline(langs[1])))
    return path


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


def train_sample_model(root: Path, n_test: int, max_update: int) -> Path:
    """A sample corpus (2,000 training pairs, rare words as <unk>) under root/raw, preprocessed to
    root/bin, and rnnsearch_tiny trained on it for ``max_update`` updates into root/ckpt."""
    from click.testing import CliRunner

    from nmtkit.cli.preprocess import command as preprocess
    from nmtkit.cli.train import command as train
    from nmtkit.sample import generate_corpus

    raw = root / "raw"
    generate_corpus(raw, seed=1, n_train=2000, n_valid=20, n_test=n_test)
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(raw / "train"), "--validpref",
                                          str(raw / "valid"), "--destdir", str(root / "bin"), "--thresholdsrc", "2",
                                          "--thresholdtgt", "2"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(train, [str(root / "bin"), "--arch", "rnnsearch_tiny", "--save-dir", str(root / "ckpt"),
                                     "--batch-size", "16", "--lr", "0.005", "--max-update", str(max_update), "--max-epoch", "0",
                                     "--seed", "1", "--threads", "1", "--device", "cpu", "--no-progress"])
    assert res.exit_code == 0, res.output
    return root


@pytest.fixture
def random_ckpt(tmp_path: Path) -> Path:
    return make_checkpoint(tmp_path / "random.pt")


def search_options(**kw):  # noqa: ANN003, ANN201
    """``SearchOptions`` with the unbounded lengths the search tests were written for (no
    ``--max-len-a``, 200 tokens) unless a test sets them."""
    from nmtkit.generate.search import SearchOptions

    return SearchOptions(**{"max_len_a": 0.0, "max_len_b": 200, **kw})


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
