"""The search's decoder step through CUDA graphs (nmtkit.generate.step_graphs).

On the CPU, an eager stand-in for the capture checks the padding and copying: the same
hypotheses (tokens, scores, attention cut to the source) as the plain search, over batches
that shrink as sentences finish, for every model type and an ensemble.  On a CUDA GPU, the
real graphs are checked against the eager search."""
from __future__ import annotations

import pytest
import torch

from nmtkit.generate.beam import SearchOptions, beam_search
from nmtkit.generate.ensemble import EnsembleModel
from nmtkit.generate.step_graphs import SearchStepGraphs, _Captured, _rebuild, pad_source
from test_models import make_batch, random_sentences, tiny_model

torch.set_num_threads(1)


class _EagerGraph:
    def __init__(self, run) -> None:  # noqa: ANN001
        self.replay = run


class EagerStandIn(SearchStepGraphs):
    """Pads, copies and cuts as :class:`SearchStepGraphs` does; "replays" by running the step on
    its buffers and copying the results into its output tensors."""

    def __init__(self) -> None:
        super().__init__(sentence_step=4, length_step=8)
        self.captures = 0

    @staticmethod
    def applies(x: torch.Tensor) -> bool:
        return True

    def _capture(self, model, tokens, leaves, rows, enc_rows, members):  # noqa: ANN001, ANN202
        self.captures += 1
        static_tokens, inputs = self._buffers(tokens, leaves, rows, enc_rows)
        states, encs = _rebuild(inputs, members)
        lprobs, attn, new_states = (x for x in model.decode_step(static_tokens, states, encs))
        lprobs, attn = lprobs.clone(), None if attn is None else attn.clone()
        new_states = [{k: v.clone() for k, v in s.items()} for s in new_states]

        def run() -> None:
            lp, at, ns = model.decode_step(static_tokens, states, encs)
            lprobs.copy_(lp)
            if attn is not None:
                attn.copy_(at)
            for out, s in zip(new_states, ns):
                for k in out:
                    out[k].copy_(s[k])

        sources = [t if leaf[0] == "enc" else None for leaf, t in leaves]
        return _Captured(_EagerGraph(run), static_tokens, inputs, lprobs, attn, new_states, sources)


def _sources(n: int = 11, vocab: int = 40):
    gen = torch.Generator().manual_seed(7)
    src = random_sentences(gen, [1 + (5 * i) % 13 for i in range(n)], vocab)
    src_tokens, lengths, _, _ = make_batch(src, [[4]] * n)
    return src_tokens, lengths


def _same_hypotheses(a, b) -> None:  # noqa: ANN001
    assert len(a) == len(b)
    for ha, hb in zip(a, b):
        assert [h.tokens for h in ha] == [h.tokens for h in hb]
        for x, y in zip(ha, hb):
            assert x.score == pytest.approx(y.score, abs=1e-5)
            torch.testing.assert_close(x.positional_scores, y.positional_scores, atol=1e-5, rtol=1e-5)
            if x.attention is not None:
                assert x.attention.shape == y.attention.shape
                torch.testing.assert_close(x.attention, y.attention, atol=1e-5, rtol=1e-5)


MODELS = [("luong_tiny", {}), ("luong_tiny", {"attention": "local-p", "encoder_bidirectional": True}),
          ("luong_tiny", {"attention": "local-m", "score": "location"}), ("rnnsearch_tiny", {}), ("rnnencdec_tiny", {})]


@pytest.mark.parametrize("arch,overrides", MODELS, ids=lambda v: str(v))
def test_padded_steps_give_the_plain_search(arch: str, overrides: dict) -> None:
    model = EnsembleModel([tiny_model(arch, **overrides)])
    src, lengths = _sources()
    opts = SearchOptions(beam=3, nbest=3, max_len_b=12)
    plain = beam_search(model, src, lengths, opts)
    stand_in = EagerStandIn()
    graphed = beam_search(model, src, lengths, opts, step_graphs=stand_in)
    _same_hypotheses(graphed, plain)
    assert stand_in.captures >= 2 and stand_in.replays > stand_in.captures  # the batch shrank through buckets


def test_an_ensemble_and_a_shortlist() -> None:
    model = EnsembleModel([tiny_model("luong_tiny", seed=1), tiny_model("rnnsearch_tiny", seed=2)])
    src, lengths = _sources(6)
    opts = SearchOptions(beam=4, nbest=2, max_len_b=10)
    _same_hypotheses(beam_search(model, src, lengths, opts, step_graphs=EagerStandIn()),
                     beam_search(model, src, lengths, opts))
    stand_in = EagerStandIn()
    every_id = torch.arange(len(model.tgt_dict))
    beam_search(model, src, lengths, opts, shortlist=every_id, step_graphs=stand_in)
    assert stand_in.replays == 0  # a shortlist changes the output layer: the step stays eager


def test_a_full_cache_steps_eagerly() -> None:
    model = EnsembleModel([tiny_model("luong_tiny")])
    src, lengths = _sources()
    stand_in = EagerStandIn()
    stand_in.max_shapes = 1
    opts = SearchOptions(beam=3, max_len_b=12)
    _same_hypotheses(beam_search(model, src, lengths, opts, step_graphs=stand_in), beam_search(model, src, lengths, opts))
    assert stand_in.captures == 1 and stand_in.eager_calls > 0


def test_pad_source() -> None:
    src = torch.tensor([[5, 6, 2], [7, 2, 0]])
    assert pad_source(src, 8).tolist() == [[5, 6, 2, 0, 0, 0, 0, 0], [7, 2, 0, 0, 0, 0, 0, 0]]
    assert pad_source(src, 3) is src


def test_cuda_graphs_need_cuda_and_no_shortlist(tmp_path) -> None:  # noqa: ANN001
    from conftest import make_checkpoint

    from nmtkit.errors import NmtkitError
    from nmtkit.generate.translator import Translator

    path = make_checkpoint(tmp_path / "m.pt")
    with pytest.raises(NmtkitError, match="--cuda-graphs needs a CUDA device"):
        Translator.from_checkpoint(str(path), 2, device="cpu", cuda_graphs=True)
    with pytest.raises(NmtkitError, match="not with --shortlist"):
        Translator.from_checkpoint(str(path), 2, device="cpu", cuda_graphs=True, shortlist=str(tmp_path / "t.txt"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("amp", [None, torch.bfloat16])
@pytest.mark.parametrize("arch,overrides", MODELS, ids=lambda v: str(v))
def test_graphs_give_the_eager_search_on_cuda(arch: str, overrides: dict, amp) -> None:  # noqa: ANN001
    torch.backends.cuda.matmul.allow_tf32 = False
    model = EnsembleModel([tiny_model(arch, **overrides).cuda()])
    src, lengths = (t.cuda() for t in _sources())
    opts = SearchOptions(beam=3, nbest=3, max_len_b=12)
    graphs = SearchStepGraphs(sentence_step=4, length_step=8)
    with torch.autocast("cuda", dtype=amp or torch.float32, enabled=amp is not None):
        plain = beam_search(model, pad_source(src, 8), lengths, opts)
        graphed = beam_search(model, src, lengths, opts, step_graphs=graphs)
        again = beam_search(model, src, lengths, opts, step_graphs=graphs)  # replays only
    assert graphs.replays > 0
    if amp is None:
        _same_hypotheses(graphed, plain)
    _same_hypotheses(again, graphed)
