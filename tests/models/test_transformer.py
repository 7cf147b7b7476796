"""The Transformer honours the model contract: attention equals the formula written out,
incremental decoding equals the teacher-forced pass for every structural option, beam search
finds what exhaustive search finds, and the options refuse bad values in one line."""
from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch.nn import functional as F

from tests.generate_stubs import step_forward
from tests.helpers import make_dict

from nmtkit.data.dictionary import BOS_ID, EOS_ID, PAD_ID
from nmtkit.errors import NmtkitError
from nmtkit.generate.search import SearchOptions, beam_search
from nmtkit.generate.ensemble import EnsembleModel
from nmtkit.models import build_model, resolve_config
from nmtkit.models.multihead import MultiheadAttention, attend_with_weights
from nmtkit.models.transformer import sinusoids
from nmtkit.utils.amp import cpu_has_native_bf16

torch.set_num_threads(1)

#: Every structural option: post/pre-norm, tied embeddings, learned positions, gelu, alignment layer and heads.
VARIANTS = [
    {},
    {"normalize_before": True},
    {"share_all_embeddings": True},
    {"share_decoder_input_output_embed": True},
    {"learned_positions": True, "max_positions": 32},
    {"activation": "gelu", "normalize_before": True, "alignment_layer": 0, "alignment_heads": 1},
    {"encoder_layers": 1, "decoder_layers": 3, "alignment_layer": -1},
]


def tiny(vocab: int = 40, seed: int = 0, **overrides: object):  # noqa: ANN201
    torch.manual_seed(seed)
    name, cfg = resolve_config("transformer_test", overrides)
    d = make_dict(vocab - 4)
    return build_model(name, cfg, d, d)


def pad(seqs: list[list[int]]) -> torch.Tensor:
    out = torch.full((len(seqs), max(map(len, seqs))), PAD_ID, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s)
    return out


def batch(seed: int = 1, vocab: int = 40, src_lens=(7, 3, 5, 1), tgt_lens=(4, 6, 2, 5)):  # noqa: ANN001, ANN201
    gen = torch.Generator().manual_seed(seed)
    src = [torch.randint(4, vocab, (n,), generator=gen).tolist() + [EOS_ID] for n in src_lens]
    tgt = [torch.randint(4, vocab, (n,), generator=gen).tolist() + [EOS_ID] for n in tgt_lens]
    return pad(src), torch.tensor([len(s) for s in src]), pad([[BOS_ID] + t[:-1] for t in tgt]), pad(tgt)


def reference_attention(q, k, v, mask):  # noqa: ANN001, ANN201
    """softmax(QKᵀ/√d + mask) V, element by element."""
    scores = torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.exp(scores - scores.amax(-1, keepdim=True))
    w = w / w.sum(-1, keepdim=True)
    return torch.einsum("bhts,bhsd->bhtd", w, v), w


@pytest.mark.parametrize("causal", [False, True])
def test_multihead_attention_equals_the_formula_with_padding_and_causal_masks(causal: bool) -> None:
    torch.manual_seed(0)
    b, h, t, d = 3, 4, 5, 8
    q, k, v = (torch.randn(b, h, t, d) for _ in range(3))
    lengths = torch.tensor([5, 2, 4])
    key_mask = (torch.arange(t)[None, :] < lengths[:, None])[:, None, None, :]
    full = key_mask & torch.ones(t, t, dtype=torch.bool).tril() if causal else key_mask.expand(b, 1, t, t)
    want, want_w = reference_attention(q, k, v, full)
    mha = MultiheadAttention(h * d, h, 0.0, self_attention=True).eval()
    # the fused path (scaled_dot_product_attention) and the one that returns the weights
    got_w_out, got_w = attend_with_weights(q, k, v, full, 0.0, training=False)
    fused = F.scaled_dot_product_attention(q, k, v, attn_mask=full)
    torch.testing.assert_close(fused, want, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(got_w_out, want, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(got_w, want_w, atol=1e-6, rtol=1e-5)
    assert (got_w.masked_select(~full.expand_as(got_w)) == 0).all()
    # the module's own choice of path, the causal flag with and without a padding mask, gives the same
    out_fast, _ = mha.attend(q, k, v, key_mask, causal=causal)
    out_slow, w = mha.attend(q, k, v, key_mask, causal=causal, need_weights=True)
    torch.testing.assert_close(out_fast, out_slow, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(w, want_w, atol=1e-6, rtol=1e-5)
    full_rows = (lengths == t).nonzero().squeeze(1)  # no padding: the kernel's own causal mask
    out_kernel, _ = mha.attend(q[full_rows], k[full_rows], v[full_rows], None, causal=causal)
    torch.testing.assert_close(out_kernel, out_fast[full_rows], atol=1e-6, rtol=1e-5)


def test_attention_check_can_fail() -> None:
    """The reference above notices a wrong scale (so the equalities mean something)."""
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 2, 3, 4) for _ in range(3))
    mask = torch.ones(1, 1, 3, 3, dtype=torch.bool)
    want, _ = reference_attention(q, k, v, mask)
    assert not torch.allclose(F.scaled_dot_product_attention(q * 2, k, v, attn_mask=mask), want, atol=1e-4)


def test_sinusoids_are_section_3_5s_geometric_wavelengths_from_2pi_to_10000_2pi() -> None:
    """Section 3.5's prose: each channel pair is a sin and a cos of one wavelength, and the
    wavelengths form a geometric progression from 2π to 10000·2π.  Its formula, 10000^(2i/d), stops
    one step short of 10000·2π; the code takes the prose's end points, as tensor2tensor (the
    authors' code) and fairseq do, with sin on the first half of the channels and cos on the
    second.  Written out per channel with scalar math, independently of the code's vector form."""
    dim, half = 16, 8
    pe = sinusoids(torch.arange(50), dim)
    wavelengths = [2 * math.pi * 10000.0 ** (c / (half - 1)) for c in range(half)]
    assert math.isclose(wavelengths[0], 2 * math.pi) and math.isclose(wavelengths[-1], 10000 * 2 * math.pi)
    ratios = {round(b / a, 9) for a, b in zip(wavelengths, wavelengths[1:])}
    assert len(ratios) == 1  # geometric
    for pos in (0, 1, 7, 49):
        for c in range(half):
            assert math.isclose(pe[pos, c].item(), math.sin(2 * math.pi * pos / wavelengths[c]), abs_tol=1e-5)
            assert math.isclose(pe[pos, half + c].item(), math.cos(2 * math.pi * pos / wavelengths[c]), abs_tol=1e-5)
    assert sinusoids(torch.arange(3), 7).shape == (3, 7) and sinusoids(torch.arange(3), 7)[:, -1].abs().sum() == 0


@pytest.mark.parametrize("opts", VARIANTS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_incremental_decoding_equals_the_teacher_forced_pass(opts: dict) -> None:
    model = tiny(**opts).eval()
    src, lengths, prev, _ = batch()
    with torch.no_grad():
        logits, attn = model(src, lengths, prev)
        step_lp, step_attn = step_forward(model, src, lengths, prev)
    torch.testing.assert_close(torch.log_softmax(logits, -1), step_lp, atol=1e-5, rtol=1e-5)
    assert attn.shape == (4, prev.size(1), src.size(1))
    torch.testing.assert_close(attn, step_attn, atol=1e-6, rtol=1e-5)
    assert (attn.masked_select(src.eq(PAD_ID)[:, None, :].expand_as(attn)) == 0).all()
    torch.testing.assert_close(attn.sum(-1), torch.ones(attn.shape[:2]))


@pytest.mark.parametrize("opts", VARIANTS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_incremental_decoding_matches_to_ulps_with_the_written_out_attention(opts: dict, monkeypatch) -> None:  # noqa: ANN001
    """The test above allows 1e-5: the fused attention kernel blocks one query differently from a
    sentence of them (a few ulps of float32).  With the written-out product in its place, the
    incremental pass and the teacher-forced one agree to a few ulps (rtol 1e-6), where an error of
    the cache, the positions or the masks moves them by orders of magnitude more.  They are the
    same to the bit where the BLAS computes a row alike whatever the number of rows (oneDNN on the
    AMD hosts); MKL on an Intel Xeon (AVX-512, AMX) blocks them differently, about 3 ulps."""
    import nmtkit.models.multihead as multihead

    def written_out(q, k, v, mask, dropout_p, is_causal):  # noqa: ANN001, ANN202
        if is_causal:
            mask = torch.ones(q.size(2), k.size(2), dtype=torch.bool).tril(k.size(2) - q.size(2))
        return attend_with_weights(q, k, v, mask, dropout_p, False)[0]

    monkeypatch.setattr(multihead, "fused_attention", written_out)
    model = tiny(**opts).eval()
    src, lengths, prev, _ = batch()
    with torch.no_grad():
        logits, attn = model(src, lengths, prev)
        step_lp, step_attn = step_forward(model, src, lengths, prev)
    torch.testing.assert_close(step_lp, torch.log_softmax(logits, -1), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(step_attn, attn, rtol=1e-6, atol=1e-7)


def test_several_steps_after_a_cache_stay_causal() -> None:
    """Decoding T > 1 steps onto a cache masks the later of them from the earlier (the mask is
    aligned to the newest keys), as the teacher-forced pass does."""
    model = tiny().eval()
    src, lengths, prev, _ = batch()
    with torch.no_grad():
        logits, _ = model(src, lengths, prev)
        enc = model.encode(src, lengths)
        state = model.init_decoder_state(enc)
        lp, _, state = model.decode_step(prev[:, 0], state, enc)
        x = model._embed(prev[:, 1:], 1, model.tgt_embed, model.tgt_positions)
        rest, _, _ = model._decode(x, enc, state, need_weights=False)
        rest = model.project_output(rest)
    torch.testing.assert_close(lp, torch.log_softmax(logits[:, 0].float(), -1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rest, logits[:, 1:], atol=1e-5, rtol=1e-5)


def test_reorders_wait_for_the_next_step_and_compose() -> None:
    """Two reorders in a row, applied by the next step, give that step's outputs for the
    composed order; and a state stays valid after the step that read it (the step writes a new
    buffer, never the cache it was given)."""
    model = tiny().eval()
    src, lengths, prev, _ = batch()
    first, second = torch.tensor([2, 0, 3, 3]), torch.tensor([1, 3, 0, 2])
    both = first.index_select(0, second)
    with torch.no_grad():
        enc = model.encode(src, lengths)
        _, _, state = model.decode_step(prev[:, 0], model.init_decoder_state(enc), enc)
        lp1, _, _ = model.decode_step(prev[:, 1], state, enc)
        cache_before = [t.clone() for t in state.values()]
        twice = model.reorder_decoder_state(model.reorder_decoder_state(state, first), second)
        lp_r, _, after = model.decode_step(prev[:, 1].index_select(0, both), twice, enc.reorder(both))
        again, _, _ = model.decode_step(prev[:, 1], state, enc)
    torch.testing.assert_close(lp_r, lp1.index_select(0, both), atol=1e-6, rtol=0)
    assert all(torch.equal(a, b) for a, b in zip(cache_before, state.values()))
    assert torch.equal(again, lp1)
    assert after["k0"].shape[:2] == (2, 4) and "rows" not in after  # the step applied the reorder


def test_a_reordered_state_still_carries_gradients() -> None:
    """With autograd on (decoding step by step in training), a reorder applied by the next step
    is differentiable: the gradient reaches the first step's keys through it."""
    model = tiny()
    src, lengths, prev, _ = batch()
    enc = model.encode(src, lengths)
    _, _, state = model.decode_step(prev[:, 0], model.init_decoder_state(enc), enc)
    order = torch.tensor([3, 3, 0, 1])
    lp, _, _ = model.decode_step(prev[:, 1].index_select(0, order), model.reorder_decoder_state(state, order),
                                 enc.reorder(order))
    lp[:, 5].sum().backward()
    grad = model.decoder_layers[0].self_attn.in_proj.weight.grad
    assert grad is not None and grad.abs().sum() > 0


def test_keys_and_values_kept_across_steps_are_stored_as_cpu_attention_reads_them() -> None:
    """Under CPU bf16 autocast, attention runs in float32: the encoder's keys and values and the
    decoder's cache are kept in float32 (cast once, not at every step), and the step's output is
    what it was with bf16 storage (a bf16 value is exact in float32)."""
    if not cpu_has_native_bf16():
        pytest.skip("bf16 autocast is refused on CPUs without native bf16")
    model = tiny().eval()
    src, lengths, prev, _ = batch()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        enc = model.encode(src, lengths)
        lp, _, state = model.decode_step(prev[:, 0], model.init_decoder_state(enc), enc)
        lp2, _, state = model.decode_step(prev[:, 1], state, enc)
        forced, _ = model(src, lengths, prev[:, :2], need_attention=False)
    assert enc.extra["k0"].dtype == enc.extra["v0"].dtype == state["k0"].dtype == state["v1"].dtype == torch.float32
    torch.testing.assert_close(torch.stack([lp, lp2], 1), torch.log_softmax(forced.float(), -1), atol=0.05, rtol=0)


def test_the_default_alignment_layer_of_a_one_layer_decoder_is_its_only_layer() -> None:
    model = tiny(decoder_layers=1)
    assert model.align_index == 0
    with pytest.raises(NmtkitError, match="alignment_layer must be in"):
        tiny(decoder_layers=1, alignment_layer=-3)
    with pytest.raises(NmtkitError, match="alignment_layer must be in"):
        tiny(decoder_layers=2, alignment_layer=-3)


def test_padding_and_batch_company_change_nothing() -> None:
    model = tiny().eval()
    src, lengths, prev, _ = batch(src_lens=(9, 4), tgt_lens=(8, 3))
    with torch.no_grad():
        both, attn_both = model(src, lengths, prev)
        one, attn_one = model(src[1:, :5], lengths[1:], prev[1:, :4])
    torch.testing.assert_close(both[1, :4], one[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(attn_both[1, :4, :5], attn_one[0], atol=1e-6, rtol=1e-5)
    assert (attn_both[1, :, 5:] == 0).all()


def _exhaustive_best(model, src_ids: list[int], words: list[int], max_tokens: int) -> tuple[float, list[int]]:  # noqa: ANN001
    """The highest-scoring ``w_1 .. w_k </s>`` with ``k + 1 <= max_tokens``, by scoring every one."""
    src = torch.tensor([src_ids])
    lengths = torch.tensor([len(src_ids)])
    best: tuple[float, list[int]] = (-math.inf, [])
    with torch.no_grad():
        for k in range(max_tokens):
            for ws in itertools.product(words, repeat=k):
                seq = list(ws) + [EOS_ID]
                logits, _ = model(src, lengths, torch.tensor([[BOS_ID] + seq[:-1]]))
                score = float(torch.log_softmax(logits.float(), -1)[0, torch.arange(len(seq)), torch.tensor(seq)].sum())
                best = max(best, (score, seq))
    return best


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_search_finds_what_exhaustive_search_finds(seed: int) -> None:
    """With a beam as wide as every prefix, beam search is exhaustive: the same best sequence
    and score (length penalty 0: the plain sum of log-probabilities)."""
    model = tiny(vocab=7, seed=seed).eval()
    words = [3, 4, 5, 6]  # <unk> and three words; never <pad> or <s>
    src = [4, 5, 6, EOS_ID]
    max_tokens = 3
    score, seq = _exhaustive_best(model, src, words, max_tokens)
    opts = SearchOptions(beam=len(words) ** (max_tokens - 1), nbest=1, max_len_a=0.0, max_len_b=max_tokens - 1,
                         min_len=0, lenpen=0.0)
    with torch.no_grad():
        hyp = beam_search(EnsembleModel([model]), torch.tensor([src]), torch.tensor([len(src)]), opts)[0][0]
    assert list(hyp.tokens) + [EOS_ID] == seq or list(hyp.tokens) == seq
    assert hyp.score == pytest.approx(score, abs=1e-4)


def test_xavier_init_and_zero_padding_rows() -> None:
    model = tiny()
    fc = model.encoder_layers[0].ffn.fc1
    bound = math.sqrt(6.0 / (fc.in_features + fc.out_features))
    assert fc.weight.abs().max() <= bound and (fc.bias == 0).all()
    for m in model.modules():
        if isinstance(m, torch.nn.Embedding) and m.padding_idx is not None:
            assert (m.weight[PAD_ID] == 0).all()


def test_attention_and_output_layers_start_as_fairseqs() -> None:
    """fairseq: q, k and v projections Xavier with gain 1/sqrt(2) each (bound sqrt(1.5/d)), fused
    or not; an untied output layer N(0, d^-1/2)."""
    model = tiny(vocab=400, embed_dim=64)
    bound = math.sqrt(1.5 / 64)
    layer = model.decoder_layers[0]
    for proj in (layer.self_attn.in_proj, layer.cross_attn.q_proj, layer.cross_attn.kv_proj):
        assert bound * 0.98 < proj.weight.abs().max() <= bound
    std = float(model.output_projection.weight.detach().std())
    assert abs(std - 64 ** -0.5) < 0.01
    tied = tiny(vocab=400, embed_dim=64, share_all_embeddings=True)
    assert tied.output_projection.weight is tied.tgt_embed.weight and (tied.tgt_embed.weight[PAD_ID] == 0).all()


@pytest.mark.parametrize("opts,message", [
    ({"embed_dim": 30, "heads": 4}, "embed_dim (30) must be divisible by heads (4)"),
    ({"alignment_layer": 2}, "alignment_layer must be in [-2, 1]"),
    ({"alignment_heads": 5}, "alignment_heads must be in [0, heads=4]"),
    ({"attention_dropout": 1.0}, "attention_dropout must be in [0, 1)"),
    ({"activation": "tanh"}, "activation"),
])
def test_bad_options_are_one_line_errors(opts: dict, message: str) -> None:
    with pytest.raises(NmtkitError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
        resolve_config("transformer_test", opts)


def test_learned_positions_refuse_longer_sentences_in_one_line() -> None:
    model = tiny(learned_positions=True, max_positions=4).eval()
    assert model.max_source_len() == 3
    src, lengths, prev, _ = batch(src_lens=(6,), tgt_lens=(2,))
    with pytest.raises(NmtkitError, match="max_positions 4"):
        model(src, lengths, prev)


def test_presets_have_the_papers_shapes() -> None:
    d = make_dict(100)
    base = build_model(*resolve_config("transformer_base"), d, d)
    # Table 3: 65M parameters with a 37K vocabulary; here without the embeddings and output layer
    body = sum(p.numel() for n, p in base.named_parameters() if "embed" not in n and "output_projection" not in n)
    assert 44_000_000 < body < 45_000_000
    _, big = resolve_config("transformer_big")
    assert (big.embed_dim, big.ffn_dim, big.heads, big.dropout) == (1024, 4096, 16, 0.3)
    _, wu = resolve_config("transformer_tiny")
    assert (wu.embed_dim, wu.ffn_dim, wu.heads, wu.encoder_layers, wu.share_all_embeddings) == (128, 256, 4, 4, True)


def _train(data_dir, save, *extra: str) -> None:  # noqa: ANN001
    from click.testing import CliRunner

    from nmtkit.cli.train import command as train

    args = [str(data_dir), "--arch", "transformer_test", "--save-dir", str(save), "--batch-size", "4", "--max-epoch", "5",
            "--warmup-updates", "5", "--lr", "0.003", "--label-smoothing", "0.1", "--dropout", "0.1",
            "--attention-dropout", "0.1", "--no-progress", "--threads", "1", *extra]
    res = CliRunner().invoke(train, args)
    assert res.exit_code == 0, res.output


def test_sentences_longer_than_the_learned_positions_are_refused_before_training(data_dir, tmp_path) -> None:  # noqa: ANN001
    """One line naming the split and the option at start-up, not a failure at the batch that holds
    the sentence (for the validation split: after a whole epoch)."""
    from click.testing import CliRunner

    from nmtkit.cli.train import command as train

    res = CliRunner().invoke(train, [str(data_dir), "--arch", "transformer_test", "--save-dir", str(tmp_path / "ck"),
                                     "--learned-positions", "--max-positions", "3", "--no-progress", "--max-epoch", "1"])
    assert res.exit_code != 0
    assert "split 'train' has a source sentence of" in res.output and "--max-positions" in res.output
    assert not (tmp_path / "ck" / "checkpoint_last.pt").exists()


def test_resume_is_bit_exact(data_dir, tmp_path) -> None:  # noqa: ANN001
    """Stopping after 3 updates (mid-epoch, mid-warm-up) and resuming gives the weights, optimizer
    state and lr of an uninterrupted run exactly (dropout's RNG state included)."""
    from nmtkit.checkpoint import load_checkpoint

    _train(data_dir, tmp_path / "straight")
    _train(data_dir, tmp_path / "split", "--max-update", "3")
    _train(data_dir, tmp_path / "split")
    a = load_checkpoint(tmp_path / "straight" / "checkpoint_last.pt")
    b = load_checkpoint(tmp_path / "split" / "checkpoint_last.pt")
    assert a["train_state"]["state"]["update"] == b["train_state"]["state"]["update"] > 3
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key
    _assert_same(a["train_state"]["optimizer"], b["train_state"]["optimizer"], "optimizer")  # Adam's moments, step, lr
    _assert_same(a["train_state"]["schedule"], b["train_state"]["schedule"], "schedule")
    assert a["train_state"]["optimizer"]["param_groups"][0]["lr"] > 0


def _assert_same(a: object, b: object, where: str) -> None:
    """Nested dicts/lists of tensors and plain values, equal bit for bit."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            _assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _trained(data_dir, tmp_path):  # noqa: ANN001, ANN202
    from nmtkit.generate.bundle import load_ensemble

    _train(data_dir, tmp_path / "ck")
    model, _ = load_ensemble([str(tmp_path / "ck" / "checkpoint_last.pt")], torch.device("cpu"))
    return model.models[0].eval()


#: 16 sentences of 1-8 source and target words (88 real target positions with their </s>): enough
#: that the share of positions whose argmax moves is a stable figure, not one or two near-ties of a
#: barely trained model (4 sentences, pads included, failed on a re-trained model with 2 of 28 moved)
_WIDE = dict(src_lens=tuple(1 + k % 8 for k in range(16)), tgt_lens=tuple(1 + (3 * k) % 8 for k in range(16)))


def _teacher_forced_log_probs(model) -> torch.Tensor:  # noqa: ANN001
    """Log-probabilities ``[positions, V]`` of the real target positions of a fixed batch."""
    vocab = min(len(model.src_dict), len(model.tgt_dict))
    src, lengths, prev, target = batch(seed=3, vocab=vocab, **_WIDE)
    with torch.no_grad():
        logits, _ = model(src, lengths, prev)
    return torch.log_softmax(logits.float(), -1)[target != PAD_ID]


def test_bf16_and_int8_stay_within_their_tolerances_of_float32(data_dir, tmp_path) -> None:  # noqa: ANN001
    """Stated tolerances, on a model trained a few updates: bf16 autocast within 0.15 nats of
    float32 in every log-probability, int8 (dynamic, torch's kernels) within 0.15 too, and the
    argmax of at least 95 % of the positions unchanged.  bf16 is checked on every CPU: without
    native bf16 units torch still rounds to bf16 (only slower)."""
    from nmtkit.generate.quantize import quantize_model

    model = _trained(data_dir, tmp_path)
    ref = _teacher_forced_log_probs(model)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bf16 = _teacher_forced_log_probs(model)
    assert (bf16 - ref).abs().max() < 0.15
    assert (bf16.argmax(-1) == ref.argmax(-1)).float().mean() >= 0.95
    assert (bf16 - ref).abs().max() > 0  # autocast ran: bf16 rounding changes the log-probabilities
    int8 = _teacher_forced_log_probs(quantize_model(model))
    assert (int8 - ref).abs().max() < 0.15
    assert (int8.argmax(-1) == ref.argmax(-1)).float().mean() >= 0.95


@pytest.mark.parametrize("arch", ["luong_tiny", "rnnsearch_tiny", "rnnencdec_tiny"])
def test_recurrent_encoders_take_the_lectures_soft_match_beside_each_embedding(arch: str) -> None:
    """encoder_self_attention: the encoder's input is [x_i; sum_j softmax(h_i.h_j / sqrt(d)) x_j], h the
    states of a one-layer RNN over the embeddings (the slide's "source hidden states"); the model
    contract (incremental = teacher-forced) still holds."""
    import copy

    from nmtkit.generate.quantize import quantize_model
    from nmtkit.models.encoders import reversal_index, run_rnn, soft_match

    torch.manual_seed(0)
    name, cfg = resolve_config(arch, {"encoder_self_attention": True, "source_reversal": True})
    d = make_dict(36)
    model = build_model(name, cfg, d, d).eval()
    enc = model.encoder
    assert enc.rnn.input_size == 2 * cfg.embed_dim and enc.match_rnn.input_size == cfg.embed_dim
    assert enc.match_rnn.num_layers == 1 and enc.match_rnn.bidirectional == enc.rnn.bidirectional
    src, lengths, prev, _ = batch()
    with torch.no_grad():
        logits, _ = model(src, lengths, prev)
        steps, _ = step_forward(model, src, lengths, prev)
        # the match states: the one-layer RNN over the (reversed) embeddings of the real positions only,
        # as PyTorch's own RNN computes them on the sentence alone
        n = int(lengths[1])  # a padded row
        real = src[1:2, :n].gather(1, reversal_index(lengths[1:2], n))
        want_h, _ = enc.match_rnn(enc.embed(real))
        got_h, _, _ = run_rnn(enc.match_rnn, enc.embed(src[1:2].gather(1, reversal_index(lengths[1:2], src.size(1)))),
                              lengths[1:2])
    assert n < src.size(1)
    torch.testing.assert_close(got_h[:, :n], want_h, atol=1e-5, rtol=1e-5)
    assert got_h[:, n:].abs().max() == 0  # padding is never read
    torch.testing.assert_close(torch.log_softmax(logits, -1), steps, atol=1e-5, rtol=1e-5)
    int8 = quantize_model(copy.deepcopy(model))  # the match RNN becomes int8 products like the encoder's
    assert type(int8.encoder.match_rnn) is not type(enc.match_rnn)
    with torch.no_grad():  # int8 models search: their steps, as translation runs them
        q_steps, _ = step_forward(int8, src, lengths, prev)
    assert (q_steps - steps).abs().max() < 0.15
    h, x = torch.randn(2, 4, 5), torch.randn(2, 4, 3)
    mask = torch.tensor([[True] * 4, [True, True, False, False]])
    want = torch.stack([torch.softmax(h[1, :2] @ h[1, i] / 5 ** 0.5, 0) @ x[1, :2] for i in range(4)])
    torch.testing.assert_close(soft_match(h, x, mask)[1], want)
    assert not torch.allclose(soft_match(h, x, mask)[1], soft_match(x, x, mask)[1])  # h scores, x is averaged


def test_the_alignment_layer_and_heads_can_be_chosen_at_load_time(tmp_path) -> None:  # noqa: ANN001
    """fairseq's --alignment-layer/--alignment-heads: the bundle's Transformer reports the chosen
    layer's heads; a bad choice and a model with one attention are one-line refusals."""
    from nmtkit.generate.bundle import ModelBundle
    from tests.helpers import make_checkpoint

    ckpt = make_checkpoint(tmp_path / "t.pt", "transformer_test", seed=2, init="uniform", init_scale=0.5)
    src = torch.tensor([[5, 6, 7, EOS_ID]])
    prev = torch.tensor([[BOS_ID, 8, 9]])
    attn = {}
    for layer, heads in ((None, None), (1, None), (1, 1)):  # trained with the penultimate layer: 0 of 2
        bundle = ModelBundle.load(str(ckpt), device="cpu", alignment_layer=layer, alignment_heads=heads)
        model = bundle.model.members[0].eval()
        with torch.no_grad():
            attn[layer, heads] = model(src, torch.tensor([4]), prev)[1]
    assert not torch.allclose(attn[None, None], attn[1, None])
    assert not torch.allclose(attn[1, None], attn[1, 1])
    with pytest.raises(NmtkitError, match=r"alignment_layer must be in \[-2, 1\]"):
        ModelBundle.load(str(ckpt), device="cpu", alignment_layer=2)
    luong = make_checkpoint(tmp_path / "l.pt", "luong_tiny", seed=2)
    with pytest.raises(NmtkitError, match="luong has one attention to read"):
        ModelBundle.load(str(luong), device="cpu", alignment_heads=1)
    # an ensemble of both: the choice is the Transformer's, the Luong model reports its one attention
    mixed = ModelBundle.load(f"{ckpt}:{luong}", device="cpu", alignment_layer=1)
    assert [getattr(m, "align_index", None) for m in mixed.model.members] == [1, None]
    with pytest.raises(NmtkitError, match=r"alignment_layer must be in \[-2, 1\]"):
        ModelBundle.load(f"{luong}:{ckpt}", device="cpu", alignment_layer=5)


def test_learned_positions_bound_the_search_instead_of_failing_mid_translation(tmp_path) -> None:  # noqa: ANN001
    """With --learned-positions the search forces </s> where the table ends (max_positions - 1
    output tokens), whatever --max-len-b asks, instead of stopping the run with an error."""
    from nmtkit.generate.translator import Translator
    from tests.helpers import make_checkpoint

    for positions in (4, 6):
        ckpt = make_checkpoint(tmp_path / f"lp{positions}.pt", "transformer_test", seed=1, learned_positions=True,
                               max_positions=positions, init="uniform", init_scale=0.5)
        translator = Translator.from_checkpoint(str(ckpt), beam=3, device="cpu", max_len_a=0, max_len_b=50)
        out = translator.translate(["the cat sits .", "a dog sees the man ."])
        assert len(out) == 2 and all(len(line.split()) <= positions - 1 for line in out), out



def test_a_source_bound_above_the_learned_positions_truncates_instead_of_failing(tmp_path) -> None:  # noqa: ANN001
    """--max-source-len above what the position table holds: the model's bound wins (the input is
    truncated with a warning), not an error at the first long line."""
    from nmtkit.generate.translator import Translator
    from tests.helpers import make_checkpoint

    ckpt = make_checkpoint(tmp_path / "lp.pt", "transformer_test", seed=1, learned_positions=True, max_positions=5,
                           init="uniform", init_scale=0.5)
    translator = Translator.from_checkpoint(str(ckpt), beam=2, device="cpu", max_source_len=100)
    assert translator.max_source_len == 4
    assert len(translator.translate(["the cat sits on the mat with a dog and a man ."])) == 1


def test_uniform_init_keeps_layer_norm_at_one_and_zero() -> None:
    """--init uniform draws the weights from U(-x, x) but not LayerNorm: gains near 0 would
    scale each sub-layer's output towards nothing."""
    model = tiny(init="uniform", init_scale=0.05, normalize_before=True)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert norms
    for m in norms:
        assert torch.equal(m.weight, torch.ones_like(m.weight)) and torch.equal(m.bias, torch.zeros_like(m.bias))
    in_norms = {id(p) for m in norms for p in m.parameters()}
    others = [p for p in model.parameters() if id(p) not in in_norms]
    assert all(p.abs().max() <= 0.05 for p in others) and any(p.abs().max() > 0.04 for p in others)


def test_full_context_alignment_sees_the_later_words_and_leaves_the_translation_alone() -> None:
    """Garg et al.'s full target context: the attention at position 0 moves when a later word
    changes (the causal one does not), the logits are the causal pass's, and padding added
    after the target changes nothing (the pass masks the padded keys)."""
    causal = tiny().eval()
    full = tiny(full_context_alignment=True).eval()
    full.load_state_dict(causal.state_dict())
    src, lengths, prev, _ = batch()
    changed = prev.clone()
    changed[1, 5] = 4 if int(prev[1, 5]) != 4 else 5  # row 1 is the longest target: position 5 is a word
    padded = torch.cat([prev, torch.full((prev.size(0), 2), PAD_ID, dtype=torch.long)], dim=1)
    with torch.no_grad():
        logits, attn_causal = causal(src, lengths, prev)
        logits_full, attn = full(src, lengths, prev)
        _, attn_changed = full(src, lengths, changed)
        _, causal_changed = causal(src, lengths, changed)
        _, attn_padded = full(src, lengths, padded)
    torch.testing.assert_close(logits_full, logits, atol=1e-5, rtol=1e-5)  # its alignment layer: the fused kernel
    torch.testing.assert_close(causal_changed[1, 0], attn_causal[1, 0], atol=1e-6, rtol=1e-5)
    assert (attn_changed[1, 0] - attn[1, 0]).abs().max() > 1e-4
    real = prev.ne(PAD_ID)
    torch.testing.assert_close(attn_padded[:, : prev.size(1)][real], attn[real], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(attn.sum(-1), torch.ones(attn.shape[:2]))
    assert (attn.masked_select(src.eq(PAD_ID)[:, None, :].expand_as(attn)) == 0).all()


@pytest.mark.parametrize("full_context", [False, True])
def test_a_caller_that_reads_no_attention_spares_the_alignment_layer(full_context: bool, monkeypatch) -> None:  # noqa: ANN001
    """``need_attention=False`` (training without a guided loss, validation, perplexity): the same
    logits, no attention, and neither the written-out alignment layer nor the full-context pass runs."""
    model = tiny(full_context_alignment=full_context).eval()
    src, lengths, prev, _ = batch()
    with torch.no_grad():
        logits, attn = model(src, lengths, prev)
    assert attn is not None

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the attention was computed although no caller reads it")

    monkeypatch.setattr("nmtkit.models.multihead.attend_with_weights", refuse)
    monkeypatch.setattr(type(model), "_full_context_alignment", refuse)
    with torch.no_grad():
        spared, none = model(src, lengths, prev, need_attention=False)
    assert none is None
    torch.testing.assert_close(spared, logits, atol=1e-5, rtol=1e-5)  # fused kernel against the written-out product


def test_a_search_that_keeps_no_attention_spares_the_alignment_layer(monkeypatch) -> None:  # noqa: ANN001
    """Translation without alignments or ``--replace-unk``: the search asks each step for no
    attention, and the Transformer's alignment layer runs the fused kernel; the hypotheses are
    the same."""
    model = EnsembleModel([tiny().eval()])
    src, lengths, _, _ = batch()
    o = SearchOptions(beam=3, nbest=3, max_len_a=0.0, max_len_b=6)
    with torch.no_grad():
        kept = beam_search(model, src, lengths, o, return_attention=True)
        monkeypatch.setattr("nmtkit.models.multihead.attend_with_weights", lambda *a, **k: (_ for _ in ()).throw(
            AssertionError("attention computed for a search that keeps none")))
        spared = beam_search(model, src, lengths, o, return_attention=False)
    for a, b in zip(kept, spared):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert all(h.attention is None for h in b) and all(h.attention is not None for h in a)
        for ha, hb in zip(a, b):
            assert abs(ha.score - hb.score) < 1e-4
