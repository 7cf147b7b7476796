"""Forced decoding: reference scores agree with what beam search computed step by step."""
from __future__ import annotations

import math

import pytest
import torch
from tests.generate_stubs import TinyConfig, TinyLSTM, lstm_dicts, pad_batch

from nmtkit.generate.search import beam_search
from nmtkit.generate.ensemble import EnsembleModel
from nmtkit.data.dataset import pad_sequences
from nmtkit.data.text_pipeline import TextPipeline
from nmtkit.generate.bundle import ModelBundle
from nmtkit.generate.forced import score_corpus, score_references, shift_right
from tests.helpers import search_options


def sources():
    g = torch.Generator().manual_seed(5)
    return [torch.randint(4, 9, (n,), generator=g).tolist() + [2] for n in (4, 1, 7, 3)]


def lstm(seed: int, attention: bool = True) -> TinyLSTM:
    sd, td = lstm_dicts()
    return TinyLSTM(sd, td, TinyConfig(seed=seed, eos_bias=3.0), attention=attention)


@pytest.mark.parametrize("members", [[0], [0, 7], [0, 7, 9]])
def test_forced_scores_equal_beam_step_scores(members):
    models = [lstm(s, attention=(s != 9)) for s in members]
    ens = EnsembleModel(models)
    srcs = sources()
    toks, lens = pad_batch(srcs)
    nbest = beam_search(ens, toks, lens, search_options(beam=3, nbest=3, max_len_a=1.0, max_len_b=3))
    pairs = [(srcs[i], h) for i, hyps in enumerate(nbest) for h in hyps]
    src, slen = collate([p[0] for p in pairs])
    tgt, tlen = collate([p[1].tokens + [2] for p in pairs])
    results = score_references(ens, src, slen, tgt, tlen)
    assert len({len(h.tokens) for _, h in pairs}) > 1  # references of different lengths share a batch
    for (s, h), r in zip(pairs, results):
        assert r.tokens == h.tokens
        assert r.num_tokens == len(h.tokens) + 1 == h.positional_scores.numel()
        assert torch.allclose(r.positional_scores, h.positional_scores, atol=1e-5)
        assert r.log_prob == pytest.approx(h.log_prob, abs=1e-4)
        assert r.attention.shape == (len(h.tokens) + 1, len(s))
        assert torch.allclose(r.attention, h.attention, atol=1e-5)


def test_forced_ensemble_is_log_mean_exp_of_members():
    a, b = lstm(1), lstm(2)
    srcs = sources()
    refs = [[5, 6, 2], [7, 2], [4, 4, 4, 9, 2], [2]]
    src, slen = collate(srcs)
    tgt, tlen = collate(refs)
    ra = score_references(EnsembleModel([a]), src, slen, tgt, tlen)
    rb = score_references(EnsembleModel([b]), src, slen, tgt, tlen)
    rab = score_references(EnsembleModel([a, b]), src, slen, tgt, tlen)
    for x, y, xy in zip(ra, rb, rab):
        expected = [math.log((math.exp(p) + math.exp(q)) / 2) for p, q in zip(x.positional_scores.tolist(), y.positional_scores.tolist())]
        assert xy.positional_scores.tolist() == pytest.approx(expected, abs=1e-5)
        assert torch.allclose(xy.attention, (x.attention + y.attention) / 2, atol=1e-6)
    assert ra[3].tokens == [] and ra[3].num_tokens == 1  # an empty reference still scores </s>


def collate(seqs):  # noqa: ANN001, ANN201 - sequences that already end with </s>
    return pad_sequences(seqs, append_eos=False)


def test_no_attention_gives_none():
    m = lstm(3, attention=False)
    src, slen = collate(sources()[:2])
    tgt, tlen = collate([[5, 2], [6, 6, 2]])
    r = score_references(EnsembleModel([m]), src, slen, tgt, tlen)
    assert all(x.attention is None for x in r)


def test_score_corpus_keeps_input_order_and_matches_single_scoring():
    m = EnsembleModel([lstm(4)])
    srcs = sources()
    refs = [[5, 6, 2], [7, 2], [4, 4, 4, 9, 2], [8, 2]]
    bundle = ModelBundle.of_model(m, TextPipeline("x"), TextPipeline("y"), torch.device("cpu"), batch_size=3)
    many = score_corpus(bundle, srcs, refs)
    for s, t, r in zip(srcs, refs, many):
        (one,) = score_references(m, *collate([s]), *collate([t]))
        assert r.tokens == t[:-1]
        assert r.log_prob == pytest.approx(one.log_prob, abs=1e-5)
        assert r.perplexity == pytest.approx(math.exp(-one.log_prob / len(t)), rel=1e-5)


def test_padding_and_shift():
    toks, lens = collate([[5, 6, 2], [7, 2]])
    assert toks.tolist() == [[5, 6, 2], [7, 2, 0]] and lens.tolist() == [3, 2]
    assert shift_right(toks, lens).tolist() == [[1, 5, 6], [1, 7, 0]]
