"""sequence_loss's closed-form gradient equals autograd's gradient of the same sum, and
output_layer_loss (the output layer and the loss in chunks) equals the loss of the whole logits."""
from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from nmtkit.data.dictionary import PAD_ID
from nmtkit.train import loss as loss_module
from nmtkit.train.loss import output_layer_loss, sequence_loss


def reference(logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The loss spelled out with differentiable torch ops (what autograd differentiates)."""
    lprobs = F.log_softmax(logits.double(), dim=-1).reshape(-1, logits.size(-1))
    flat = target.reshape(-1)
    real = flat != PAD_ID
    nll = torch.where(real, -lprobs.gather(1, flat.unsqueeze(1)).squeeze(1), 0.0).sum()
    smooth = torch.where(real, -lprobs.mean(dim=-1), 0.0).sum()
    return (1 - smoothing) * nll + smoothing * smooth, nll


def _batch(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    logits = (3 * torch.randn(4, 6, 13, generator=gen)).to(dtype).requires_grad_()
    target = torch.randint(1, 13, (4, 6), generator=gen)
    target[1, 2:] = PAD_ID
    target[3, 5:] = PAD_ID
    return logits, target


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("weights", [(1.0, 0.0), (0.7, 0.3), (0.0, 2.0)])  # d/d(loss), d/d(nll)
def test_loss_and_gradient_match_autograd_in_float32(smoothing, weights):
    logits, target = _batch(torch.float32)
    results = []
    for fn in (sequence_loss, reference):
        logits.grad = None
        loss, nll = fn(logits, target, smoothing)
        (weights[0] * loss + weights[1] * nll).backward()
        results.append((loss.double(), nll.double(), logits.grad.double()))
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert results[0][2][1, 2:].abs().max() == 0  # padded positions get no gradient


def test_bf16_logits_get_a_bf16_gradient_within_bf16_tolerance():
    logits, target = _batch(torch.bfloat16)
    loss, _ = sequence_loss(logits, target, 0.1)
    loss.backward()
    assert logits.grad.dtype == torch.bfloat16
    ref_logits = logits.detach().float().requires_grad_()
    reference(ref_logits, target, 0.1)[0].backward()
    torch.testing.assert_close(logits.grad.float(), ref_logits.grad, atol=1e-2, rtol=1e-2)


def test_the_comparison_can_fail():
    logits, target = _batch(torch.float32)
    sequence_loss(logits, target, 0.1)[0].backward()
    ref_logits = logits.detach().requires_grad_()
    reference(ref_logits, target, 0.2)[0].backward()  # another smoothing: another gradient
    with pytest.raises(AssertionError):
        torch.testing.assert_close(logits.grad.double(), ref_logits.grad, atol=1e-5, rtol=1e-5)


def test_validation_without_gradients_and_a_second_backward_that_fails_loudly():
    logits, target = _batch(torch.float32)
    with torch.no_grad():
        loss, nll = sequence_loss(logits, target)
    torch.testing.assert_close(nll.double(), reference(logits.detach(), target, 0.0)[1])
    loss, _ = sequence_loss(logits, target, 0.1)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="second backward"):
        loss.backward()


# -- output_layer_loss: the output layer and the loss in chunks ----------------------------------------
def _layer_batch(dtype: torch.dtype, bias: bool) -> tuple[torch.nn.Linear, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    layer = torch.nn.Linear(7, 13, bias=bias).to(dtype)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=dtype))
    features = torch.randn(4, 6, 7, generator=gen, dtype=dtype).requires_grad_()
    target = torch.randint(1, 13, (4, 6), generator=gen)
    target[1, 2:] = PAD_ID
    target[3, 5:] = PAD_ID
    return layer, features, target


def _loss_and_grads(fn, layer, features, target, smoothing, weights):  # noqa: ANN001, ANN202
    leaves = [features, *layer.parameters()]
    for t in leaves:
        t.grad = None
    loss, nll = fn(features, layer, target, smoothing)
    (weights[0] * loss + weights[1] * nll).backward()
    return [loss.detach(), nll.detach()] + [t.grad.clone() for t in leaves]


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("weights", [(1.0, 0.0), (0.7, 0.3), (0.0, 2.0)])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("chunk", [13, 50, 10 ** 6])  # one row per chunk, a few rows, all rows at once
def test_the_chunked_output_layer_loss_is_the_float64_loss_of_the_logits(smoothing, weights, bias, chunk, monkeypatch):
    """Values and every gradient (features, weight, bias) equal the spelled-out loss of
    ``layer(features)`` in float64 to rounding, however the rows are chunked; padded rows get none."""
    monkeypatch.setattr(loss_module, "CHUNK_ELEMENTS", chunk)
    layer, features, target = _layer_batch(torch.float64, bias)
    got = _loss_and_grads(output_layer_loss, layer, features, target, smoothing, weights)
    want = _loss_and_grads(lambda f, lay, t, s: reference(lay(f), t, s), layer, features, target, smoothing, weights)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-12)
    assert got[2][1, 2:].abs().max() == 0


def test_the_chunked_loss_under_bf16_autocast_is_within_bf16_of_float32():
    layer, features, target = _layer_batch(torch.float32, True)
    want = _loss_and_grads(lambda f, lay, t, s: reference(lay(f), t, s), layer, features, target, 0.1, (1.0, 0.0))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = _loss_and_grads(output_layer_loss, layer, features, target, 0.1, (1.0, 0.0))
    assert [t.dtype for t in got[2:]] == [torch.float32] * 3  # each gradient in its parameter's type
    for a, b in zip(got, want):
        torch.testing.assert_close(a.double(), b.double(), atol=0.15, rtol=3e-2)


def test_the_chunked_loss_comparison_can_fail_and_a_second_backward_fails_loudly():
    layer, features, target = _layer_batch(torch.float64, True)
    got = _loss_and_grads(output_layer_loss, layer, features, target, 0.1, (1.0, 0.0))
    want = _loss_and_grads(lambda f, lay, t, s: reference(lay(f), t, s), layer, features, target, 0.2, (1.0, 0.0))
    with pytest.raises(AssertionError):
        torch.testing.assert_close(got[3], want[3], atol=1e-12, rtol=1e-12)  # another smoothing: another gradient
    loss, _ = output_layer_loss(features, layer, target, 0.1)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="second backward"):
        loss.backward()
    with torch.no_grad():  # validation: the loss alone
        torch.testing.assert_close(output_layer_loss(features, layer, target)[1], want[1], atol=1e-12, rtol=1e-12)
