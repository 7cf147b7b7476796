"""Beam search against hand-computed results on fixed probability tables."""
from __future__ import annotations

import math
import sys

import pytest
import torch
from tests.generate_stubs import TableModel, TinyConfig, TinyLSTM, lstm_dicts, make_dict, pad_batch, table_fn
from tests.helpers import EagerStatic, search_options, summed

from nmtkit.errors import NmtkitError
import nmtkit.generate.search.topk as topk_mod
from nmtkit.generate.search import SearchOptions, beam_search
from nmtkit.generate.search.rules import length_penalty
from nmtkit.generate.search.topk import TOPK_GROUP, CandidateScores, grouped_topk, topk_ordered
from nmtkit.generate.ensemble import EnsembleModel

WORDS = ["a", "b", "c", "d"]
L = math.log

#: The hand-computed cases that the fixed-shape search (tests/generate/test_static_search.py) must give
#: too: each runs through both executors, the fixed-shape one eagerly (helpers.EagerStatic).
BOTH_EXECUTORS = ["test_beam_finds_better_sequence_than_greedy", "test_nbest_order_and_scores_by_hand",
                  "test_ties_prefer_earlier_beam_then_lower_token_id", "test_early_eos_finishes_and_caps_at_beam",
                  "test_length_penalty_formula", "test_min_len_forbids_early_eos", "test_max_len_forces_eos_per_sentence",
                  "test_never_emits_pad_or_bos_and_unk_penalty", "test_attention_rows_and_shape",
                  "test_batched_equals_single_table_model", "test_length_penalty_changes_winner"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.function.__name__ in BOTH_EXECUTORS:
        metafunc.parametrize("executor", ["eager", "fixed-shape"], indirect=True)


@pytest.fixture(autouse=True)
def executor(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which search this module's beam_search runs: eager, or (for BOTH_EXECUTORS) fixed-shape."""
    kind = getattr(request, "param", "eager")
    if kind == "fixed-shape":
        search = beam_search  # the module's name is replaced below: keep the function
        monkeypatch.setattr(sys.modules[__name__], "beam_search",  # a fresh searcher per call, as a first batch
                            lambda *a, **kw: search(*a, searcher=EagerStatic(), **kw))
    return kind


def table_model(table, default=None, attention=True) -> TableModel:
    d = make_dict(WORDS)
    return TableModel(make_dict(["x", "y", "z"]), d, table_fn(table, default), attention=attention)


def run(model, srcs=(("x", "y"),), **kw):
    ens = model if isinstance(model, EnsembleModel) else EnsembleModel([model])
    seqs = [ens.src_dict.encode(list(s)) for s in srcs]
    toks, lens = pad_batch(seqs)
    return_attention = kw.pop("return_attention", True)
    return beam_search(ens, toks, lens, search_options(**kw), return_attention=return_attention)


def words(model, hyp) -> str:
    return " ".join(model.tgt_dict[i] for i in hyp.tokens)


# greedy takes "a" (0.6) whose continuations are flat; "b" (0.4) leads to "b c" (0.36 overall)
GREEDY_TRAP = {
    "": {"a": 0.6, "b": 0.4},
    "a": {"c": 0.35, "d": 0.35, "</s>": 0.3},
    "b": {"c": 0.9},  # leftover 0.1 spread over a, b, d, </s>
    "b c": {"</s>": 1.0},
    "a c": {"</s>": 1.0},
}


def test_beam_finds_better_sequence_than_greedy():
    m = table_model(GREEDY_TRAP)
    (greedy,) = run(m, beam=1)[0]
    (best,) = run(m, beam=2)[0]
    assert words(m, greedy) == "a c"  # c and d tie after "a": lower token id wins
    assert greedy.score == pytest.approx((L(0.6) + L(0.35) + L(1.0)) / 3, abs=1e-6)
    assert words(m, best) == "b c"
    assert best.score == pytest.approx((L(0.4) + L(0.9)) / 3, abs=1e-6)
    assert best.positional_scores.tolist() == pytest.approx([L(0.4), L(0.9), 0.0], abs=1e-6)
    assert best.length == 3 and best.log_prob == pytest.approx(L(0.36), abs=1e-6)


def test_nbest_order_and_scores_by_hand():
    m = table_model(GREEDY_TRAP)
    hyps = run(m, beam=3, nbest=3, lenpen=0.0)[0]
    # a d has no table entry: default </s> 1.0; "a c" and "a d" tie, the earlier beam ("a c") first
    assert [words(m, h) for h in hyps] == ["b c", "a c", "a d"]
    assert [h.score for h in hyps] == pytest.approx([L(0.36), L(0.21), L(0.21)], abs=1e-6)


def test_ties_prefer_earlier_beam_then_lower_token_id():
    table = {
        "": {"a": 0.5, "b": 0.25, "c": 0.25},  # b and c tie for beam slot 2: b (lower id) wins
        "a": {"c": 0.5, "d": 0.5},
        "b": {"a": 1.0},  # "b a" ties with "a c"/"a d" (all 0.25) but comes from a later beam
    }
    m = table_model(table)
    hyps = run(m, beam=2, nbest=2, lenpen=0.0)[0]
    assert [words(m, h) for h in hyps] == ["a c", "a d"]
    (one,) = run(table_model({"": {"a": 0.5, "b": 0.5}}), beam=1)[0]
    assert one.tokens == [4]  # "a"
    both = run(table_model({"": {"a": 0.5, "b": 0.5}}), beam=2, nbest=2)[0]
    assert [h.tokens for h in both] == [[4], [5]]  # equal scores keep finishing order


def test_early_eos_finishes_and_caps_at_beam():
    table = {"": {"a": 0.5, "b": 0.5}, "a": {"</s>": 0.9, "c": 0.1}, "b": {"c": 0.5, "d": 0.5}}
    m = table_model(table)
    hyps = run(m, beam=2, nbest=2)[0]
    # "a </s>" ends at step 1; at step 2 "b c </s>" and "b d </s>" tie, only one slot is left
    assert [words(m, h) for h in hyps] == ["a", "b c"]
    assert hyps[0].score == pytest.approx(L(0.45) / 2, abs=1e-6)
    assert hyps[1].score == pytest.approx(L(0.25) / 3, abs=1e-6)
    assert [h.length for h in hyps] == [2, 3]


LENPEN_TABLE = {
    "": {"a": 0.5, "b": 0.5},
    "a": {"</s>": 0.6, "c": 0.4},
    "b": {"c": 1.0},
    "b c": {"d": 1.0},
    "b c d": {"</s>": 0.3},
}


@pytest.mark.parametrize(
    "lenpen,form,winner",
    [(0.0, "fairseq", "a"), (1.0, "fairseq", "b c d"), (1.0, "gnmt", "a"), (2.0, "gnmt", "b c d")],
)
def test_length_penalty_changes_winner(lenpen, form, winner):
    m = table_model(LENPEN_TABLE)
    hyps = run(m, beam=3, nbest=3, lenpen=lenpen, lenpen_form=form)[0]
    raw = {"a": L(0.3), "a c": L(0.2), "b c d": L(0.15)}
    lens = {"a": 2, "a c": 3, "b c d": 4}
    div = {
        "fairseq": lambda n: n**lenpen,
        "gnmt": lambda n: ((5 + n) / 6) ** lenpen,
    }[form]
    expected = sorted(raw, key=lambda k: -raw[k] / div(lens[k]))
    assert expected[0] == winner
    assert [words(m, h) for h in hyps] == expected
    for h in hyps:
        k = words(m, h)
        assert h.score == pytest.approx(raw[k] / div(lens[k]), abs=1e-6)
        assert h.length == lens[k]


def test_length_penalty_formula():
    assert length_penalty(4, 1.0, "fairseq") == 4.0
    assert length_penalty(7, 1.0, "gnmt") == 2.0
    assert length_penalty(3, 0.0, "gnmt") == 1.0


def test_min_len_forbids_early_eos():
    table = {"": {"</s>": 0.9, "a": 0.1}, "a": {"</s>": 0.8}}
    default = {"</s>": 0.5}  # unlisted prefixes: </s> 0.5, a..d 0.125 each
    m = table_model(table, default)
    (empty,) = run(m, beam=1, min_len=0)[0]
    assert empty.tokens == [] and empty.score == pytest.approx(L(0.9), abs=1e-6)
    assert empty.attention.shape == (1, 3)
    (one,) = run(m, beam=1)[0]
    assert words(m, one) == "a"
    (three,) = run(m, beam=1, min_len=3)[0]
    assert words(m, three) == "a a a"
    assert three.positional_scores.tolist() == pytest.approx([L(0.1), L(0.05), L(0.125), L(0.5)], abs=1e-6)


def test_max_len_forces_eos_per_sentence():
    m = TableModel(make_dict(["x"]), make_dict(WORDS), lambda src, pre: {"a": 0.9, "</s>": 0.1})
    out = run(m, srcs=[("x", "x"), ("x", "x", "x", "x")], beam=1, max_len_a=1.0, max_len_b=1)
    assert [h.tokens for h in out[0]] == [[4] * 3]  # 1.0 * 2 + 1
    assert [h.tokens for h in out[1]] == [[4] * 5]  # 1.0 * 4 + 1
    assert out[1][0].positional_scores.tolist() == pytest.approx([L(0.9)] * 5 + [L(0.1)], abs=1e-6)
    (capped,) = run(m, srcs=[()], beam=1, max_len_a=1.0, max_len_b=1, min_len=2)[0]  # an empty source's bound
    assert capped.tokens == [4]  # (1) wins over the minimum


def test_never_emits_pad_or_bos_and_unk_penalty():
    m = table_model({"": {"<pad>": 0.5, "<s>": 0.3, "a": 0.2}})
    for h in run(m, beam=3, nbest=3)[0]:
        assert 0 not in h.tokens and 1 not in h.tokens
    unk_table = {"": {"<unk>": 0.5, "a": 0.4, "b": 0.1}}
    (h0,) = run(table_model(unk_table), beam=2)[0]
    assert h0.tokens == [3]
    (h1,) = run(table_model(unk_table), beam=2, unkpen=1.0)[0]
    assert h1.tokens == [4]
    hyps = run(table_model(unk_table), beam=3, nbest=3, unkpen=0.2)[0]
    unk = next(h for h in hyps if h.tokens == [3])
    assert unk.positional_scores.tolist() == pytest.approx([L(0.5), 0.0], abs=1e-6)  # model's own
    assert unk.score == pytest.approx((L(0.5) - 0.2) / 2, abs=1e-6)  # ranking includes the penalty


def test_attention_rows_and_shape():
    from tests.generate_stubs import default_attention

    m = table_model(GREEDY_TRAP)
    out = run(m, srcs=[("x", "y", "z"), ("x",)], beam=2)
    for hyps, n_src in zip(out, (4, 2)):
        h = hyps[0]
        assert h.attention.shape == (len(h.tokens) + 1, n_src)
        for t in range(len(h.tokens) + 1):
            assert h.attention[t].tolist() == pytest.approx(default_attention(n_src, t), abs=1e-6)
    (no_attn,) = run(table_model(GREEDY_TRAP, attention=False), beam=2)[0]
    assert no_attn.attention is None
    (skipped,) = run(m, beam=2, return_attention=False)[0]
    assert skipped.attention is None


def copy_fn(src, prefix):
    """Copy the source with some noise: sentences finish after different numbers of steps."""
    t = len(prefix)
    if t >= len(src):
        return {"</s>": 0.7, "a": 0.3}
    nxt = {"x": "a", "y": "b", "z": "c"}[src[t]]
    return {nxt: 0.55, "d": 0.25}


def same_hyps(a, b, tol=1e-5):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.tokens == y.tokens
        assert x.score == pytest.approx(y.score, abs=tol)
        assert torch.allclose(x.positional_scores, y.positional_scores, atol=tol)
        if x.attention is None:
            assert y.attention is None
        else:
            assert x.attention.shape == y.attention.shape
            assert torch.allclose(x.attention, y.attention, atol=tol)


def test_batched_equals_single_table_model():
    m = TableModel(make_dict(["x", "y", "z"]), make_dict(WORDS), copy_fn)
    srcs = [("x", "y", "z", "x"), ("y",), ("z", "z"), ("x", "x", "y", "y", "z", "z")]
    kw = dict(beam=3, nbest=3, max_len_a=1.0, max_len_b=2)
    batched = run(m, srcs=srcs, **kw)
    for s, hyps in zip(srcs, batched):
        same_hyps(hyps, run(m, srcs=[s], **kw)[0])
    assert [len(b[0].tokens) for b in batched] == [4, 1, 2, 6]


@pytest.mark.parametrize("attention", [True, False])
def test_batched_equals_single_lstm(attention):
    torch.manual_seed(0)
    sd, td = lstm_dicts()
    m = TinyLSTM(sd, td, TinyConfig(seed=3, eos_bias=4.0), attention=attention)
    g = torch.Generator().manual_seed(1)
    seqs = [torch.randint(4, len(sd), (n,), generator=g).tolist() + [2] for n in (5, 1, 9, 3, 7)]
    toks, lens = pad_batch(seqs)
    ens = EnsembleModel([m])
    for kw in (dict(beam=4, nbest=4, max_len_a=1.5, max_len_b=2, lenpen=0.6), dict(beam=1, max_len_b=6)):
        batched = beam_search(ens, toks, lens, search_options(**kw))
        lengths = set()
        for i, s in enumerate(seqs):
            t1, l1 = pad_batch([s])
            single = beam_search(ens, t1, l1, search_options(**kw))[0]
            same_hyps(batched[i], single)
            lengths.update(h.length for h in single)
        assert len(lengths) > 1  # hypotheses really finished at different steps


def test_finished_sentences_leave_the_batch():
    m = TableModel(make_dict(["x", "y", "z"]), make_dict(WORDS), copy_fn)
    run(m, srcs=[("x",), ("x",) * 6], beam=1, max_len_b=20, min_len=0)
    # the short sentence ends after 2 steps, the long one after 7: 2 * 2 + 5 * 1 rows decoded
    assert m.rows == 9


def test_the_first_step_decodes_one_row_per_sentence():
    """The eager search's first step decodes each sentence once (its beam's rows would be
    equal); its candidates then fill the beam: 3 rows per sentence from the second step."""
    m = TableModel(make_dict(["x", "y", "z"]), make_dict(WORDS), copy_fn)
    sizes: list[int] = []
    real = m.decode_step
    m.decode_step = lambda prev, *a, **k: sizes.append(prev.size(0)) or real(prev, *a, **k)
    hyps = run(m, srcs=[("x",), ("x",) * 6], beam=3, nbest=3, max_len_b=20, min_len=0)
    assert sizes[:2] == [2, 6]
    assert [len(h) for h in hyps] == [3, 3]


def test_topk_ordered_breaks_ties_by_index():
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0, 3.0], [0.0, 5.0, -1.0, 5.0, 4.0]])
    vals, idx = topk_ordered(summed(x), 2)
    assert idx.tolist() == [[1, 2], [1, 3]] and vals.tolist() == [[3.0, 3.0], [5.0, 5.0]]
    vals, idx = topk_ordered(summed(x), 3)
    assert idx.tolist() == [[1, 2, 4], [1, 3, 4]]


def _stable_topk(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    vals, idx = x.sort(dim=1, descending=True, stable=True)
    return vals[:, :k], idx[:, :k]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("tail", [0, 5])  # without and with columns past the groups
def test_grouped_topk_is_exact_sentence_by_sentence(seed, tail):
    """The grouped top-k of ``lprobs + shift`` (5 rows per sentence, or one) equals the full top-k of the
    sums written out, in values and in the summed elements it names; and the tie-ordered top-k
    built on it equals a stable sort, for sentences it decides and for those it hands back."""
    g = torch.Generator().manual_seed(seed)
    n, m = 7, 11
    for per, spread in ((5, 3), (5, 50), (5, 10**6), (1, 50)):  # from ties everywhere to (almost) none; one row each
        vocab = 800 // per * TOPK_GROUP + tail  # 800 groups per sentence: the grouped top-k takes them
        lp = torch.randint(0, spread, (n * per, vocab), generator=g).float() / 4
        lp[torch.rand(n * per, vocab, generator=g) < 0.3] = float("-inf")
        lp[:per] = float("-inf")
        lp[0, :5] = 2.0  # a sentence with 5 finite candidates, in 5 groups
        lp[per : 2 * per] = float("-inf")
        lp[2 * per - 1, 7] = 1.0  # one finite candidate: the full top-k must decide
        lp[3 * per - 1, -1] = spread + 1.0  # the best candidate past the last group (where there is one)
        shift = torch.randint(-2 * spread, 0, (n * per,), generator=g).float() / 8
        c = CandidateScores(lp, shift, per)
        dense = c.dense()
        vals, idx = grouped_topk(c, m)
        assert torch.equal(vals, dense.topk(m, dim=1).values) and torch.equal(dense.gather(1, idx), vals)
        for k in (1, 5, 10):
            vals, idx = topk_ordered(c, k)
            ref_v, ref_i = _stable_topk(dense, k)
            assert torch.equal(vals, ref_v)
            finite = ref_v > float("-inf")  # -inf candidates are never used, in any order
            assert torch.equal(idx[finite], ref_i[finite])


def test_grouped_topk_takes_distinct_maxima_and_leaves_ties_at_the_cut_to_the_full_topk():
    groups = 64 * 4  # the narrowest rows it takes for m = 3
    x = torch.full((1, TOPK_GROUP * groups), -5.0)
    x[0, groups - 40 :] = torch.arange(40 + (TOPK_GROUP - 1) * groups, dtype=torch.float)  # distinct, rising
    w = x.size(1)
    vals, idx = grouped_topk(summed(x), 3)
    assert vals.tolist() == x[:, w - 3 :].flip(1).tolist() and idx.tolist() == [[w - 1, w - 2, w - 3]]
    x[0, groups - 40] = x[0, w - 3]  # another group's maximum ties the 3rd: not exact by groups,
    vals, idx = grouped_topk(summed(x), 3)  # so the full top-k decides (either of the tied elements)
    assert vals.tolist() == x[:, w - 3 :].flip(1).tolist() and idx[0, :2].tolist() == [w - 1, w - 2]
    assert idx[0, 2].item() in (w - 3, groups - 40)
    assert grouped_topk(summed(x[:, : w - TOPK_GROUP]), 3) is None  # too few groups
    assert grouped_topk(summed(x.to("meta")), 3) is None  # CPU only


def test_search_with_and_without_the_grouped_topk_agree(monkeypatch):
    """A vocabulary wide enough for the grouped top-k (beam x V above its threshold, V not a
    multiple of the group): the same hypotheses, scores and attention as the full top-k."""
    sd, td = lstm_dicts(n_tgt=1301)  # 1,305 columns x beam 5: 815 groups and 1 column past them
    m = TinyLSTM(sd, td, TinyConfig(seed=5, eos_bias=2.0))
    g = torch.Generator().manual_seed(2)
    seqs = [torch.randint(4, len(sd), (n,), generator=g).tolist() + [2] for n in (5, 1, 9, 3)]
    toks, lens = pad_batch(seqs)
    ens = EnsembleModel([m])
    kw = dict(beam=5, nbest=5, max_len_a=1.5, max_len_b=3)
    calls = []
    real = topk_mod.grouped_topk
    monkeypatch.setattr(topk_mod, "grouped_topk", lambda *a: calls.append(real(*a)) or calls[-1])
    fast = beam_search(ens, toks, lens, search_options(**kw))
    assert calls and any(r is not None for r in calls)  # the grouped path ran and decided
    monkeypatch.setattr(topk_mod, "grouped_topk", lambda *a: None)
    full = beam_search(ens, toks, lens, search_options(**kw))
    for a, b in zip(fast, full):
        same_hyps(a, b, tol=0.0)


def test_option_errors():
    """SearchOptions checks itself once, when made, in the words of nmtkit-translate's option
    errors (nmtkit.utils.checks)."""
    with pytest.raises(NmtkitError, match=r"^--nbest must be <= --beam \(2\), got 3$"):
        SearchOptions(beam=2, nbest=3)
    with pytest.raises(NmtkitError, match=r"^--beam must be >= 1, got 0$"):
        SearchOptions(beam=0)
    with pytest.raises(NmtkitError, match=r"^--lenpen-form must be one of fairseq, gnmt; got 'average'$"):
        SearchOptions(lenpen_form="average")
    with pytest.raises(NmtkitError, match=r"^--lenpen must be a finite number, got nan$"):
        SearchOptions(lenpen=float("nan"))
    with pytest.raises(NmtkitError, match=r"^--min-len must be >= 0, got -1$"):
        SearchOptions(min_len=-1)


@pytest.mark.parametrize("arch,opts", [
    ("luong_tiny", dict(attention="global", score="general")),
    ("luong_tiny", dict(attention="local-p", score="concat")),
    ("luong_tiny", dict(attention="local-m", score="dot", input_feeding=False)),
    ("rnnsearch_tiny", {}),
    ("rnnencdec_tiny", dict(cell="gru", feed_context=True)),
    ("transformer_test", dict(init="uniform", init_scale=0.5)),
    ("transformer_test", dict(init="uniform", init_scale=0.5, normalize_before=True, learned_positions=True)),
])
def test_one_encoder_copy_per_sentence_gives_the_same_translations(arch, opts, monkeypatch):
    """Beam search keeps one encoder output per sentence for models that share it across their
    hypotheses; the hypotheses, scores and attention equal those with one copy per hypothesis."""
    from nmtkit.data.dictionary import Dictionary
    from nmtkit.models import build_model, resolve_config

    torch.manual_seed(0)
    d = Dictionary.from_symbols(["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(30)])
    name, cfg = resolve_config(arch, opts)
    ens = EnsembleModel([build_model(name, cfg, d, d).eval()])
    assert ens.shares_encoder_rows
    g = torch.Generator().manual_seed(2)
    toks, lens = pad_batch([torch.randint(4, len(d), (n,), generator=g).tolist() + [2] for n in (6, 2, 9, 4)])
    kw = dict(beam=4, nbest=4, max_len_a=1.0, max_len_b=3)
    shared = beam_search(ens, toks, lens, search_options(**kw))
    monkeypatch.setattr(EnsembleModel, "shares_encoder_rows", property(lambda self: False))
    repeated = beam_search(ens, toks, lens, search_options(**kw))
    for a, b in zip(shared, repeated):
        same_hyps(a, b)
