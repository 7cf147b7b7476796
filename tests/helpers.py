"""Helpers shared by the tests, so that no test module imports another: tiny models and
batches (test_models, test_loop_graphs, test_static_search), the exactness tests' models and
variants (test_model_exactness, test_gemm), and a training run through the command line
(test_train, test_resume, test_ema, test_guided_alignment)."""
from __future__ import annotations

import itertools
from pathlib import Path

import torch
from click.testing import CliRunner

from nmtkit.checkpoint import load_checkpoint
from nmtkit.cli.train import command as train
from nmtkit.data.dictionary import BOS_ID, EOS_ID, PAD_ID, Dictionary
from nmtkit.generate.search.fixed_shape import SearchGraphs
from nmtkit.models import build_model, resolve_config
from nmtkit.models.base import Seq2SeqModel

# -- tiny models and batches -------------------------------------------------------------------
def make_dict(n_words: int) -> Dictionary:
    return Dictionary.from_symbols(["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(n_words)])


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
