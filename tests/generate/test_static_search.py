"""The fixed-shape executor of nmtkit.generate.search against its eager executor (test_beam.py
runs its hand-computed cases through both): tiny models of every type
under every search option, batch after batch through one SearchGraphs (run eagerly here; on a
CUDA GPU, captured)."""
from __future__ import annotations

import pytest
import torch

from nmtkit.generate.search import SearchOptions, beam_search
from nmtkit.generate.ensemble import EnsembleModel
from nmtkit.generate.search.fixed_shape import SearchGraphs
from nmtkit.generate.search.topk import exact_topk, topk_ordered
from tests.helpers import EagerStatic, make_batch, random_sentences, summed, tiny_model

torch.set_num_threads(1)


@pytest.mark.parametrize("seed", range(5))
def test_exact_topk_orders_as_topk_ordered(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-6, 3, (7, 40), generator=g).float() / 2  # many ties
    x[0, :5] = float("-inf")
    x[1] = float("-inf")
    x[2, 3] = -0.0
    x[2, 9] = 0.0
    for k in (1, 3, 10):
        v1, i1 = exact_topk(x, k)
        v2, i2 = topk_ordered(summed(x), k)
        finite = v2 > float("-inf")  # which of several -inf comes first is unspecified (never a candidate)
        assert torch.equal(v1, v2) and torch.equal(i1[finite], i2[finite])


def _same(a, b) -> None:  # noqa: ANN001
    """The same hypotheses, in the same order; numbers equal up to the rounding of products of
    other shapes (the fixed-shape search decodes padded batches that never shrink)."""
    assert len(a) == len(b)
    for ha, hb in zip(a, b):
        assert [h.tokens for h in ha] == [h.tokens for h in hb]
        for x, y in zip(ha, hb):
            assert x.length == y.length and x.score == pytest.approx(y.score, abs=1e-5)
            torch.testing.assert_close(x.positional_scores, y.positional_scores, atol=1e-5, rtol=1e-5)
            assert (x.attention is None) == (y.attention is None)
            if x.attention is not None:
                torch.testing.assert_close(x.attention, y.attention, atol=1e-5, rtol=1e-5)


def _batch(seed: int, n: int, vocab: int = 40):
    gen = torch.Generator().manual_seed(seed)
    src = random_sentences(gen, [1 + (5 * i + seed) % 13 for i in range(n)], vocab)
    src_tokens, lengths, _, _ = make_batch(src, [[4]] * n)
    return src_tokens, lengths


MODELS = [("luong_tiny", {}), ("luong_tiny", {"attention": "local-p", "encoder_bidirectional": True}),
          ("luong_tiny", {"attention": "local-m", "score": "location"}), ("luong_tiny", {"attention": "none", "input_feeding": False}),
          ("rnnsearch_tiny", {}), ("rnnencdec_tiny", {})]
OPTIONS = [dict(beam=1), dict(beam=3, nbest=3, lenpen=0.6), dict(beam=5, nbest=2, lenpen=1.0, lenpen_form="gnmt", min_len=2),
           dict(beam=4, nbest=4, max_len_a=0.5, max_len_b=1, unkpen=0.5)]


@pytest.mark.parametrize("arch,overrides", MODELS, ids=lambda v: str(v))
def test_every_model_and_option_batch_after_batch(arch: str, overrides: dict) -> None:
    model = EnsembleModel([tiny_model(arch, **overrides)])
    for opts in OPTIONS:
        graphs = EagerStatic()
        for seed, n in ((1, 6), (2, 5), (3, 9)):  # the second batch reuses the first's buffers
            src, lengths = _batch(seed, n)
            o = SearchOptions(**{"max_len_b": 12, **opts})
            for attention in (True, False):
                _same(beam_search(model, src, lengths, o, return_attention=attention, searcher=graphs),
                      beam_search(model, src, lengths, o, return_attention=attention))
        assert len(graphs.graphs) < 6  # equal shapes share buffers


def test_an_ensemble() -> None:
    model = EnsembleModel([tiny_model("luong_tiny", seed=1), tiny_model("rnnsearch_tiny", seed=2)])
    o = SearchOptions(beam=4, nbest=4, max_len_b=10)
    graphs = EagerStatic()
    for seed in (1, 2):
        src, lengths = _batch(seed, 7)
        _same(beam_search(model, src, lengths, o, searcher=graphs), beam_search(model, src, lengths, o))


@pytest.mark.parametrize("limit", [dict(max_shapes=0), dict(max_buffer_bytes=1000)])
def test_a_full_cache_or_huge_buffers_take_the_eager_search(limit: dict) -> None:
    model = EnsembleModel([tiny_model("luong_tiny")])
    graphs = EagerStatic(**limit)
    src, lengths = _batch(1, 6)
    o = SearchOptions(beam=3, max_len_b=12)
    assert graphs.search(model, src, lengths, o, True) is None
    _same(beam_search(model, src, lengths, o, searcher=graphs), beam_search(model, src, lengths, o))
    assert not graphs.graphs


def test_options_that_act_on_the_host_share_a_graph() -> None:
    model = EnsembleModel([tiny_model("luong_tiny")])
    graphs = EagerStatic()
    src, lengths = _batch(1, 6)
    for o in (SearchOptions(beam=3, max_len_b=12), SearchOptions(beam=3, max_len_b=10, nbest=2, lenpen=0.5)):
        _same(beam_search(model, src, lengths, o, searcher=graphs), beam_search(model, src, lengths, o))
    assert len(graphs.graphs) == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("amp", [None, torch.bfloat16])
@pytest.mark.parametrize("arch,overrides", MODELS, ids=lambda v: str(v))
def test_captured_search_gives_the_eager_search_on_cuda(arch: str, overrides: dict, amp) -> None:  # noqa: ANN001
    torch.backends.cuda.matmul.allow_tf32 = False
    model = EnsembleModel([tiny_model(arch, **overrides).cuda()])
    graphs = SearchGraphs(sentence_step=4, length_step=8)
    eager = SearchGraphs(sentence_step=4, length_step=8, capture=False)
    o = SearchOptions(beam=3, nbest=3, max_len_b=12, lenpen=0.6)
    with torch.autocast("cuda", dtype=amp or torch.float32, enabled=amp is not None):
        for seed, n in ((1, 6), (2, 5)):
            src, lengths = (t.cuda() for t in _batch(seed, n))
            _same(beam_search(model, src, lengths, o, searcher=graphs), beam_search(model, src, lengths, o, searcher=eager))
    assert graphs.replays > 0 and len(graphs.graphs) >= 1
