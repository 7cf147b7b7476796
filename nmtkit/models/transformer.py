"""The Transformer (Vaswani et al. 2017): self-attention encoder and decoder stacks.

* Multi-head attention runs through :func:`torch.nn.functional.scaled_dot_product_attention`
  (fused kernels on CPU and GPU), except in the one decoder layer whose cross-attention is read
  as alignment (``alignment_layer``): there the weights are needed, so that layer writes the same
  product out (:func:`attend_with_weights`).
* Post-norm (``LayerNorm(x + sublayer(x))``, the paper's) is the default, because it is what the
  paper and fairseq's ``transformer`` train, so the presets and the comparisons with fairseq
  are the same model; ``normalize_before`` gives pre-norm (``x + sublayer(LayerNorm(x))`` and a
  final LayerNorm), which trains deeper stacks and higher learning rates without diverging.
* Embeddings are scaled by ``sqrt(embed_dim)`` and added to sinusoidal positions (section 3.5)
  or, with ``learned_positions``, to a learned table of ``max_positions`` rows.
* Dropout on the sum of embeddings and positions and on every sublayer's output before the
  residual (``dropout``, the paper's ``P_drop``), on attention weights (``attention_dropout``) and
  after the feed-forward activation (``activation_dropout``); on CPU the masks come from
  :mod:`nmtkit.models.dropout` (the same distribution, several times cheaper to draw).
* Incremental decoding (:meth:`TransformerModel.decode_step`): the decoder state holds each
  layer's self-attention keys and values of the steps so far, time first (``[t, N, heads,
  d_head]``), and the beam's pending reorder (``rows``).  :meth:`reorder_decoder_state` only
  composes ``rows``; the next step copies the kept rows into a buffer one step longer and writes
  its own keys after them, one copy of the cache per step where a reorder and a concatenation
  would make two (time first, so that the first ``t`` steps of the buffer are one contiguous
  block that ``index_select`` writes into).  The encoder's keys and values for cross-attention
  are computed once per sentence in :meth:`encode`.  ``g`` hypotheses of one sentence attend to
  that sentence's keys together (``shares_encoder_rows``).
* The attention the model reports (translation alignments, ``--replace-unk``, ``nmtkit-align``,
  the guided-alignment loss) is the cross-attention of ``alignment_layer``, averaged over its
  first ``alignment_heads`` heads (0: all), as in Garg et al. (2019).  With
  ``full_context_alignment`` the teacher-forced pass (guided training, ``nmtkit-align``) reads it
  from a second pass of the layers up to it without the causal mask, so the attention that
  predicts y_i also knows y_i (their section 4.2; fairseq's ``--full-context-alignment``);
  translation, which does not know the words yet, reads the causal attention.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar, Optional, cast

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from nmtkit.data.dictionary import PAD_ID
from nmtkit.errors import NmtkitError
from nmtkit.models.base import DecoderState, EncoderOutput, Seq2SeqModel, log_probs, rows_per_sentence
from nmtkit.models.dropout import Dropout
from nmtkit.models.common import MAX_INIT_SCALE, MAX_MODEL_INT, lengths_to_mask, option, tie_embeddings
from nmtkit.utils.checks import require, require_at_least, require_at_most, require_choice
from nmtkit.models.gemm import Linear
from nmtkit.models.multihead import MultiheadAttention, attention_dtype, split_heads
from nmtkit.models.registry import register_model

ACTIVATIONS = ("relu", "gelu")
TRANSFORMER_INITS = ("xavier", "uniform")
#: The default: the penultimate layer, where Garg et al. (2019) read and supervise it; chosen on the
#: Hansards dev set too (guided, full context: 0.138 AER intersect against the last layer's 0.151).
ALIGNMENT_LAYER = -2


@dataclass
class TransformerConfig:
    """Options of the ``transformer`` model (the defaults are the paper's base model)."""

    embed_dim: int = option(512, "Model width d_model: embeddings, attention and every residual stream.")
    ffn_dim: int = option(2048, "Inner size d_ff of the position-wise feed-forward layers.")
    heads: int = option(8, "Attention heads h (embed_dim must be divisible by it).")
    encoder_layers: int = option(6, "Encoder layers N.")
    decoder_layers: int = option(6, "Decoder layers N.")
    dropout: float = option(0.1, "Dropout rate in [0, 1).")
    attention_dropout: float = option(0.0, "Dropout on the attention weights.")
    activation_dropout: float = option(0.0, "Dropout after the feed-forward activation.")
    activation: str = option("relu", "Feed-forward activation.", choices=ACTIVATIONS)
    normalize_before: bool = option(False, "Pre-norm (LayerNorm before each sublayer, and a final one); "
                                    "default post-norm as in the paper.")
    learned_positions: bool = option(False, "Learned position embeddings instead of the sinusoids.")
    max_positions: int = option(1024, "Longest sentence (pieces) with --learned-positions.")
    share_decoder_input_output_embed: bool = option(False, "Tie the output layer to the target embeddings "
                                                    "(Press & Wolf 2017).")
    share_all_embeddings: bool = option(False, "One embedding matrix for source, target and output "
                                        "(joined dictionary).")
    alignment_layer: int = option(ALIGNMENT_LAYER, "Decoder layer whose cross-attention is the alignment (negative: from the "
                                  "top; -2 is the penultimate layer, as Garg et al. 2019).")
    alignment_heads: int = option(0, "Average the alignment layer's first N heads (0: all heads).")
    full_context_alignment: bool = option(False, "Teacher-forced passes (guided training, nmtkit-align) read the alignment "
                                          "from a pass without the causal mask, which sees the whole target (Garg et al. 2019).")
    init: str = option("xavier", "xavier: Xavier-uniform weights, N(0, d^-1/2) embeddings, zero biases "
                       "(fairseq's scheme); uniform: U(-init_scale, init_scale), LayerNorm at (1, 0).", choices=TRANSFORMER_INITS)
    init_scale: float = option(0.1, "Uniform init range [-x, x] with --init uniform.")

    def validate(self) -> None:
        for name in ("embed_dim", "ffn_dim", "heads", "encoder_layers", "decoder_layers", "max_positions"):
            require_at_least(name, getattr(self, name), 1)
            require_at_most(name, getattr(self, name), MAX_MODEL_INT)
        require(self.embed_dim % self.heads == 0,
                f"embed_dim ({self.embed_dim}) must be divisible by heads ({self.heads})")
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            value = getattr(self, name)
            require(0.0 <= value < 1.0, f"{name} must be in [0, 1), got {value}")
        require_choice("activation", self.activation, ACTIVATIONS)
        require_choice("init", self.init, TRANSFORMER_INITS)
        require(-self.decoder_layers <= self.alignment_layer < self.decoder_layers  # the default: a single layer's own
                or (self.alignment_layer == ALIGNMENT_LAYER and self.decoder_layers == 1),
                f"alignment_layer must be in [-{self.decoder_layers}, {self.decoder_layers - 1}] "
                f"for {self.decoder_layers} decoder layers, got {self.alignment_layer}")
        require(0 <= self.alignment_heads <= self.heads,
                f"alignment_heads must be in [0, heads={self.heads}], got {self.alignment_heads}")
        require_at_least("init_scale", self.init_scale, 0)
        require_at_most("init_scale", self.init_scale, MAX_INIT_SCALE)

    def alignment_layer_index(self) -> int:
        """``alignment_layer`` as an index from the bottom (the default's on one layer: 0)."""
        return max(self.alignment_layer, -self.decoder_layers) % self.decoder_layers


def sinusoids(positions: Tensor, dim: int) -> Tensor:
    """Section 3.5's encoding of ``positions`` ``[...]`` -> ``[..., dim]``: sin on the first half
    of the channels and cos on the second (fairseq's layout), wavelengths 2π .. 10000·2π."""
    half = dim // 2
    scale = math.log(10000.0) / max(half - 1, 1)
    freqs = torch.exp(torch.arange(half, dtype=torch.float32, device=positions.device) * -scale)
    angles = positions.float().unsqueeze(-1) * freqs
    out = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)
    return F.pad(out, (0, dim - 2 * half)) if dim % 2 else out


class FeedForward(nn.Module):
    def __init__(self, dim: int, ffn_dim: int, activation: str, activation_dropout: float) -> None:
        super().__init__()
        self.fc1 = Linear(dim, ffn_dim)
        self.fc2 = Linear(ffn_dim, dim)
        self.activation = F.relu if activation == "relu" else F.gelu
        self.activation_dropout = Dropout(activation_dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.activation_dropout(self.activation(self.fc1(x))))


class Sublayer(nn.Module):
    """The residual connection and LayerNorm around one sublayer, post- or pre-norm."""

    def __init__(self, dim: int, dropout: float, normalize_before: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.dropout = Dropout(dropout)
        self.normalize_before = normalize_before

    def inputs(self, x: Tensor) -> Tensor:
        """What the sublayer reads."""
        return self.norm(x) if self.normalize_before else x

    def output(self, x: Tensor, y: Tensor) -> Tensor:
        """The residual stream after the sublayer produced ``y`` from ``x``."""
        out = x + self.dropout(y)
        return out if self.normalize_before else self.norm(out)


class EncoderLayer(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        d = cfg.embed_dim
        self.self_attn = MultiheadAttention(d, cfg.heads, cfg.attention_dropout, self_attention=True)
        self.attn_sub = Sublayer(d, cfg.dropout, cfg.normalize_before)
        self.ffn = FeedForward(d, cfg.ffn_dim, cfg.activation, cfg.activation_dropout)
        self.ffn_sub = Sublayer(d, cfg.dropout, cfg.normalize_before)

    def forward(self, x: Tensor, key_mask: Tensor) -> Tensor:
        q, k, v = self.self_attn.project_qkv(self.attn_sub.inputs(x))
        y, _ = self.self_attn.attend(q, k, v, key_mask)
        x = self.attn_sub.output(x, y)
        return self.ffn_sub.output(x, self.ffn(self.ffn_sub.inputs(x)))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        d = cfg.embed_dim
        self.self_attn = MultiheadAttention(d, cfg.heads, cfg.attention_dropout, self_attention=True)
        self.self_sub = Sublayer(d, cfg.dropout, cfg.normalize_before)
        self.cross_attn = MultiheadAttention(d, cfg.heads, cfg.attention_dropout, self_attention=False)
        self.cross_sub = Sublayer(d, cfg.dropout, cfg.normalize_before)
        self.ffn = FeedForward(d, cfg.ffn_dim, cfg.activation, cfg.activation_dropout)
        self.ffn_sub = Sublayer(d, cfg.dropout, cfg.normalize_before)

    def forward(self, x: Tensor, self_k: Tensor, self_v: Tensor, q_self: Tensor, causal: bool,
                cross_k: Tensor, cross_v: Tensor, cross_mask: Tensor, g: int,
                need_weights: bool, self_mask: Optional[Tensor] = None) -> tuple[Tensor, Optional[Tensor]]:
        """One layer over ``x`` ``[N, T, D]`` given its self-attention queries and the keys and
        values they attend to (all steps so far; ``self_mask``: which of them, when not causal);
        ``g`` rows of ``x`` per encoded sentence.  Returns the new stream and, with
        ``need_weights``, the cross-attention ``[N, H, T, S]``."""
        y, _ = self.self_attn.attend(q_self, self_k, self_v, self_mask, causal=causal)
        x = self.self_sub.output(x, y)
        q = split_heads(self.cross_attn.q_proj(self.cross_sub.inputs(x)), self.cross_attn.heads)
        if g > 1:  # [B*g, H, T, d] -> [B, H, g*T, d]: a sentence's hypotheses share its keys
            n, h, t, d = q.shape
            q = q.view(n // g, g, h, t, d).transpose(1, 2).reshape(n // g, h, g * t, d)
        y, weights = self.cross_attn.attend(q, cross_k, cross_v, cross_mask, need_weights=need_weights)
        if g > 1:
            b, gt, dim = y.shape
            y = y.view(b, g, gt // g, dim).reshape(b * g, gt // g, dim)
            if weights is not None:
                h, s = weights.size(1), weights.size(-1)
                weights = weights.view(b, h, g, gt // g, s).transpose(1, 2).reshape(b * g, h, gt // g, s)
        x = self.cross_sub.output(x, y)
        return self.ffn_sub.output(x, self.ffn(self.ffn_sub.inputs(x))), weights


def _extend_cache(cache: Tensor, rows: Optional[Tensor], new: Tensor) -> Tensor:
    """A layer's keys (or values) ``cache`` ``[t, N0, H, d]`` with ``new`` ``[N, H, T, d]`` after
    them -> ``[t + T, N, H, d]`` in :func:`attention_dtype`, row ``j`` continuing row ``rows[j]``
    of ``cache`` (all rows in order where ``rows`` is None): one copy of the cache, into a buffer
    that is never written again (a state stays valid after the step that read it)."""
    t = cache.size(0)
    dtype = attention_dtype(new)  # under CPU autocast: float32, what attention reads (one cast per step's keys)
    out = new.new_empty(t + new.size(2), new.size(0), new.size(1), new.size(3), dtype=dtype)
    if t:
        old = cache.to(dtype)  # a cache made outside autocast on a GPU
        if torch.is_grad_enabled() and (old.requires_grad or new.requires_grad):  # out= is not differentiable
            kept = old if rows is None else old.index_select(1, rows)
            return torch.cat([kept, new.permute(2, 0, 1, 3).to(dtype)])
        if rows is None:
            out[:t].copy_(old)
        else:
            torch.index_select(old, 1, rows, out=out[:t])
    out[t:].copy_(new.permute(2, 0, 1, 3))
    return out


@register_model("transformer")
class TransformerModel(Seq2SeqModel):
    """Vaswani et al.'s encoder-decoder Transformer."""

    Config = TransformerConfig
    shares_encoder_rows = True
    has_attention_layers = True
    no_posterior_reason = ("its output mixes every decoder layer's attention heads over the source, so there is no "
                           "one context to replace by a single source word, which the posterior needs")
    #: The decoder state grows by one key and value per step: the fixed-shape search of
    #: ``--cuda-graphs`` (fixed-size state buffers) does not apply, nor does the training step
    #: loop's graphs (there is no step loop).
    cuda_graph_support: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, cfg: TransformerConfig, src_dict, tgt_dict) -> None:  # noqa: ANN001
        super().__init__(cfg, src_dict, tgt_dict)
        d = cfg.embed_dim
        self.src_embed = nn.Embedding(len(src_dict), d, padding_idx=PAD_ID)
        self.tgt_embed = nn.Embedding(len(tgt_dict), d, padding_idx=PAD_ID)
        self.embed_scale = math.sqrt(d)
        if cfg.learned_positions:  # position p is row p (pad rows are not needed: masks hide them)
            self.src_positions: Optional[nn.Embedding] = nn.Embedding(cfg.max_positions, d)
            self.tgt_positions: Optional[nn.Embedding] = nn.Embedding(cfg.max_positions, d)
        else:
            self.src_positions = self.tgt_positions = None
        self.embed_dropout = Dropout(cfg.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        self.encoder_norm = nn.LayerNorm(d) if cfg.normalize_before else None
        self.decoder_norm = nn.LayerNorm(d) if cfg.normalize_before else None
        self.output_projection = Linear(d, len(tgt_dict), bias=False)
        tie_embeddings(self, self.src_embed, self.tgt_embed, self.output_projection)
        self.align_index = cfg.alignment_layer_index()

    @torch.no_grad()
    def init_xavier_(self) -> None:
        """An output layer tied to no embedding starts as fairseq's does: N(0, d^-1/2)."""
        w = self.output_projection.weight
        if not any(w is e.weight for e in (self.src_embed, self.tgt_embed)):
            nn.init.normal_(w, 0.0, self.cfg.embed_dim ** -0.5)

    def choose_alignment(self, layer: Optional[int], heads: Optional[int]) -> None:
        changes = {k: v for k, v in (("alignment_layer", layer), ("alignment_heads", heads)) if v is not None}
        cfg = dataclasses.replace(self.cfg, **changes)
        cfg.validate()  # a layer or head count the model does not have: one line naming it
        self.cfg, self.align_index = cfg, cfg.alignment_layer_index()

    # -- embeddings -------------------------------------------------------------------------
    def max_source_len(self) -> Optional[int]:
        return self.cfg.max_positions - 1 if self.cfg.learned_positions else None

    def max_target_len(self) -> Optional[int]:
        # the step that must emit </s> at the bound reads position ``bound``: the last row
        return self.cfg.max_positions - 1 if self.cfg.learned_positions else None

    def _embed(self, tokens: Tensor, start: int, table: nn.Embedding, positions: Optional[nn.Embedding]) -> Tensor:
        """Scaled embeddings plus positions ``start .. start + T - 1`` of ``tokens`` ``[B, T]``."""
        x = table(tokens) * self.embed_scale
        pos = torch.arange(start, start + tokens.size(1), device=tokens.device)
        if positions is None:
            x = x + sinusoids(pos, x.size(-1)).to(x.dtype)
        else:
            if start + tokens.size(1) > self.cfg.max_positions:
                raise NmtkitError(f"a sentence of {start + tokens.size(1)} pieces is longer than the model's "
                                  f"learned positions (max_positions {self.cfg.max_positions})")
            x = x + positions(pos)
        return self.embed_dropout(x)

    # -- encoder ----------------------------------------------------------------------------
    def encode(self, src_tokens: Tensor, src_lengths: Tensor) -> EncoderOutput:
        mask = lengths_to_mask(src_lengths, src_tokens.size(1))
        key_mask = mask[:, None, None, :]
        x = self._embed(src_tokens, 0, self.src_embed, self.src_positions)
        for layer in self.encoder_layers:
            x = layer(x, key_mask)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        extra: dict[str, Tensor] = {}
        for i, layer in enumerate(self._decoder_stack()):
            extra[f"k{i}"], extra[f"v{i}"] = layer.cross_attn.project_kv(x)
        return EncoderOutput(states=x, mask=mask, extra=extra)

    # -- decoder ----------------------------------------------------------------------------
    def _decoder_stack(self) -> list[DecoderLayer]:
        return cast(list[DecoderLayer], list(self.decoder_layers))

    def _decode(self, x: Tensor, enc: EncoderOutput, cache: Optional[DecoderState],
                need_weights: bool) -> tuple[Tensor, Optional[Tensor], DecoderState]:
        """The decoder stack over embedded inputs ``x`` ``[N, T, D]``: teacher-forced (``cache``
        None, causal) or the next ``T`` steps after the cached ones.  Returns the top states,
        the alignment layer's cross-attention ``[N, T, S]`` (when ``need_weights``) and the
        cache with these steps appended."""
        g = rows_per_sentence(x.size(0), enc)
        cross_mask = enc.mask[:, None, None, :]
        new_cache: DecoderState = {}
        rows = None if cache is None else cache.get("rows")
        align = None
        for i, layer in enumerate(self._decoder_stack()):
            q, k, v = layer.self_attn.project_qkv(layer.self_sub.inputs(x))
            if cache is None:  # the state these steps would leave: time first, as decode_step keeps it
                new_cache[f"k{i}"], new_cache[f"v{i}"] = k.permute(2, 0, 1, 3), v.permute(2, 0, 1, 3)
            else:
                new_cache[f"k{i}"], new_cache[f"v{i}"] = (_extend_cache(cache[f"{kind}{i}"], rows, new)
                                                          for kind, new in (("k", k), ("v", v)))
                k, v = (new_cache[f"{kind}{i}"].permute(1, 2, 0, 3) for kind in ("k", "v"))
            want = need_weights and i == self.align_index
            x, weights = layer(x, k, v, q, x.size(1) > 1,  # several steps (teacher forcing, or after a cache): causal
                               enc.extra[f"k{i}"], enc.extra[f"v{i}"], cross_mask, g, want)
            if weights is not None:
                align = self._heads_average(weights)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        return x, align, new_cache

    def init_decoder_state(self, enc: EncoderOutput) -> DecoderState:
        h = self.cfg.heads
        empty = enc.states.new_zeros(0, enc.states.size(0), h, self.cfg.embed_dim // h)
        return {f"{kind}{i}": empty for i in range(self.cfg.decoder_layers) for kind in ("k", "v")}

    def reorder_decoder_state(self, state: DecoderState, order: Tensor) -> DecoderState:
        """Row ``j`` of the result continues row ``order[j]``: recorded in ``rows`` (composed with
        a reorder still pending), applied by the next :meth:`decode_step` as it extends the cache."""
        rows = state.get("rows")
        return {**state, "rows": order if rows is None else rows.index_select(0, order)}

    def decode_step(
        self, prev_tokens: Tensor, state: DecoderState, enc: EncoderOutput, need_attention: bool = True
    ) -> tuple[Tensor, Optional[Tensor], DecoderState]:
        step = state["k0"].size(0)
        x = self._embed(prev_tokens[:, None], step, self.tgt_embed, self.tgt_positions)
        # without attention wanted, the alignment layer runs the fused kernel like the others
        out, align, new_state = self._decode(x, enc, state, need_weights=need_attention)
        logits = self.project_output(out[:, 0])
        return log_probs(logits), (None if align is None else align[:, 0]), new_state

    def forward_features(
        self, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor, need_attention: bool = True
    ) -> tuple[Tensor, Optional[Tensor]]:
        enc = self.encode(src_tokens, src_lengths)
        x = self._embed(prev_output_tokens, 0, self.tgt_embed, self.tgt_positions)
        full = self.cfg.full_context_alignment
        out, align, _ = self._decode(x, enc, None, need_weights=need_attention and not full)
        if full and need_attention:
            align = self._full_context_alignment(x, enc, prev_output_tokens.ne(PAD_ID))
        return out, align

    def _full_context_alignment(self, x: Tensor, enc: EncoderOutput, tgt_mask: Tensor) -> Tensor:
        """The alignment layer's cross-attention ``[B, T, S]`` when every target position sees
        the whole target (``tgt_mask`` ``[B, T]``: the real ones): the layers up to it once
        more, without the causal mask (Garg et al. 2019, section 4.2)."""
        g = rows_per_sentence(x.size(0), enc)
        cross_mask, self_mask = enc.mask[:, None, None, :], tgt_mask[:, None, None, :]
        for i, layer in enumerate(self._decoder_stack()[: self.align_index + 1]):
            q, k, v = layer.self_attn.project_qkv(layer.self_sub.inputs(x))
            x, weights = layer(x, k, v, q, False, enc.extra[f"k{i}"], enc.extra[f"v{i}"], cross_mask, g,
                               i == self.align_index, self_mask=self_mask)
        assert weights is not None
        return self._heads_average(weights)

    def _heads_average(self, weights: Tensor) -> Tensor:
        """The reported alignment: the first ``alignment_heads`` heads (0: all) of ``[N, H, T, S]``, averaged."""
        return weights[:, : self.cfg.alignment_heads or weights.size(1)].mean(dim=1)
