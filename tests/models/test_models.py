"""Every model honours the Seq2SeqModel contract: teacher-forced forward equals iterating
decode_step, padding and batch composition change nothing, source reversal never leaks out,
beam-search reordering works, and each tiny preset can learn a small batch."""
from __future__ import annotations

import pytest
import torch

from nmtkit.data.dictionary import BOS_ID, PAD_ID
from nmtkit.models.base import EncoderOutput, Seq2SeqModel, log_probs, rows_per_sentence

from tests.helpers import make_batch, make_dict, pad_batch, random_sentences, tiny_model  # noqa: F401 - used below

torch.set_num_threads(1)

TINY = ["luong_tiny", "rnnsearch_tiny", "rnnencdec_tiny"]


def step_by_step(model: Seq2SeqModel, src, lengths, prev):
    """Iterate decode_step over the teacher-forced inputs -> (log-probs, attention or None)."""
    enc = model.encode(src, lengths)
    state = model.init_decoder_state(enc)
    logps, attns = [], []
    for t in range(prev.size(1)):
        lp, attn, state = model.decode_step(prev[:, t], state, enc)
        logps.append(lp)
        attns.append(attn)
    attn = torch.stack(attns, 1) if attns[0] is not None else None
    return torch.stack(logps, 1), attn


def sample_batch(seed: int = 1, vocab: int = 40):
    gen = torch.Generator().manual_seed(seed)
    src = random_sentences(gen, [7, 3, 5, 1], vocab)
    tgt = random_sentences(gen, [4, 6, 2, 5], vocab)
    return make_batch(src, tgt)


LUONG_VARIANTS = [
    dict(attention=a, score=s, input_feeding=f)
    for a in ("global", "local-m", "local-p")
    for s in ("dot", "general", "concat", "location")
    for f in (True, False)
] + [dict(attention="none", input_feeding=False)]


def _check_forward_matches_steps(model: Seq2SeqModel) -> None:
    model.eval()
    src, lengths, prev, _ = sample_batch()
    with torch.no_grad():
        logits, attn = model(src, lengths, prev)
        step_lp, step_attn = step_by_step(model, src, lengths, prev)
    assert logits.shape == (4, prev.size(1), len(model.tgt_dict))
    torch.testing.assert_close(torch.log_softmax(logits, -1), step_lp, atol=1e-5, rtol=0)
    if model.has_attention:
        assert attn.shape == (4, prev.size(1), src.size(1))
        torch.testing.assert_close(attn, step_attn, atol=1e-5, rtol=0)
        assert (attn.masked_select(src.eq(PAD_ID)[:, None, :].expand_as(attn)) == 0).all()
    else:
        assert attn is None and step_attn is None


@pytest.mark.parametrize("arch", TINY)
@pytest.mark.parametrize("reverse", [False, True])
def test_forward_equals_decode_steps(arch: str, reverse: bool) -> None:
    _check_forward_matches_steps(tiny_model(arch, source_reversal=reverse))


@pytest.mark.parametrize("opts", LUONG_VARIANTS, ids=lambda o: "-".join(str(v) for v in o.values()))
def test_luong_variants_forward_equals_decode_steps(opts: dict) -> None:
    model = tiny_model("luong_tiny", embed_dim=16, hidden_size=24, window=2,
                       max_source_positions=6, source_reversal=True, **opts)
    _check_forward_matches_steps(model)


def test_rnnencdec_gru_with_context_forward_equals_decode_steps() -> None:
    _check_forward_matches_steps(tiny_model("rnnencdec_tiny", cell="gru", feed_context=True))


def test_rnnsearch_two_layers_forward_equals_decode_steps() -> None:
    _check_forward_matches_steps(tiny_model("rnnsearch_tiny", layers=2, hidden_size=32))


@pytest.mark.parametrize("arch", TINY + ["luong_tiny:local-p", "luong_tiny:local-m"])
@pytest.mark.parametrize("reverse", [False, True])
def test_padding_and_batch_invariance(arch: str, reverse: bool) -> None:
    """A sentence's logits and attention do not depend on what it is batched with."""
    arch, _, attention = arch.partition(":")
    extra = {"attention": attention, "window": 2} if attention else {}
    model = tiny_model(arch, source_reversal=reverse, **extra).eval()
    gen = torch.Generator().manual_seed(3)
    src = random_sentences(gen, [9, 4], 40)
    tgt = random_sentences(gen, [8, 3], 40)
    with torch.no_grad():
        big = model(*make_batch(src, tgt)[:3])
        alone_src, alone_len, alone_prev, _ = make_batch(src[1:], tgt[1:])
        alone = model(alone_src, alone_len, alone_prev)
        # the same sentence with extra padding columns on its own
        wide = model(*make_batch(src[1:], tgt[1:], src_width=12)[:3])
    t_len, s_len = alone_prev.size(1), alone_src.size(1)
    torch.testing.assert_close(big[0][1, :t_len], alone[0][0], atol=1e-5, rtol=0)
    torch.testing.assert_close(wide[0], alone[0], atol=1e-5, rtol=0)
    if model.has_attention:
        torch.testing.assert_close(big[1][1, :t_len, :s_len], alone[1][0], atol=1e-5, rtol=0)
        assert (big[1][1, :, s_len:] == 0).all()
        torch.testing.assert_close(wide[1][..., :s_len], alone[1], atol=1e-5, rtol=0)
        assert (wide[1][..., s_len:] == 0).all()


@pytest.mark.parametrize("arch", TINY)
def test_source_reversal_is_undone_before_states_leave_the_encoder(arch: str) -> None:
    """With reversal the encoder reads w_{n-1} .. w_1 w_0 </s>: changing w_0 (read last) may
    change only the (forward-direction) states at original positions 0 and </s>; without
    reversal, changing the last word may change only its own state and </s>'s.  Checked
    inside a padded batch, so per-sentence lengths are respected."""
    gen = torch.Generator().manual_seed(5)
    for reverse, changed in ((True, 0), (False, 4)):
        model = tiny_model(arch, source_reversal=reverse).eval()
        forward_dir = slice(0, model.cfg.hidden_size)  # rnnsearch: the left-to-right half
        a = random_sentences(gen, [5, 8], 40)
        b = [list(a[0]), a[1]]
        b[0][changed] = 4 if a[0][changed] != 4 else 5
        with torch.no_grad():
            sa = model.encode(*make_batch(a, a)[:2]).states[0, :, forward_dir]
            sb = model.encode(*make_batch(b, b)[:2]).states[0, :, forward_dir]
        diff = (sa - sb).abs().sum(-1) > 1e-6  # per position
        expected = torch.zeros(sa.size(0), dtype=torch.bool)
        expected[[changed, 5]] = True  # the changed word and </s> (position 5); padding stays 0
        assert diff.tolist() == expected.tolist(), (reverse, diff)
        assert (sa[6:] == 0).all()


@pytest.mark.parametrize("arch", TINY + ["transformer_test"])
def test_reordered_states_give_reordered_outputs(arch: str) -> None:
    """Beam search reorders EncoderOutput with index_select(0, order) and the decoder state with
    the model's reorder_decoder_state: the next step's outputs are the reordered ones."""
    model = tiny_model(arch).eval()
    src, lengths, prev, _ = sample_batch()
    order = torch.tensor([2, 0, 0, 3, 1])
    with torch.no_grad():
        enc = model.encode(src, lengths)
        state = model.init_decoder_state(enc)
        lp0, _, state = model.decode_step(prev[:, 0], state, enc)
        lp1, attn1, _ = model.decode_step(prev[:, 1], state, enc)
        enc_r: EncoderOutput = enc.reorder(order)
        state_r = model.reorder_decoder_state(state, order)
        lp1_r, attn1_r, _ = model.decode_step(prev[:, 1].index_select(0, order), state_r, enc_r)
    torch.testing.assert_close(lp1_r, lp1.index_select(0, order), atol=1e-6, rtol=0)
    if attn1 is not None:
        torch.testing.assert_close(attn1_r, attn1.index_select(0, order), atol=1e-6, rtol=0)


@pytest.mark.parametrize("arch", TINY + ["transformer_test"])
def test_tiny_preset_overfits_a_small_batch(arch: str) -> None:
    """8 random pairs, vocab 30: loss goes to ~0 and greedy decoding reproduces the targets."""
    model = tiny_model(arch, vocab=30, dropout=0.0)
    gen = torch.Generator().manual_seed(11)
    src = random_sentences(gen, [6, 5, 7, 6, 4, 6, 5, 7], 30)
    tgt = random_sentences(gen, [5, 6, 6, 4, 7, 5, 6, 6], 30)
    src_tokens, lengths, prev, target = make_batch(src, tgt)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    model.train()
    for _ in range(150):
        logits, _ = model(src_tokens, lengths, prev)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)), target.reshape(-1), ignore_index=PAD_ID
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    model.eval()
    with torch.no_grad():
        enc = model.encode(src_tokens, lengths)
        state = model.init_decoder_state(enc)
        tok = torch.full((len(src),), BOS_ID)
        out = []
        for _ in range(target.size(1)):
            lp, _, state = model.decode_step(tok, state, enc)
            tok = lp.argmax(-1)
            out.append(tok)
    hyp = torch.stack(out, 1)
    assert hyp.masked_select(target.ne(PAD_ID)).tolist() == target.masked_select(target.ne(PAD_ID)).tolist()


@pytest.mark.parametrize("arch", TINY)
def test_tiny_presets_have_under_a_million_parameters(arch: str) -> None:
    assert tiny_model(arch, vocab=204).num_parameters() < 1_000_000


@pytest.mark.parametrize("arch", TINY)
def test_build_model_initialises_uniformly_with_zero_padding_rows(arch: str) -> None:
    model = tiny_model(arch, init_scale=0.05)
    for p in model.parameters():
        assert p.abs().max() <= 0.05
    for m in model.modules():
        if isinstance(m, torch.nn.Embedding):
            assert (m.weight[PAD_ID] == 0).all()


def test_luong_without_attention_reports_none() -> None:
    model = tiny_model("luong_tiny", attention="none", input_feeding=False)
    assert model.has_attention is False
    _check_forward_matches_steps(model)


def test_location_score_source_longer_than_its_positions() -> None:
    """Tokens past max_source_positions get zero weight; nothing becomes NaN."""
    model = tiny_model("luong_tiny", score="location", max_source_positions=4).eval()
    gen = torch.Generator().manual_seed(2)
    src_tokens, lengths, prev, _ = make_batch(random_sentences(gen, [9, 2], 40),
                                              random_sentences(gen, [3, 3], 40))
    with torch.no_grad():
        logits, attn = model(src_tokens, lengths, prev)
    assert torch.isfinite(logits).all()
    assert (attn[..., 4:] == 0).all()
    torch.testing.assert_close(attn.sum(-1), torch.ones(2, prev.size(1)))


GROUPED = [("luong_tiny", o) for o in LUONG_VARIANTS] + [
    ("rnnsearch_tiny", {}), ("rnnsearch_tiny", dict(layers=2)), ("rnnencdec_tiny", {}),
    ("rnnencdec_tiny", dict(cell="gru", feed_context=True)),
    ("transformer_test", {}), ("transformer_test", dict(normalize_before=True, alignment_heads=1)),
]


@pytest.mark.parametrize("arch,opts", GROUPED, ids=lambda x: x if isinstance(x, str) else "-".join(map(str, x.values())))
def test_rows_sharing_one_encoder_output_equal_repeated_encoder_rows(arch: str, opts: dict) -> None:
    """Beam search keeps one encoder output per sentence (shares_encoder_rows): g decoder rows per
    sentence against it give what the same rows give against the encoder output repeated g times."""
    kw = dict(embed_dim=16, hidden_size=24, window=2, max_source_positions=6) if arch == "luong_tiny" else {}
    model = tiny_model(arch, **kw, **opts).eval()
    assert model.shares_encoder_rows
    src, lengths, _, _ = sample_batch()
    g = 3
    per_row = torch.arange(src.size(0)).repeat_interleave(g)
    prev = torch.randint(4, 40, (src.size(0) * g, 3), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        enc = model.encode(src, lengths)
        state_shared = model.reorder_decoder_state(model.init_decoder_state(enc), per_row)
        enc_rep = enc.reorder(per_row)
        state_rep = model.init_decoder_state(enc_rep)
        for t in range(prev.size(1)):
            lp_s, a_s, state_shared = model.decode_step(prev[:, t], state_shared, enc)
            lp_r, a_r, state_rep = model.decode_step(prev[:, t], state_rep, enc_rep)
            torch.testing.assert_close(lp_s, lp_r, atol=1e-5, rtol=0)
            if a_r is None:
                assert a_s is None
            else:
                torch.testing.assert_close(a_s, a_r, atol=1e-6, rtol=0)


def test_rows_per_sentence_rejects_uneven_rows() -> None:
    enc = EncoderOutput(states=torch.zeros(4, 3, 2), mask=torch.ones(4, 3, dtype=torch.bool))
    assert rows_per_sentence(12, enc) == 3
    with pytest.raises(ValueError, match="cannot be split evenly"):
        rows_per_sentence(10, enc)


@pytest.mark.parametrize("arch,opts", [("luong_tiny", {}), ("rnnsearch_tiny", {}), ("rnnsearch_tiny", dict(alignment_head=True)),
                                       ("rnnencdec_tiny", {}), ("transformer_test", {}),
                                       ("transformer_test", dict(full_context_alignment=True))],
                         ids=lambda x: x if isinstance(x, str) else "-".join(map(str, x)))
def test_forward_without_attention_gives_the_same_logits(arch: str, opts: dict) -> None:
    """``need_attention=False`` may drop the attention (a model's extra work for it), never change the logits."""
    model = tiny_model(arch, **opts).eval()
    src, lengths, prev, _ = sample_batch()
    with torch.no_grad():
        logits, _ = model(src, lengths, prev)
        spared, attn = model(src, lengths, prev, need_attention=False)
    torch.testing.assert_close(spared, logits, atol=1e-5, rtol=1e-5)
    if arch == "transformer_test" or opts.get("alignment_head"):
        assert attn is None


def test_log_probs_overwrite_a_temporary_but_keep_autograd_whole() -> None:
    """A search step's float32 logits become its log-probs in place; logits that need a gradient
    (training, guided alignment) are left alone, and the gradient is log-softmax's."""
    logits = torch.randn(3, 7)
    want = torch.log_softmax(logits, -1)
    with torch.no_grad():
        tmp = logits.clone()
        got = log_probs(tmp)
    assert got.data_ptr() == tmp.data_ptr() and torch.equal(got, want)
    leaf = logits.clone().requires_grad_()
    out = log_probs(leaf)
    out[:, 2].sum().backward()
    assert torch.equal(leaf.detach(), logits) and out.data_ptr() != leaf.data_ptr()
    torch.testing.assert_close(leaf.grad, torch.eye(7)[2].expand(3, 7) - torch.softmax(logits, -1))
    assert log_probs(logits.bfloat16()).dtype == torch.float32


@pytest.mark.parametrize("arch,opts", [("luong_tiny", {}), ("rnnsearch_tiny", dict(alignment_head=True)),
                                       ("rnnencdec_tiny", {}), ("rnnencdec_tiny", dict(bahdanau_decoder=True, cell="gru")),
                                       ("transformer_test", {})],
                         ids=lambda x: x if isinstance(x, str) else "-".join(map(str, x)))
def test_the_loss_from_the_features_is_the_loss_of_the_logits(arch: str, opts: dict) -> None:
    """Every built-in model trains from its features (``forward(features_only=True)``, the
    chunked loss, never the ``[B, T, V]`` logits): loss, NLL and every parameter's gradient equal
    those of ``sequence_loss`` over ``forward``'s logits, in float64; the attention is the same."""
    from nmtkit.train.loss import output_layer_loss, sequence_loss

    model = tiny_model(arch, **opts).double().eval()
    assert model.trains_from_features()
    src, lengths, prev, target = sample_batch()
    results = []
    for from_features in (False, True):
        model.zero_grad()
        out, attn = model(src, lengths, prev, features_only=from_features)
        if from_features:
            assert out.size(-1) == model.output_projection.in_features
            loss, nll = output_layer_loss(out, model.output_projection, target, 0.1)
        else:
            loss, nll = sequence_loss(out, target, 0.1)
        (loss + 0.5 * nll).backward()
        results.append(([loss.detach(), nll.detach()], attn, {n: p.grad.clone() for n, p in model.named_parameters()
                                                              if p.grad is not None}))
    (want, attn_want, grads_want), (got, attn_got, grads_got) = results
    for a, b in zip(got, want):  # sequence_loss computes in float32: agreement to its rounding
        torch.testing.assert_close(a, b.double(), atol=1e-5, rtol=1e-6)
    assert grads_got.keys() == grads_want.keys() and len(grads_want) >= 5
    for name in grads_want:
        torch.testing.assert_close(grads_got[name], grads_want[name], atol=1e-6, rtol=1e-5, msg=lambda m: f"{name}: {m}")
    assert (attn_got is None) == (attn_want is None)
    if attn_want is not None:
        torch.testing.assert_close(attn_got, attn_want, atol=0, rtol=0)
