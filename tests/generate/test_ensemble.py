"""Ensembles: probability/attention averaging, one-model equivalence, dictionary checks."""
from __future__ import annotations

import math

import pytest
import torch
from tests.generate_stubs import TableModel, TinyConfig, TinyLSTM, lstm_dicts, make_dict, pad_batch, table_fn

from nmtkit.errors import NmtkitError
from nmtkit.generate.search import beam_search
from nmtkit.generate.ensemble import EnsembleModel
from tests.helpers import search_options

WORDS = ["a", "b", "c", "d"]


def test_same_model_twice_equals_the_model():
    sd, td = lstm_dicts()
    m = TinyLSTM(sd, td, TinyConfig(seed=11, eos_bias=4.0))
    g = torch.Generator().manual_seed(2)
    toks, lens = pad_batch([torch.randint(4, 9, (n,), generator=g).tolist() + [2] for n in (3, 6, 1)])
    kw = dict(beam=4, nbest=4, max_len_a=1.0, max_len_b=3)
    one = beam_search(EnsembleModel([m]), toks, lens, search_options(**kw))
    two = beam_search(EnsembleModel([m, m]), toks, lens, search_options(**kw))
    for h1s, h2s in zip(one, two):
        assert [h.tokens for h in h1s] == [h.tokens for h in h2s]
        for h1, h2 in zip(h1s, h2s):
            assert h1.score == pytest.approx(h2.score, abs=1e-6)
            assert torch.allclose(h1.positional_scores, h2.positional_scores, atol=1e-6)
            assert torch.allclose(h1.attention, h2.attention, atol=1e-6)


def tm(table, attention=True, tgt_words=WORDS, src_words=("x", "y")):
    return TableModel(make_dict(list(src_words)), make_dict(list(tgt_words)), table_fn(table), attention=attention)


def step(ens, src=("x", "y")):
    toks, lens = pad_batch([ens.src_dict.encode(list(src))])
    encs = ens.encode(toks, lens)
    states = ens.init_decoder_state(encs)
    return ens.decode_step(torch.tensor([1]), states, encs)


def test_probabilities_are_averaged_not_log_probabilities():
    m1 = tm({"": {"a": 0.9, "b": 0.1}})
    m2 = tm({"": {"a": 0.05, "b": 0.55, "c": 0.4}})
    lp, attn, states = step(EnsembleModel([m1, m2]))
    assert lp[0, 4:7].tolist() == pytest.approx([math.log(0.475), math.log(0.325), math.log(0.2)], abs=1e-6)
    assert len(states) == 2
    # averaging log-probabilities (geometric mean) would pick "b": sqrt(.1*.55) > sqrt(.9*.05)
    toks, lens = pad_batch([m1.src_dict.encode(["x"])])
    (h,) = beam_search(EnsembleModel([m1, m2]), toks, lens, search_options(beam=1))[0]
    assert h.tokens == [4]


def test_attention_is_mean_over_members_that_have_it():
    with_attn, without = tm({}), tm({}, attention=False)
    _, a1, _ = step(EnsembleModel([with_attn]))
    _, a2, _ = step(EnsembleModel([with_attn, without]))
    _, a3, _ = step(EnsembleModel([without, without]))
    assert torch.equal(a1, a2)
    assert a3 is None
    assert EnsembleModel([with_attn, without]).has_attention
    assert not EnsembleModel([without]).has_attention


def test_dictionary_mismatch_names_the_checkpoints():
    base = tm({})
    other_tgt = tm({}, tgt_words=["a", "b", "c", "e"])
    other_src = tm({}, src_words=("x", "z"))
    with pytest.raises(NmtkitError, match=r"ckpt1\.pt and ckpt2\.pt.*target dictionaries"):
        EnsembleModel([base, other_tgt], names=["ckpt1.pt", "ckpt2.pt"])
    with pytest.raises(NmtkitError, match=r"ckpt1\.pt and ckpt3\.pt.*source dictionaries"):
        EnsembleModel([base, base, other_src], names=["ckpt1.pt", "ckpt2.pt", "ckpt3.pt"])
    with pytest.raises(NmtkitError, match="at least one"):
        EnsembleModel([])


def test_members_may_differ_in_architecture():
    sd, td = lstm_dicts()
    lstm = TinyLSTM(sd, td, TinyConfig(seed=1))
    table = TableModel(sd, td, lambda src, pre: {"t1": 0.5}, attention=False)
    ens = EnsembleModel([lstm, table], names=["lstm.pt", "table.pt"])
    toks, lens = pad_batch([[4, 5, 2]])
    (h,) = beam_search(ens, toks, lens, search_options(beam=2, max_len_b=4))[0]
    assert h.attention.shape == (len(h.tokens) + 1, 3)
    assert not lstm.training and not table.training  # an ensemble is for inference


def test_checkpoint_paths_refuse_empty_names_and_take_a_file_with_a_colon(tmp_path):
    import shutil

    from nmtkit.errors import NmtkitError
    from nmtkit.generate.checkpoint_paths import checkpoint_paths

    a = tmp_path / "a.pt"
    a.write_bytes(b"x")
    for text in (f"{a}::{a}", f"{a}:", f":{a}"):
        with pytest.raises(NmtkitError, match="an empty checkpoint name between ':'s"):
            checkpoint_paths(text)
    assert checkpoint_paths(f"{a}:{a}") == [str(a), str(a)]
    odd = tmp_path / "run:1"
    odd.mkdir()
    shutil.copy(a, odd / "c.pt")
    assert checkpoint_paths(str(odd / "c.pt")) == [str(odd / "c.pt")]  # was read as "<tmp>/run" and "1/c.pt"
    from click.testing import CliRunner

    from nmtkit.cli.translate import command as translate

    res = CliRunner().invoke(translate, ["--path", str(odd / "c.pt"), "--output", str(odd / "c.pt")], input="x\n")
    assert res.exit_code == 1 and "--output" in res.output and (odd / "c.pt").read_bytes() == b"x"  # not replaced
