"""Luong and Bahdanau attention: shapes, normalisation, exact zeros on padding and outside
local windows, windows kept inside the sentence, the local-p Gaussian and its gradients."""
from __future__ import annotations

import math

import pytest
import torch

from nmtkit.models.attention import AdditiveAttention, LuongAttention

torch.set_num_threads(1)

H = 8
WINDOW = 2
LENGTHS = torch.tensor([7, 3, 1, 5])
SRC = 7
TGT = 9  # more target steps than source tokens: local-m must clamp


def inputs(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    states = torch.randn(len(LENGTHS), SRC, H, generator=gen)
    mask = torch.arange(SRC)[None, :] < LENGTHS[:, None]
    states = states * mask.unsqueeze(-1)  # encoders return zeros at padding
    query = torch.randn(len(LENGTHS), TGT, H, generator=gen)
    steps = torch.arange(TGT)[None, :].expand(len(LENGTHS), TGT)
    return query, states, mask, steps


def make(attention: str, score: str, seed: int = 0) -> LuongAttention:
    torch.manual_seed(seed)
    return LuongAttention(H, attention, score, window=WINDOW, max_source_positions=SRC)


@torch.no_grad()
def reference_weights(attn: LuongAttention, query, states, mask, steps) -> torch.Tensor:
    """Straightforward per-entry loops over the paper's definitions."""
    scores = attn.scores(query, states, None)
    out = torch.zeros_like(scores)
    centers = attn.window_centers(query, mask, steps) if attn.attention != "global" else None
    for b in range(scores.size(0)):
        length = int(mask[b].sum())
        for t in range(scores.size(1)):
            keep = list(range(length))
            if centers is not None:
                p = float(centers[b, t])
                keep = [s for s in keep if abs(s - p) <= WINDOW]
            w = torch.softmax(scores[b, t, keep], dim=0)
            if attn.attention == "local-p":
                sigma = WINDOW / 2
                w = w * torch.tensor([math.exp(-((s - p) ** 2) / (2 * sigma**2)) for s in keep])
            out[b, t, keep] = w
    return out


ALL = [(a, s) for a in ("global", "local-m", "local-p") for s in ("dot", "general", "concat", "location")]


@pytest.mark.parametrize("attention,score", ALL)
def test_shapes_padding_and_normalisation(attention: str, score: str) -> None:
    attn = make(attention, score)
    query, states, mask, steps = inputs()
    context, weights = attn(query, states, mask, attn.precompute_keys(states), steps)
    assert context.shape == (len(LENGTHS), TGT, H)
    assert weights.shape == (len(LENGTHS), TGT, SRC)
    assert torch.isfinite(weights).all() and (weights >= 0).all()
    pad = ~mask[:, None, :].expand_as(weights)
    assert (weights[pad] == 0).all()  # exactly zero, not merely small
    sums = weights.sum(-1)
    if attention == "local-p":
        # the paper's eq. 10: softmax weights times a Gaussian, not renormalised
        assert (sums <= 1 + 1e-6).all() and (sums > 0).all()
    else:
        torch.testing.assert_close(sums, torch.ones_like(sums))
    torch.testing.assert_close(weights, reference_weights(attn, query, states, mask, steps))
    torch.testing.assert_close(context, torch.bmm(weights, states))


@pytest.mark.parametrize("score", ["dot", "general", "concat", "location"])
def test_precomputed_keys_match_keys_computed_per_step(score: str) -> None:
    attn = make("global", score)
    query, states, mask, steps = inputs(1)
    full = attn(query, states, mask, attn.precompute_keys(states), steps)
    lazy = attn(query, states, mask, None, steps)
    torch.testing.assert_close(full[1], lazy[1])


def test_score_functions_follow_their_formulas() -> None:
    query, states, mask, steps = inputs(2)
    dot = make("global", "dot").scores(query, states, None)
    torch.testing.assert_close(dot[1, 2, 0], query[1, 2] @ states[1, 0])
    gen = make("global", "general")
    torch.testing.assert_close(
        gen.scores(query, states, None)[1, 2, 0], query[1, 2] @ (gen.W_a.weight @ states[1, 0])
    )
    cat = make("global", "concat")
    expect = cat.v_a.weight[0] @ torch.tanh(cat.W_q.weight @ query[1, 2] + cat.W_k.weight @ states[1, 0])
    torch.testing.assert_close(cat.scores(query, states, None)[1, 2, 0], expect)
    loc = make("global", "location")
    torch.testing.assert_close(loc.scores(query, states, None)[1, 2], loc.W_loc.weight @ query[1, 2])


@pytest.mark.parametrize("score", ["dot", "general"])
def test_local_m_window_follows_target_position_and_stays_in_sentence(score: str) -> None:
    attn = make("local-m", score)
    query, states, mask, steps = inputs(3)
    _, weights = attn(query, states, mask, None, steps)
    for b, length in enumerate(LENGTHS.tolist()):
        for t in range(TGT):
            center = min(t, length - 1)
            nonzero = weights[b, t].nonzero().flatten().tolist()
            allowed = [s for s in range(length) if abs(s - center) <= WINDOW]
            assert nonzero and set(nonzero) <= set(allowed)
            assert max(nonzero) <= length - 1 and min(nonzero) >= 0


@pytest.mark.parametrize("push", [-50.0, 50.0])
def test_local_p_window_at_sentence_edges_stays_in_sentence(push: float) -> None:
    """Saturate the predicted position at 0 or at the sentence length."""
    attn = make("local-p", "general")
    with torch.no_grad():
        attn.W_p.weight.copy_(torch.eye(H))
        attn.v_p.weight.fill_(push)
    query, states, mask, steps = inputs(4)
    query = query.abs() + 1.0  # tanh(W_p h) > 0 everywhere, so the sign of v_p decides
    centers = attn.window_centers(query, mask, steps)
    lengths = LENGTHS[:, None].float().expand_as(centers)
    torch.testing.assert_close(centers, torch.zeros_like(centers) if push < 0 else lengths)
    _, weights = attn(query, states, mask, None, steps)
    for b, length in enumerate(LENGTHS.tolist()):
        for t in range(TGT):
            nonzero = weights[b, t].nonzero().flatten().tolist()
            assert nonzero, (b, t)
            assert min(nonzero) >= 0 and max(nonzero) <= length - 1
            edge = 0 if push < 0 else length - 1
            assert edge in nonzero


def test_local_p_gaussian_favours_positions_near_the_center() -> None:
    """With equal scores, weights fall off from p_t exactly like exp(-(s-p)^2 / (2 (D/2)^2))."""
    attn = LuongAttention(H, "local-p", "dot", window=3)
    with torch.no_grad():
        attn.W_p.weight.zero_()  # tanh(0) = 0 -> sigmoid(0) = 0.5 -> p_t = L / 2
    states = torch.zeros(1, 10, H)  # all dot scores equal
    mask = torch.ones(1, 10, dtype=torch.bool)
    _, weights = attn(torch.randn(1, 1, H), states, mask)
    p, sigma = 5.0, 1.5
    window = [s for s in range(10) if abs(s - p) <= 3]
    expect = torch.zeros(10)
    for s in window:
        expect[s] = math.exp(-((s - p) ** 2) / (2 * sigma**2)) / len(window)
    torch.testing.assert_close(weights[0, 0], expect)


def test_local_p_gradients_reach_the_position_predictor() -> None:
    attn = make("local-p", "general")
    query, states, mask, steps = inputs(5)
    query.requires_grad_(True)
    context, _ = attn(query, states, mask, attn.precompute_keys(states), steps)
    context.pow(2).sum().backward()
    assert attn.W_p.weight.grad is not None and attn.W_p.weight.grad.abs().sum() > 0
    assert attn.v_p.weight.grad is not None and attn.v_p.weight.grad.abs().sum() > 0


def test_location_score_masks_positions_beyond_its_range() -> None:
    attn = LuongAttention(H, "global", "location", max_source_positions=3)
    query, states, mask, steps = inputs(6)
    _, weights = attn(query, states, mask)
    assert (weights[..., 3:] == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(len(LENGTHS), TGT))


def test_additive_attention_normalises_over_real_positions() -> None:
    torch.manual_seed(0)
    attn = AdditiveAttention(query_size=5, key_size=2 * H, attention_dim=6)
    gen = torch.Generator().manual_seed(7)
    states = torch.randn(len(LENGTHS), SRC, 2 * H, generator=gen)
    mask = torch.arange(SRC)[None, :] < LENGTHS[:, None]
    query = torch.randn(len(LENGTHS), 5, generator=gen)
    context, weights = attn(query, states, mask, attn.precompute_keys(states))
    assert context.shape == (len(LENGTHS), 2 * H) and weights.shape == (len(LENGTHS), SRC)
    assert (weights[~mask] == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(len(LENGTHS)))
    energies = torch.stack([
        attn.v_a.weight[0] @ torch.tanh(attn.W_a.weight @ query[0] + attn.U_a.weight @ states[0, s])
        for s in range(SRC)
    ])
    torch.testing.assert_close(weights[0], torch.softmax(energies, 0))
