"""Helpers shared by the tests, the one place for them, so that no test module imports another
and each helper has one copy: files and checkpoints (``write``, ``make_checkpoint``, a briefly
trained sample model), search options, tiny models and batches (models/test_models,
models/test_loop_graphs, generate/test_static_search), the exactness tests' models and variants
(models/test_model_exactness, models/test_gemm), a training run through the command line
(``run_train``: train/test_train, train/test_resume and the other training tests) and the checks
of a command's one-line error. The fixtures are in tests/conftest.py."""
from __future__ import annotations

import itertools
import subprocess
import sys
from collections import Counter
from pathlib import Path

import torch
from click.testing import CliRunner

from nmtkit.checkpoint import load_checkpoint, model_payload, save_checkpoint
from nmtkit.cli.preprocess import command as preprocess
from nmtkit.cli.train import command as train
from nmtkit.cli.translate import command as translate
from nmtkit.data.dictionary import BOS_ID, EOS_ID, PAD_ID, Dictionary
from nmtkit.data.text_pipeline import TextPipeline
from nmtkit.generate.search import SearchOptions
from nmtkit.generate.search.fixed_shape import SearchGraphs
from nmtkit.generate.search.topk import CandidateScores
from nmtkit.models import build_model, registry, resolve_config
from nmtkit.models.base import Seq2SeqModel
from nmtkit.sample import generate_corpus


# -- files, checkpoints and search options -------------------------------------------------------
def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def make_checkpoint(path: Path, arch: str = "luong_tiny", seed: int = 0, words: str | None = None,
                    langs: tuple[str, str] = ("en", "de"), **overrides) -> Path:
    """An untrained but complete checkpoint (random weights) over a small vocabulary: fast to build,
    enough for everything that does not depend on translation quality."""
    vocab = (words or "the a cat dog sees sits runs man sleeps . , Anna die der eine Katze Hund sieht sitzt läuft Mann schläft").split()
    d = Dictionary.build(Counter(vocab))
    torch.manual_seed(seed)
    name, cfg = registry.resolve_config(arch, overrides)
    model = registry.build_model(name, cfg, d, d)
    save_checkpoint(path, model_payload(model, arch, TextPipeline(langs[0]), TextPipeline(langs[1])))
    return path


def train_sample_model(root: Path, n_test: int, max_update: int) -> Path:
    """A sample corpus (2,000 training pairs, rare words as <unk>) under root/raw, preprocessed to
    root/bin, and rnnsearch_tiny trained on it for ``max_update`` updates into root/ckpt."""
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


def summed(scores: torch.Tensor) -> CandidateScores:
    """Candidate scores already summed, ``[n, W]``, as the search's top-k forms take them (a
    shift of zero: ``-0.0`` becomes ``+0.0``)."""
    return CandidateScores(scores, scores.new_zeros(scores.size(0)), 1)


def search_options(**kw):  # noqa: ANN003, ANN201
    """``SearchOptions`` with the unbounded lengths the search tests were written for (no
    ``--max-len-a``, 200 tokens) unless a test sets them."""
    return SearchOptions(**{"max_len_a": 0.0, "max_len_b": 200, **kw})


# -- a command's one-line error, processes -------------------------------------------------------
def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in text and "Exception ignored" not in text, text
    return lines[0]


def invoke_translate(args: list[str], stdin: bytes | str = b""):  # noqa: ANN201
    """nmtkit-translate through click, quiet and on one thread."""
    return CliRunner().invoke(translate, ["--quiet", "--threads", "1", *args], input=stdin)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# -- tiny models and batches -------------------------------------------------------------------
def make_dict(n_words: int, prefix: str = "w") -> Dictionary:
    return Dictionary.from_symbols(["<pad>", "<s>", "</s>", "<unk>"] + [f"{prefix}{i}" for i in range(n_words)])


def pad_batch(seqs: list[list[int]], width: int | None = None) -> torch.Tensor:
    width = width or max(len(s) for s in seqs)
    out = torch.full((len(seqs), width), PAD_ID, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s)
    return out


def make_batch(src: list[list[int]], tgt: list[list[int]], src_width: int | None = None):
    """Word-id lists -> (src_tokens, src_lengths, prev_output_tokens, target), </s> appended."""
    src = [s + [EOS_ID] for s in src]
    tgt = [t + [EOS_ID] for t in tgt]
    src_tokens = pad_batch(src, src_width)
    lengths = torch.tensor([len(s) for s in src])
    prev = pad_batch([[BOS_ID] + t[:-1] for t in tgt])
    target = pad_batch(tgt)
    return src_tokens, lengths, prev, target


def random_sentences(gen: torch.Generator, lengths: list[int], vocab: int) -> list[list[int]]:
    return [torch.randint(4, vocab, (n,), generator=gen).tolist() for n in lengths]


def tiny_model(arch: str, vocab: int = 40, seed: int = 0, **overrides) -> Seq2SeqModel:
    torch.manual_seed(seed)
    name, cfg = resolve_config(arch, overrides)
    d = make_dict(vocab - 4)
    return build_model(name, cfg, d, d)


class EagerStatic(SearchGraphs):
    """The fixed-shape search, its steps run eagerly, on any device (the CPU tests' stand-in for
    the CUDA graphs of ``--cuda-graphs``)."""

    def __init__(self, **kw) -> None:  # noqa: ANN003
        super().__init__(sentence_step=4, length_step=8, capture=False, **kw)

    @staticmethod
    def applies(x: torch.Tensor) -> bool:
        return True


# -- the exactness tests' models (test_model_exactness, test_gemm) -----------------------------
VOCAB = 30
NO_DROPOUT = dict(dropout=0.0, dropout_embed=0.0, dropout_hidden=0.0, dropout_output=0.0)


def make_model(arch: str, seed: int = 0, **overrides) -> Seq2SeqModel:
    torch.manual_seed(seed)
    name, cfg = resolve_config(arch, {**NO_DROPOUT, **overrides})
    d = Dictionary.from_symbols(["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(VOCAB - 4)])
    return build_model(name, cfg, d, d)


def batch(seed: int = 5):
    """4 sentence pairs of different lengths (sources 8, 3, 5, 1 + </s>): padding on both sides."""
    gen = torch.Generator().manual_seed(seed)

    def pad(seqs):
        out = torch.full((len(seqs), max(map(len, seqs))), PAD_ID, dtype=torch.long)
        for i, s in enumerate(seqs):
            out[i, : len(s)] = torch.tensor(s)
        return out

    src = [torch.randint(4, VOCAB, (n,), generator=gen).tolist() + [EOS_ID] for n in (8, 3, 5, 1)]
    tgt = [torch.randint(4, VOCAB, (n,), generator=gen).tolist() + [EOS_ID] for n in (4, 7, 2, 5)]
    return pad(src), torch.tensor([len(s) for s in src]), pad([[BOS_ID] + t[:-1] for t in tgt]), pad(tgt)


def _luong_variants():
    out = []
    for attention, score, feed, bidir in itertools.product(
        ("global", "local-m", "local-p"), ("dot", "general", "concat", "location"), (True, False), (False, True)
    ):
        # reversal and depth alternate so that each (attention, feeding, encoder) sees both values
        reverse = score in ("general", "location")
        layers = 2 if (score in ("dot", "location")) != bidir else 1
        out.append(dict(attention=attention, score=score, input_feeding=feed, encoder_bidirectional=bidir,
                        source_reversal=reverse, layers=layers))
    for bidir in (False, True):  # no attention: no input feeding either (a config error)
        out.append(dict(attention="none", input_feeding=False, encoder_bidirectional=bidir, source_reversal=bidir, layers=2))
    # a wider bidirectional encoder than the decoder (annotations of 18 against hidden_size 12)
    for attention, score, layers in (("global", "general", 2), ("local-p", "concat", 1), ("local-m", "location", 2)):
        out.append(dict(attention=attention, score=score, input_feeding=True, encoder_bidirectional=True,
                        encoder_hidden_size=9, source_reversal=False, layers=layers))
    out.append(dict(attention="none", input_feeding=False, encoder_bidirectional=True, encoder_hidden_size=9,
                    source_reversal=True, layers=2))
    return out


def _vid(o: dict) -> str:
    return "-".join([o["attention"], o.get("score", ""), "feed" if o["input_feeding"] else "nofeed",
                     "bi" if o["encoder_bidirectional"] else "uni", "rev" if o["source_reversal"] else "fwd",
                     f"L{o['layers']}"] + ([f"enc{o['encoder_hidden_size']}"] if "encoder_hidden_size" in o else []))


# -- training through the command line ---------------------------------------------------------
def run_train(data: Path, save: Path, *extra: str):
    args = [str(data), "--arch", "luong_tiny", "--save-dir", str(save), "--batch-size", "2", "--seed", "7",
            "--no-progress", "--dropout", "0.3", *extra]
    return CliRunner().invoke(train, args)


def params(path: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(path)["model"]
