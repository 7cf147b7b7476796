"""The optimised teacher-forced ``forward`` of every model is exactly the reference computation.

``LuongModel.forward`` runs input feeding through ``_feed_loop`` (the embedding half of the
first layer projected once for all steps, fused per-step products) and RNNencdec's Bahdanau
decoder builds ``s_{i-1}`` by shifting the RNN's outputs; ``decode_step`` is the plain one-step
reference.  Here, for every model and variant (luong: global/local-m/local-p x four scores,
input feeding on/off, uni/bidirectional encoder, source reversal, 1-2 layers; rnnsearch;
rnnencdec plain and Bahdanau's decoder), with dropout off:

* the log-softmax of ``forward``'s logits equals stepping ``decode_step`` token by token;
* the training loss and *every parameter's gradient* of ``forward`` equal those of a loss built
  from repeated ``decode_step`` calls with autograd (so the fast paths are also right backward).

tests/models/test_models.py checks forward == decode_step on the unidirectional one-layer Luong
variants and the presets (no gradients); this file covers gradients and the new options.
"""
from __future__ import annotations

import pytest
import torch
from tests.helpers import NO_DROPOUT, VOCAB, _luong_variants, _vid, batch, make_model  # noqa: F401 - used below

from nmtkit.data.dictionary import PAD_ID
from nmtkit.models import resolve_config
from nmtkit.models.base import Seq2SeqModel
from nmtkit.train.loss import sequence_loss

torch.set_num_threads(1)


def stepped(model: Seq2SeqModel, src, lengths, prev):
    """The reference: iterate decode_step -> (log-probs [B, T, V], attention [B, T, S] or None)."""
    enc = model.encode(src, lengths)
    state = model.init_decoder_state(enc)
    lps, attns = [], []
    for t in range(prev.size(1)):
        lp, attn, state = model.decode_step(prev[:, t], state, enc)
        lps.append(lp)
        attns.append(attn)
    return torch.stack(lps, 1), (torch.stack(attns, 1) if attns[0] is not None else None)


def grads(model: Seq2SeqModel, loss: torch.Tensor) -> dict[str, torch.Tensor | None]:
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {n: (None if p.grad is None else p.grad.clone()) for n, p in model.named_parameters()}


def check_exact(model: Seq2SeqModel) -> None:
    src, lengths, prev, target = batch()
    # 1. eval mode: forward's outputs equal the step-by-step decoder
    model.eval()
    with torch.no_grad():
        logits, attn = model(src, lengths, prev)
        ref_lp, ref_attn = stepped(model, src, lengths, prev)
    assert logits.shape == (4, prev.size(1), VOCAB)
    torch.testing.assert_close(torch.log_softmax(logits, -1), ref_lp, atol=1e-5, rtol=0)
    if ref_attn is None:
        assert attn is None
    else:
        assert attn.shape == (4, prev.size(1), src.size(1))
        torch.testing.assert_close(attn, ref_attn, atol=1e-5, rtol=0)
        if getattr(model.cfg, "attention", None) != "local-p":  # local-p: softmax times a Gaussian
            torch.testing.assert_close(attn.sum(-1), torch.ones(4, prev.size(1)), atol=1e-5, rtol=0)
        assert (attn.masked_select(src.eq(PAD_ID)[:, None, :].expand_as(attn)) == 0).all()

    # 2. training mode (dropout rates 0): loss and gradients of forward == of the stepped loss
    model.train()
    loss, _ = sequence_loss(model(src, lengths, prev)[0], target)
    fast = grads(model, loss)
    lp, _ = stepped(model, src, lengths, prev)
    nll = -lp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    ref_loss = nll.masked_fill(target.eq(PAD_ID), 0.0).sum()
    ref = grads(model, ref_loss)
    torch.testing.assert_close(loss.detach(), ref_loss.detach(), atol=1e-4, rtol=1e-6)
    assert fast.keys() == ref.keys()
    n_checked = 0
    for name in fast:
        if ref[name] is None:
            assert fast[name] is None or not fast[name].any(), name
            continue
        assert fast[name] is not None, f"{name}: no gradient from forward"
        torch.testing.assert_close(fast[name], ref[name], atol=1e-5, rtol=1e-4, msg=lambda m: f"{name}: {m}")
        n_checked += 1
    assert n_checked >= 5


@pytest.mark.parametrize("opts", _luong_variants(), ids=_vid)
def test_luong_forward_is_exact(opts):
    model = make_model("luong_tiny", embed_dim=10, hidden_size=12, window=2, max_source_positions=6, **opts)
    check_exact(model)


@pytest.mark.parametrize("opts", [
    dict(),
    dict(source_reversal=True, layers=2),
], ids=["plain", "rev-L2"])
def test_rnnsearch_forward_is_exact(opts):
    check_exact(make_model("rnnsearch_tiny", embed_dim=10, hidden_size=12, attention_dim=8, maxout_size=6, **opts))


@pytest.mark.parametrize("opts", [
    dict(cell="lstm"),
    dict(cell="gru", feed_context=True, source_reversal=True),
    dict(cell="gru", bahdanau_decoder=True),
    dict(cell="gru", bahdanau_decoder=True, layers=2, source_reversal=True),
], ids=["lstm", "gru-context-rev", "bahdanau", "bahdanau-L2-rev"])
def test_rnnencdec_forward_is_exact(opts):
    check_exact(make_model("rnnencdec_tiny", embed_dim=10, hidden_size=12, maxout_size=6, **{"layers": 1, **opts}))


def test_exactness_check_can_fail():
    """The check catches a forward that differs from decode_step by one detail (here: the
    input feed is not reset at the start), so passing it means something."""
    from nmtkit.models.luong import LuongModel

    model = make_model("luong_tiny", embed_dim=10, hidden_size=12)
    original = LuongModel._feed_loop

    def broken(self, emb, state, enc, *args, **kwargs):
        state = {**state, "feed": state["feed"] + 0.5}
        return original(self, emb, state, enc, *args, **kwargs)

    LuongModel._feed_loop = broken
    try:
        with pytest.raises(AssertionError):
            check_exact(model)
    finally:
        LuongModel._feed_loop = original


def test_bahdanau_decoder_structure():
    """rnnencdec's bahdanau_decoder: s_0 = tanh(W_s c) with c the encoder's last top state, and
    the first step's output reads s_0, E y_0 and c (not the encoder's final state directly)."""
    model = make_model("rnnencdec_tiny", cell="gru", bahdanau_decoder=True, embed_dim=10, hidden_size=12, maxout_size=6,
                       layers=1).eval()
    assert model.feed_context and model.decoder.input_size == 10 + 12
    assert model.deep_output.in_features == 12 + 10 + 12 and model.deep_output.out_features == 2 * 6
    assert model.output_projection.in_features == 6
    src, lengths, prev, _ = batch()
    with torch.no_grad():
        enc = model.encode(src, lengths)
        state = model.init_decoder_state(enc)
        c = enc.extra["context"]
        torch.testing.assert_close(state["h"][:, 0], torch.tanh(model.W_s(c)))
        # step 1 by hand: maxout over [s_0; E y_0; c]
        emb = model.tgt_embed(prev[:, 0])
        t_pre = model.deep_output(torch.cat([state["h"][:, 0], emb, c], -1))
        t = t_pre.view(4, 6, 2).max(-1).values
        expected = torch.log_softmax(model.output_projection(t), -1)
        lp, attn, _ = model.decode_step(prev[:, 0], state, enc)
    assert attn is None
    torch.testing.assert_close(lp, expected)
    name, cfg = resolve_config("rnnencdec_50", {})
    assert cfg.bahdanau_decoder and cfg.cell == "gru" and cfg.init == "bahdanau"
