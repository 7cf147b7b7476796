"""The step loops of the float32 CPU path, with oneDNN and with ATen's BLAS (MKL) computing the
products (``gemm.ENABLED`` on and off: the encoder loop and :class:`gemm.LoopWeight` apply to both).

* the encoders' step loop (:func:`~nmtkit.models.encoders.masked_rnn`) against the packed
  ``nn.LSTM``/``nn.GRU``, and :func:`~nmtkit.models.encoders.run_rnn` choosing it for float32 CPU;
* :class:`gemm.LoopWeight` (one weight gradient for all steps of a loop) against per-step products.
"""
from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from nmtkit.models import gemm

LIBRARIES = [pytest.param(True, id="onednn", marks=pytest.mark.skipif(not gemm.AVAILABLE, reason="no oneDNN in this torch")),
             pytest.param(False, id="aten")]


@pytest.fixture(autouse=True, params=LIBRARIES)
def library(request, monkeypatch):
    """Every test here runs with oneDNN computing the float32 products and with ATen's BLAS."""
    monkeypatch.setattr(gemm, "ENABLED", request.param)
    return request.param


def test_the_float32_cpu_encoder_runs_the_step_loop(monkeypatch):
    """run_rnn takes the step loop for float32 on the CPU whichever library multiplies, and the
    packed RNN under bf16 autocast."""
    from torch import nn

    from nmtkit.models import encoders

    calls = []
    real = encoders.masked_rnn
    monkeypatch.setattr(encoders, "masked_rnn", lambda *a: calls.append(1) or real(*a))
    rnn = nn.LSTM(5, 7, 1, batch_first=True)
    x, lengths = torch.randn(2, 4, 5), torch.tensor([4, 2])
    encoders.run_rnn(rnn, x, lengths)
    assert calls == [1]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        encoders.run_rnn(rnn, x, lengths)
    assert calls == [1]


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("layers", [1, 2])
def test_the_encoder_step_loop_is_the_packed_rnn(cell, bidirectional, layers):
    """masked_rnn (the encoder on the oneDNN path) returns what the packed nn.LSTM/nn.GRU returns:
    outputs (zeros at padding), final states and every gradient, for unsorted lengths."""
    from torch import nn
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    from nmtkit.models.encoders import masked_rnn

    torch.manual_seed(0)
    rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(5, 7, layers, batch_first=True, bidirectional=bidirectional)
    x = torch.randn(4, 6, 5, requires_grad=True)
    lengths = torch.tensor([6, 2, 4, 1])
    out, hidden = rnn(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
    out, _ = pad_packed_sequence(out, batch_first=True, total_length=6)
    h, c = hidden if cell == "lstm" else (hidden, None)
    o2, h2, c2 = masked_rnn(rnn, x, lengths)
    for a, b in ((out, o2), (h, h2)) + (((c, c2),) if c is not None else ()):
        torch.testing.assert_close(b, a, atol=1e-6, rtol=1e-5)
    assert (o2[1, 2:] == 0).all()

    def total(o, hh, cc):
        return o.sum() + 2 * hh.sum() + (3 * cc.sum() if cc is not None else 0)

    params = [x, *rnn.parameters()]
    for a, b in zip(torch.autograd.grad(total(out, h, c), params), torch.autograd.grad(total(o2, h2, c2), params)):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-4)


def _loop(weight: torch.Tensor, bias, xs: list[torch.Tensor], h: torch.Tensor, product) -> torch.Tensor:
    """A small recurrence h_t = tanh(W [x_t; h_{t-1}] + b) whose loss reads every step."""
    loss = h.new_zeros(())
    for k, x in enumerate(xs):
        h = torch.tanh(product(torch.cat([x, h], dim=1)))
        loss = loss + (h * (k + 1)).sum()
    return loss


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("sliced", [False, True])
def test_loop_weight_sums_the_steps_gradient_in_one_product(bias, sliced):
    """LoopWeight's gradients (weight, bias, inputs, initial state) equal per-step F.linear's in float64."""
    gen = torch.Generator().manual_seed(4)
    big = torch.randn(5, 9 + (3 if sliced else 0), generator=gen, requires_grad=True)  # hidden 5, input 4
    b = torch.randn(5, generator=gen, requires_grad=True) if bias else None
    xs = [torch.randn(3, 4, generator=gen, requires_grad=True) for _ in range(6)]
    h0 = torch.randn(3, 5, generator=gen, requires_grad=True)
    leaves = [big, *([b] if bias else []), *xs, h0]

    def run(product_of):
        for t in leaves:
            t.grad = None
        w = big[:, 3:] if sliced else big
        _loop(w, b, xs, h0, product_of(w)).backward()
        return [t.grad.clone() for t in leaves]

    w64 = lambda w: (lambda x: F.linear(x.double(), w.double(), None if b is None else b.double()).float())  # noqa: E731
    want = run(w64)
    loops: list[gemm.LoopWeight] = []
    got = run(lambda w: loops.append(gemm.LoopWeight(w, b)) or loops[-1])
    assert loops[-1].calls == len(xs)  # the summing path ran, not plain linear
    for a, c in zip(got, want):
        torch.testing.assert_close(a, c, atol=1e-4, rtol=1e-5)


def test_loop_weight_is_plain_linear_where_no_weight_gradient_is_wanted():
    gen = torch.Generator().manual_seed(5)
    w, x = torch.randn(6, 4, generator=gen), torch.randn(3, 4, generator=gen)
    torch.testing.assert_close(gemm.LoopWeight(w)(x), F.linear(x, w), atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        loop = gemm.LoopWeight(w.requires_grad_())
        loop(x)
    assert loop.calls == 0


def test_every_backward_pass_through_a_loop_weight_sums_its_own_steps():
    """A partial pass over the retained graph (the gradient of a later step's input, which never
    reaches the first step) leaves nothing behind; a second full pass adds the same gradient again."""
    gen = torch.Generator().manual_seed(6)
    w = torch.randn(6, 9, generator=gen, requires_grad=True)
    xs = [torch.randn(2, 3, generator=gen, requires_grad=True) for _ in range(4)]
    ref = w.detach().clone().requires_grad_()
    _loop(ref, None, xs, torch.zeros(2, 6), lambda x: F.linear(x, ref)).backward()
    loss = _loop(w, None, xs, torch.zeros(2, 6), gemm.LoopWeight(w))
    torch.autograd.grad(loss, [xs[2]], retain_graph=True)
    loss.backward(retain_graph=True)
    torch.testing.assert_close(w.grad, ref.grad, atol=1e-5, rtol=1e-5)
    loss.backward()
    torch.testing.assert_close(w.grad, 2 * ref.grad, atol=1e-5, rtol=1e-5)


def test_loop_weight_under_autocast_casts_once_and_returns_float32_gradients():
    gen = torch.Generator().manual_seed(7)
    w = torch.randn(5, 9, generator=gen, requires_grad=True)
    xs = [torch.randn(3, 4, generator=gen) for _ in range(4)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loop = gemm.LoopWeight(w)
        assert loop.weight.dtype == torch.bfloat16
        loss = _loop(w, None, xs, torch.zeros(3, 5), loop)
    loss.float().backward()
    assert w.grad.dtype == torch.float32
    ref = w.detach().clone().requires_grad_()
    _loop(ref, None, xs, torch.zeros(3, 5), lambda x: F.linear(x, ref)).backward()
    torch.testing.assert_close(w.grad, ref.grad, atol=0.5, rtol=5e-2)  # bf16 products


@pytest.mark.parametrize("transposed", [False, True])
def test_a_batched_loop_weight_sums_the_steps_gradient_in_one_bmm(transposed):
    """Attention-shaped loop: per-sentence matrices (keys [B, S, H], or states read as [B, H, S])
    multiplied at every step; gradients equal per-step torch.bmm's."""
    gen = torch.Generator().manual_seed(8)
    states = torch.randn(3, 5, 4, generator=gen, requires_grad=True)  # B=3, S=5, H=4
    queries = [torch.randn(3, 1, 4 if not transposed else 5, generator=gen, requires_grad=True) for _ in range(4)]
    leaves = [states, *queries]

    def run(product_of) -> list[torch.Tensor]:
        for t in leaves:
            t.grad = None
        w = states.transpose(1, 2) if transposed else states
        product, carry, loss = product_of(w), 0.0, 0.0
        for k, q in enumerate(queries):  # each step reads the last: the steps are chained
            y = product(q + carry)
            carry = torch.tanh(y).sum() * 0.1
            loss = loss + (y * (k + 1)).sum()
        loss.backward()
        return [t.grad.clone() for t in leaves]

    want = run(lambda w: (lambda x: torch.bmm(x.double(), w.double().transpose(1, 2)).float()))
    got = run(gemm.LoopWeight)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-5)
    with torch.no_grad():
        loop = gemm.LoopWeight(states)
        torch.testing.assert_close(loop(queries[0]) if not transposed else loop(queries[0][..., :4]),
                                   torch.bmm(queries[0] if not transposed else queries[0][..., :4], states.transpose(1, 2)))
    assert loop.calls == 0
