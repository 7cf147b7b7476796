"""Luong's search multiplies the annotations by W_c's context columns once per sentence
(``context_proj``) and averages those: the same decoder step as ``W_c [c; h]``, rounded
differently, in float32 and with the bf16 ``W_c`` of ``--quantize int8``."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from nmtkit.data.dictionary import Dictionary
from nmtkit.generate.quantize import Bf16Linear
from nmtkit.models.common import select_input_columns
from nmtkit.models.registry import build_model, resolve_config

VARIANTS = {
    "global-general-feed": {},
    "no-feed-concat": {"input_feeding": False, "score": "concat"},
    "local-p": {"attention": "local-p", "window": 1},
    "local-m-dot": {"attention": "local-m", "score": "dot", "window": 2},
    "bidir-location": {"score": "location", "encoder_bidirectional": True},
    "wide-encoder": {"encoder_bidirectional": True, "encoder_hidden_size": 24},
}
SRC = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
SLEN = torch.tensor([5, 3])


def build(**overrides) -> nn.Module:  # noqa: ANN003
    d = Dictionary.from_symbols(["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(20)])
    torch.manual_seed(0)
    name, cfg = resolve_config("luong_tiny", {"dropout": 0.0, **overrides})
    return build_model(name, cfg, d, d).eval()


def steps(model: nn.Module, project: bool, beam: int = 3, n: int = 4) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``n`` decoder steps of ``beam`` rows per sentence: without gradients (a search, which
    projects the context) or with them (the concatenated product), as values."""
    grad = torch.no_grad() if project else torch.enable_grad()
    with grad:
        enc = model.encode(SRC, SLEN)
        rows = torch.arange(2).repeat_interleave(beam)
        state = model.reorder_decoder_state(model.init_decoder_state(enc), rows)
        prev = torch.full((2 * beam,), 1)
        out = []
        for t in range(n):
            lprobs, attn, state = model.decode_step(prev, state, enc)
            out.append((lprobs.detach(), attn.detach()))
            prev = torch.arange(2 * beam) % 20 + 4 + t
    assert ("context_proj" in enc.extra) == project
    return out


@pytest.mark.parametrize("variant", VARIANTS)
def test_projected_context_gives_the_same_steps_in_float32(variant):
    model = build(**VARIANTS[variant])
    for (lp, attn), (lp_ref, attn_ref) in zip(steps(model, True), steps(model, False)):
        torch.testing.assert_close(lp, lp_ref, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(attn, attn_ref, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("variant", ["global-general-feed", "wide-encoder"])
def test_projected_context_with_a_bf16_w_c_stays_within_bf16_rounding(variant):
    model = build(**VARIANTS[variant])
    model.W_c = Bf16Linear(model.W_c)
    for (lp, _), (lp_ref, _) in zip(steps(model, True), steps(model, False)):
        torch.testing.assert_close(lp, lp_ref, atol=2e-2, rtol=2e-2)


def test_a_step_with_gradients_keeps_the_concatenated_product():
    """W_c's context columns get their gradient even from states encoded without one (a library
    user training the decoder on a fixed encoder): the projection is a no-gradient step's."""
    model = build()
    with torch.no_grad():
        enc = model.encode(SRC, SLEN)
    state = model.init_decoder_state(enc)
    lprobs, _, _ = model.decode_step(torch.full((2,), 1), state, enc)
    assert "context_proj" not in enc.extra
    lprobs[:, 5].sum().backward()
    context_columns = model.W_c.weight.grad[:, : enc.states.size(-1)]
    assert context_columns.abs().sum() > 0


def test_select_input_columns_sums_to_the_whole_product():
    torch.manual_seed(1)
    x = torch.randn(7, 10)
    layer = nn.Linear(10, 6, bias=False)
    left, right = select_input_columns(layer, slice(0, 4)), select_input_columns(layer, slice(4, None))
    torch.testing.assert_close(left(x[:, :4]) + right(x[:, 4:]), layer(x), atol=1e-6, rtol=1e-6)
    assert select_input_columns(nn.Linear(10, 6), slice(0, 4)) is None  # a bias belongs to no block
    bf16 = Bf16Linear(layer)
    exact = select_input_columns(bf16, slice(0, 4), float32=True)(x[:, :4])
    torch.testing.assert_close(exact, x[:, :4] @ bf16.weight[:, :4].float().T, atol=1e-6, rtol=1e-6)
    rounded = select_input_columns(bf16, slice(0, 4))(x[:, :4])
    assert rounded.dtype == torch.float32
    assert torch.equal(select_input_columns(bf16, slice(0, 4))(x[:, :4]), rounded)  # the cached block again
    assert len(bf16._blocks) == 2  # each block copied once, not per call
    torch.testing.assert_close(rounded, exact, atol=3e-2, rtol=2e-2)
