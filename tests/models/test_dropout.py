"""nmtkit.models.dropout: F.dropout's distribution from cheaper masks."""
from __future__ import annotations

import torch

from nmtkit.models.dropout import Dropout, dropout, keep_mask


def test_keep_rate_is_the_rounded_rate_and_scale_its_inverse():
    torch.manual_seed(0)
    keep, scale = keep_mask(torch.Size([2000, 1000]), 0.3, torch.device("cpu"))
    realised = 1 - round(0.3 * 65536) / 65536
    assert abs(scale * realised - 1) < 1e-12
    # 2 M Bernoulli draws: the sample mean is within 5 standard deviations of the rate
    assert abs(keep.float().mean().item() - realised) < 5 * (realised * (1 - realised) / 2e6) ** 0.5


def test_every_bit_of_the_draw_is_used_alike():
    """The four 16-bit slots of each 64-bit draw keep at the same rate (no slot biased by a sign bit)."""
    torch.manual_seed(1)
    keep, _ = keep_mask(torch.Size([400_000 * 4]), 0.5, torch.device("cpu"))
    rates = keep.view(-1, 4).float().mean(0)
    assert torch.all((rates - 0.5).abs() < 5 * (0.25 / 400_000) ** 0.5), rates


def test_forward_and_backward_share_the_mask_and_expectation_holds():
    torch.manual_seed(2)
    x = (torch.rand(300, 500) + 0.5).requires_grad_()  # positive: the sum has a stable expectation
    y = dropout(x, 0.25, training=True)
    y.sum().backward()
    kept = y != 0
    assert torch.equal(x.grad != 0, kept)
    assert torch.allclose(y[kept], x.detach()[kept] * 65536 / (65536 - 16384))
    assert abs((y.detach().sum() / x.detach().sum()).item() - 1) < 0.01  # 150 k terms: sd about 0.002


def test_identity_in_eval_and_at_zero_and_repeatable_with_a_seed():
    x = torch.randn(7, 9)
    m = Dropout(0.3).eval()
    assert m(x) is x and dropout(x, 0.0, training=True) is x
    m.train()
    torch.manual_seed(3)
    a = m(x)
    torch.manual_seed(3)
    assert torch.equal(a, m(x))
    assert a.dtype == x.dtype and dropout(x.bfloat16(), 0.3, True).dtype == torch.bfloat16
