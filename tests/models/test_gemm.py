"""The oneDNN float32 path (:mod:`nmtkit.models.gemm`) computes what the plain torch ops compute.

* :func:`gemm.linear` forward and backward against float64 ``F.linear``, for 2-D and 3-D inputs
  and strided (sliced, transposed) weights, and its fallbacks (autocast, other dtypes, off);
* the LSTM and GRU cells, values and gradients, against ``torch.lstm_cell``/``torch.gru_cell``;
* whole models: the training loss and every parameter's gradient with the oneDNN path against the
  plain path (``gemm.ENABLED`` off), for every model type and Luong attention variant.
"""
from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from nmtkit.models import gemm
from nmtkit.train.loss import sequence_loss
from tests.helpers import _luong_variants, _vid, batch, make_model

pytestmark = pytest.mark.skipif(not gemm.AVAILABLE, reason="oneDNN is not available in this torch")


@pytest.fixture(autouse=True)
def onednn_on(monkeypatch):
    """The path under test, whichever CPU runs the tests (it is on by default only on AMD's)."""
    monkeypatch.setattr(gemm, "ENABLED", True)


def _grads(*tensors: torch.Tensor) -> list[torch.Tensor]:
    return [t.grad.clone() for t in tensors]


@pytest.mark.parametrize("shape", [(7, 5), (3, 4, 5), (64, 40)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_float64_forward_and_backward(shape, bias):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(9, shape[-1], generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.randn(9, generator=gen, dtype=torch.float64, requires_grad=True) if bias else None
    y = F.linear(x, w, b)
    g = torch.randn(y.shape, generator=gen, dtype=torch.float64)
    y.backward(g)
    ref = _grads(x, w, *([b] if bias else []))
    xf, wf = x.detach().float().requires_grad_(), w.detach().float().requires_grad_()
    bf = b.detach().float().requires_grad_() if bias else None
    yf = gemm.linear(xf, wf, bf)
    yf.backward(g.float())
    torch.testing.assert_close(yf.double(), y.detach(), atol=1e-4, rtol=1e-5)
    for got, want in zip(_grads(xf, wf, *([bf] if bias else [])), ref):
        torch.testing.assert_close(got.double(), want, atol=1e-4, rtol=1e-5)


def test_linear_reads_strided_operands():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(6, 5, generator=gen)
    w = torch.randn(8, 20, generator=gen)
    for weight in (w[:, 3:8], torch.randn(5, 8, generator=gen).t()):
        torch.testing.assert_close(gemm.linear(x, weight), F.linear(x, weight), atol=1e-5, rtol=1e-5)
    xt = torch.randn(5, 6, generator=gen).t()
    torch.testing.assert_close(gemm.linear(xt, w[:, :5]), F.linear(xt, w[:, :5]), atol=1e-5, rtol=1e-5)


def test_linear_falls_back_where_onednn_is_not_the_path(monkeypatch):
    x, w = torch.randn(4, 3), torch.randn(5, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert gemm.linear(x, w).dtype == torch.bfloat16  # autocast's own (bf16) product
    assert gemm.linear(x.double(), w.double()).dtype == torch.float64
    assert gemm.linear(torch.randn(0, 3), w).shape == (0, 5)
    monkeypatch.setattr(gemm, "ENABLED", False)
    assert torch.equal(gemm.linear(x, w), F.linear(x, w))


def test_cells_match_torch_values_and_gradients():
    gen = torch.Generator().manual_seed(2)

    def leaf(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).requires_grad_()

    x, h, c = leaf(6, 5), leaf(6, 7), leaf(6, 7)
    for n_gates, ours, theirs in ((4, lambda *a: gemm.lstm_cell(x, h, c, *a), lambda *a: torch.lstm_cell(x, (h, c), *a)),
                                  (3, lambda *a: (gemm.gru_cell(x, h, *a),), lambda *a: (torch.gru_cell(x, h, *a),))):
        params = [leaf(n_gates * 7, 5), leaf(n_gates * 7, 7), leaf(n_gates * 7), leaf(n_gates * 7)]
        inputs = [x, h, c, *params]
        results = []
        for fn in (ours, theirs):
            for t in inputs:
                t.grad = None
            out = fn(*params)
            sum((o * (k + 1)).sum() for k, o in enumerate(out)).backward()
            results.append(([o.detach() for o in out], [None if t.grad is None else t.grad.clone() for t in inputs]))
        (out_a, grad_a), (out_b, grad_b) = results
        for a, b in zip(out_a, out_b):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        for a, b in zip(grad_a, grad_b):
            assert (a is None) == (b is None)
            if a is not None:
                torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def _loss_and_grads(model, enabled: bool, monkeypatch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    monkeypatch.setattr(gemm, "ENABLED", enabled)
    src, lengths, prev, target = batch()
    model.train()
    model.zero_grad(set_to_none=True)
    loss, _ = sequence_loss(model(src, lengths, prev)[0], target)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def check_same_as_plain(model, monkeypatch) -> None:
    loss, fast = _loss_and_grads(model, True, monkeypatch)
    ref_loss, ref = _loss_and_grads(model, False, monkeypatch)
    torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-6)
    assert fast.keys() == ref.keys() and len(ref) >= 5
    for name in ref:
        torch.testing.assert_close(fast[name], ref[name], atol=1e-5, rtol=1e-4, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("opts", _luong_variants(), ids=_vid)
def test_luong_loss_and_gradients_match_the_plain_path(opts, monkeypatch):
    check_same_as_plain(make_model("luong_tiny", embed_dim=10, hidden_size=12, window=2, max_source_positions=6, **opts),
                        monkeypatch)


@pytest.mark.parametrize("arch,opts", [
    ("rnnsearch_tiny", dict(embed_dim=10, hidden_size=12, attention_dim=8, maxout_size=6)),
    ("rnnsearch_tiny", dict(embed_dim=10, hidden_size=12, attention_dim=8, maxout_size=6, layers=2, source_reversal=True)),
    ("rnnencdec_tiny", dict(embed_dim=10, hidden_size=12, maxout_size=6, layers=1, cell="lstm")),
    ("rnnencdec_tiny", dict(embed_dim=10, hidden_size=12, maxout_size=6, layers=2, cell="gru", bahdanau_decoder=True)),
    ("rnnencdec_tiny", dict(embed_dim=10, hidden_size=12, maxout_size=6, layers=1, cell="gru", feed_context=True)),
], ids=["rnnsearch", "rnnsearch-L2-rev", "rnnencdec-lstm", "rnnencdec-bahdanau-L2", "rnnencdec-gru-context"])
def test_other_models_loss_and_gradients_match_the_plain_path(arch, opts, monkeypatch):
    check_same_as_plain(make_model(arch, **opts), monkeypatch)


def test_the_comparison_can_fail(monkeypatch):
    """A cell update that swaps two gates on the oneDNN path only is caught."""
    import nmtkit.models.luong as luong

    real = gemm.lstm_update

    def swapped(gates, c):
        if not gemm.ENABLED:
            return real(gates, c)
        i, f, g, o = gates.chunk(4, dim=1)
        return real(torch.cat([f, i, g, o], dim=1), c)

    monkeypatch.setattr(luong, "lstm_update", swapped)
    with pytest.raises(AssertionError):
        check_same_as_plain(make_model("luong_tiny", embed_dim=10, hidden_size=12, layers=2), monkeypatch)


@pytest.mark.parametrize("env,vendor,want", [
    (None, "AuthenticAMD", True), (None, "HygonGenuine", True), (None, "GenuineIntel", False), (None, "", False),
    ("0", "AuthenticAMD", False), ("1", "GenuineIntel", True),
])
def test_the_path_is_on_by_default_only_where_mkl_is_slow(env, vendor, want, monkeypatch):
    if env is None:
        monkeypatch.delenv("NMTKIT_ONEDNN", raising=False)
    else:
        monkeypatch.setenv("NMTKIT_ONEDNN", env)
    monkeypatch.setattr(gemm, "_cpu_vendor", lambda: vendor)
    assert gemm._enabled() is want


def test_linear_reads_a_strided_or_broadcast_bias_like_f_linear():
    x, w = torch.randn(4, 3), torch.randn(5, 3)
    wide = torch.randn(10)
    for bias in (wide[::2], torch.ones(1).expand(5), torch.ones(1)):
        torch.testing.assert_close(gemm.linear(x, w, bias), F.linear(x, w, bias), atol=1e-5, rtol=1e-5)


def test_a_double_backward_through_the_onednn_path_fails_loudly():
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(2, 4, requires_grad=True)
    (g,) = torch.autograd.grad(gemm.linear(x, w).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError):
        g.sum().backward()


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("rows", [(1,), (5,), (3, 4)])
def test_packed_output_layer_matches_linear(bias, rows, monkeypatch):
    """The MKL path's packed output layer (bias folded into the product) gives F.linear's logits."""
    monkeypatch.setattr(gemm, "ENABLED", False)
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(11, 6, generator=gen)
    b = torch.randn(11, generator=gen) if bias else None
    layer = gemm.PackedLinear(w, b)
    x = torch.randn(*rows, 6, generator=gen)
    with torch.no_grad():
        torch.testing.assert_close(layer(x), F.linear(x, w, b), atol=1e-5, rtol=1e-5)
        assert layer._packed is not None  # the packed product ran, not the fallback


def test_packed_output_layer_falls_back_with_gradients_and_off_float32(monkeypatch):
    monkeypatch.setattr(gemm, "ENABLED", False)
    w = torch.randn(7, 4, requires_grad=True)
    b = torch.randn(7, requires_grad=True)
    layer = gemm.PackedLinear(w, b)
    x = torch.randn(3, 4)
    y = layer(x)
    y.sum().backward()  # training: the gradient reaches the parameters
    assert layer._packed is None and w.grad is not None and b.grad is not None
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert layer(x).dtype == torch.bfloat16
    assert layer._packed is None


@pytest.mark.parametrize("enabled", [False, True])
@pytest.mark.parametrize("biases", ["both", "none", "input"])
def test_joined_lstm_cell_matches_lstm_cell_and_packs_once(enabled, biases, monkeypatch):
    """The search's LSTM layer as one product of ``[x, h, 1]`` gives torch.lstm_cell's (h, c), on
    either library's path; the joined weight is made at the first step and reused after."""
    if enabled and not gemm.AVAILABLE:
        pytest.skip("no oneDNN in this torch")
    monkeypatch.setattr(gemm, "ENABLED", enabled)
    gen = torch.Generator().manual_seed(4)
    w_ih, w_hh = torch.randn(16, 6, generator=gen), torch.randn(16, 4, generator=gen)
    b_ih = None if biases == "none" else torch.randn(16, generator=gen)
    b_hh = torch.randn(16, generator=gen) if biases == "both" else None
    x, h, c = torch.randn(5, 6, generator=gen), torch.randn(5, 4, generator=gen), torch.randn(5, 4, generator=gen)
    cache: dict = {}
    packed = []
    with torch.no_grad():
        ref_h, ref_c = torch.lstm_cell(x, (h, c), w_ih, w_hh, b_ih, b_hh)
        for _ in range(2):
            new_h, new_c = gemm.joined_lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh, cache, "layer0")
            torch.testing.assert_close(new_h, ref_h, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(new_c, ref_c, atol=1e-5, rtol=1e-5)
            assert list(cache) == ["layer0"]
            packed.append(cache["layer0"])
    assert packed[0] is packed[1]  # packed at the first step only
    with torch.enable_grad():  # with gradients it is lstm_cell's own path, and packs nothing
        cache.clear()
        gemm.joined_lstm_cell(x, h, c, w_ih.requires_grad_(), w_hh, b_ih, b_hh, cache, "layer0")
        assert not cache


def test_a_search_joins_the_decoder_lstm_layers_for_its_steps_only():
    """Inside ``searching`` a Luong decoder step runs each LSTM layer as one product (prepared at
    its first step, dropped with the search) and gives the step's log-probs as outside it."""
    model = make_model("luong_tiny", embed_dim=10, hidden_size=12, layers=2).eval()
    src, lengths, prev, _ = batch()
    with torch.no_grad():
        enc = model.encode(src, lengths)
        state = model.init_decoder_state(enc)
        want, want_attn, _ = model.decode_step(prev[:, 0], state, enc)
        assert model._search_cache is None
        with model.searching():
            for _ in range(2):
                got, attn, _ = model.decode_step(prev[:, 0], state, enc)
                torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
                torch.testing.assert_close(attn, want_attn, atol=1e-5, rtol=1e-5)
            assert model._search_cache is not None and len(model._search_cache) == 2  # one per layer
        assert model._search_cache is None
