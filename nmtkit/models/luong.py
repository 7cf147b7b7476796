"""Luong, Pham & Manning (2015): stacked LSTM encoder-decoder with global or local attention.

Encoder: stacked LSTM (optionally reading the source reversed), unidirectional as in the
paper or, with ``encoder_bidirectional``, bidirectional with half the units per direction (as
OpenNMT-py's ``brnn``) or ``encoder_hidden_size`` units per direction (fairseq's ``lstm`` encoder
has 256 per direction in front of a 256-unit decoder; the bridge and the attention's
``W_a``/``W_k`` and ``W_c`` map the annotations to the decoder's size).  Decoder: stacked LSTM initialised with the encoder's final ``(h, c)``
of every layer; a bidirectional encoder's final states pass through a learned bridge
``h_0 = tanh(W_h [->h; <-h] + b_h)``, ``c_0 = W_c [->c; <-c] + b_c`` (all layers at once).  With attention,
the top decoder state ``h_t`` attends over the encoder states (``nmtkit.models.attention``)
giving a context ``c_t`` and the attentional state ``h~_t = tanh(W_c [c_t; h_t])``, which the
softmax reads; without attention the softmax reads ``h_t``.  Input feeding makes the first
decoder layer's input ``[y_{t-1}; h~_{t-1}]`` (``h~_0 = 0``).

Dropout (Zaremba et al. 2014, as in the paper) is applied to the inputs of the first layer
of encoder and decoder (``dropout_embed``), between stacked layers (``dropout_hidden``), and to
``h~_t`` before the softmax (``dropout_output``); each defaults to ``dropout``.  The masks come
from :mod:`nmtkit.models.dropout` (the same distribution, the rate rounded to a multiple of 2^-16).

Training speed: with input feeding the decoder must run step by step, but the embedding part
of the first layer's input does not depend on earlier steps, so :meth:`LuongModel.forward`
projects it for all target steps in one matrix product and each step only adds the
input-feed and recurrent products; :meth:`LuongModel.decode_step` is the plain reference
computation, and the tests check the two agree.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, cast

import torch
from torch import Tensor, nn

from nmtkit.data.dictionary import PAD_ID
from nmtkit.errors import NmtkitError
from nmtkit.models.attention import ATTENTION_TYPES, SCORE_FUNCTIONS, LuongAttention
from nmtkit.models.base import DecoderState, EncoderOutput, Seq2SeqModel, log_probs, rows_per_sentence
from nmtkit.models.common import (
    BaseConfig,
    batch_first,
    option,
    require_at_least,
    layers_first,
    lengths_to_mask,
    require,
    require_choice,
    rnn_step,
    select_input_columns,
    tie_embeddings,
)
from nmtkit.models.encoders import RNNEncoder, join_directions
from nmtkit.models.dropout import Dropout, dropout
from nmtkit.models.gemm import Linear, LoopWeight, linear, lstm_update, tanh
from nmtkit.models.loop_graphs import LoopSpec
from nmtkit.models.posterior import attention_posterior, context_log_likelihoods
from nmtkit.models.registry import register_model


#: The roles of :meth:`LuongModel._graph_feed_loop`'s tensors, without and with precomputed keys.
_FEED_INPUTS = (("B", "T", None), ("B", None, None), ("B", None, None), ("B", None), ("B", "S", None), ("B", "S"))
FEED_LOOP_SPECS = {
    False: LoopSpec(_FEED_INPUTS, (("B", "T", None), ("B", "T", "S")), mask=5),
    True: LoopSpec(_FEED_INPUTS + (("B", "S", None),), (("B", "T", None), ("B", "T", "S")), mask=5),
}


@dataclass
class LuongConfig(BaseConfig):
    """Options of the ``luong`` model (see the module docstring)."""

    embed_dim: int = 256
    hidden_size: int = 256
    layers: int = 2
    dropout: float = 0.2
    attention: str = option("global", "Attention (none: the attention-free baseline).", choices=ATTENTION_TYPES)
    score: str = option("general", "Attention score function.", choices=SCORE_FUNCTIONS)
    input_feeding: bool = option(True, "Feed the previous attentional state h~_{t-1} to the decoder's first layer.")
    window: int = option(10, "Half-width D of the local attention window [p_t - D, p_t + D].")
    max_source_positions: int = option(100, "Source positions the location score can address; "
                                       "source tokens beyond get zero weight.")
    encoder_bidirectional: bool = option(False, "Bidirectional encoder (hidden_size / 2 units per direction) "
                                         "with a learned bridge.")
    encoder_hidden_size: int = option(0, "Units per direction of a bidirectional encoder (0: hidden_size / 2); "
                                      "the bridge and the attention map them to the decoder's hidden_size.")

    def encoder_units(self) -> int:
        """Units per encoder direction."""
        if not self.encoder_bidirectional:
            return self.hidden_size
        return self.encoder_hidden_size or self.hidden_size // 2

    def annotation_size(self) -> int:
        """Size of one source annotation h_s (both directions side by side)."""
        return self.encoder_units() * (2 if self.encoder_bidirectional else 1)

    def validate(self) -> None:
        super().validate()
        require_choice("attention", self.attention, ATTENTION_TYPES)
        require_choice("score", self.score, SCORE_FUNCTIONS)
        require(
            not (self.input_feeding and self.attention == "none"),
            "input_feeding needs attention (it feeds the attentional state h~_t); "
            "use attention global/local-m/local-p or input_feeding false",
        )
        require_at_least("window", self.window, 1)
        if self.attention != "none" and self.score == "location":
            require(
                self.max_source_positions >= 1,
                f"location score needs max_source_positions >= 1, got {self.max_source_positions}",
            )
        if self.encoder_bidirectional and not self.encoder_hidden_size:
            require(
                self.hidden_size % 2 == 0,
                f"encoder_bidirectional splits hidden_size over two directions; it must be even, got {self.hidden_size}",
            )
        if self.encoder_hidden_size:
            require(self.encoder_bidirectional,
                    "encoder_hidden_size sizes a bidirectional encoder (its bridge maps it to the decoder); "
                    "add encoder_bidirectional, or set hidden_size for a unidirectional one")
            require_at_least("encoder_hidden_size", self.encoder_hidden_size, 1)
            require(self.attention == "none" or self.score != "dot" or self.annotation_size() == self.hidden_size,
                    f"the dot score needs annotations of the decoder's size: 2 x encoder_hidden_size = "
                    f"{self.annotation_size()} against hidden_size {self.hidden_size}; use score general or concat")


@register_model("luong")
class LuongModel(Seq2SeqModel):
    """Stacked LSTM encoder-decoder with Luong attention, input feeding and dropout."""

    Config = LuongConfig
    shares_encoder_rows = True

    def __init__(self, cfg: LuongConfig, src_dict, tgt_dict) -> None:  # noqa: ANN001
        super().__init__(cfg, src_dict, tgt_dict)
        self.has_attention = cfg.attention != "none"
        self.has_posterior = self.has_attention
        if not self.has_attention:
            self.no_posterior_reason = "it has no attention (--attention none)"
        self.input_feeding = cfg.input_feeding
        self.feedback_layers = ("W_c",) if self.input_feeding else ()  # h~_t is the next step's input
        h = cfg.hidden_size
        self.bidirectional = cfg.encoder_bidirectional
        annotation = cfg.annotation_size()
        self.encoder = RNNEncoder(
            len(src_dict), cfg.embed_dim, cfg.encoder_units(), cfg.layers, cell="lstm",
            bidirectional=self.bidirectional, dropout=cfg.dropout_rate("embed"),
            reverse_source=cfg.source_reversal, layer_dropout=cfg.dropout_rate("hidden"), soft_match=cfg.encoder_self_attention,
        )
        if self.bidirectional:
            self.bridge_h = Linear(cfg.layers * annotation, cfg.layers * h)
            self.bridge_c = Linear(cfg.layers * annotation, cfg.layers * h)
        self.tgt_embed = nn.Embedding(len(tgt_dict), cfg.embed_dim, padding_idx=PAD_ID)
        dec_input = cfg.embed_dim + (h if cfg.input_feeding else 0)
        self.decoder = nn.LSTM(
            dec_input, h, num_layers=cfg.layers, batch_first=True,
            dropout=cfg.dropout_rate("hidden") if cfg.layers > 1 else 0.0,
        )
        self.embed_dropout = Dropout(cfg.dropout_rate("embed"))
        self.output_dropout = Dropout(cfg.dropout_rate("output"))
        if self.has_attention:
            self.attention = LuongAttention(
                h, cfg.attention, cfg.score, cfg.window, cfg.max_source_positions, key_size=annotation
            )
            self.W_c = Linear(annotation + h, h, bias=False)
        self.output_projection = Linear(h, len(tgt_dict))
        tie_embeddings(self, self.encoder.embed, self.tgt_embed, self.output_projection)

    # -- encoder ---------------------------------------------------------------------------
    def max_source_len(self) -> Optional[int]:
        """The location score has one output per source position (``max_source_positions``,
        ``</s>`` included); the other scores attend over any length."""
        if self.has_attention and self.cfg.score == "location":
            return int(self.cfg.max_source_positions) - 1
        return None

    def _initial_states(self, h_n: Tensor, c_n: Tensor) -> tuple[Tensor, Tensor]:
        """Encoder final states (PyTorch layout) -> decoder ``(h_0, c_0)`` ``[B, layers, H]``."""
        if not self.bidirectional:
            return batch_first(h_n), batch_first(c_n)
        h, c = batch_first(join_directions(h_n)), batch_first(join_directions(c_n))  # [B, L, annotation]
        bsz, layers, size = h.shape
        out = self.cfg.hidden_size
        h0 = tanh(self.bridge_h(h.reshape(bsz, layers * size))).view(bsz, layers, out)
        c0 = self.bridge_c(c.reshape(bsz, layers * size)).view(bsz, layers, out)
        return h0, c0

    def encode(self, src_tokens: Tensor, src_lengths: Tensor) -> EncoderOutput:
        enc = self.encoder(src_tokens, src_lengths)
        h0, c0 = self._initial_states(enc.h_n, enc.c_n)
        extra = {"h0": h0, "c0": c0}
        if self.has_attention:
            keys = self.attention.precompute_keys(enc.outputs)
            if keys is not None:
                extra["keys"] = keys
        mask = lengths_to_mask(src_lengths, src_tokens.size(1))
        return EncoderOutput(states=enc.outputs, mask=mask, extra=extra)

    # -- decoder ---------------------------------------------------------------------------
    def init_decoder_state(self, enc: EncoderOutput) -> DecoderState:
        h0 = enc.extra["h0"]
        n = h0.size(0)
        state = {
            "h": h0,
            "c": enc.extra["c0"],
            # 0-based target step: local-m centres its window on it.
            "step": torch.zeros(n, dtype=torch.long, device=h0.device),
        }
        if self.input_feeding:
            state["feed"] = h0.new_zeros(n, self.cfg.hidden_size)
        return state

    def _attend(self, top: Tensor, enc: EncoderOutput, steps: Tensor, w_c: Optional[Callable[[Tensor], Tensor]] = None,
                products: Optional[tuple] = None) -> tuple[Tensor, Optional[Tensor]]:
        """Top decoder states ``[B, T, H]`` -> (attentional states ``[B, T, H]``, weights);
        a step loop passes its :class:`LoopWeight` s: ``w_c`` for ``W_c [c; h]`` and the
        attention's ``products`` (:meth:`LuongAttention.loop_products`).

        In a step without gradients (a search), the states are multiplied by the context's
        columns of ``W_c`` once per sentence, at the first step (``context_proj``, kept in the
        encoder output, so it follows the search's reordering), and the weights average those:
        ``W_c [c; h] = W_c' (sum_s a_s h_s) + W_c'' h = sum_s a_s (W_c' h_s) + W_c'' h``.  Each
        step then reads vectors of the decoder's size instead of the annotations and multiplies
        only ``h`` by ``W_c''``, a measurable share of a search step with int8 weights
        (bench/README.md); the same sum, rounded differently."""
        if not self.has_attention:
            return top, None
        n, t, h = top.shape
        g = rows_per_sentence(n, enc)
        # g hypotheses of one sentence are g more queries against its states (beam search)
        query = top if g == 1 else top.reshape(n // g, g * t, h)
        steps = steps if g == 1 or steps is None else steps.reshape(n // g, g * t)
        values = self._context_projection(enc) if w_c is None and not torch.is_grad_enabled() else None
        context, weights = self.attention(query, enc.states, enc.mask, enc.extra.get("keys"), steps, products, values)
        if g > 1:
            context, weights = context.reshape(n, t, -1), weights.reshape(n, t, -1)
        if values is not None:
            top_part = select_input_columns(self.W_c, slice(enc.states.size(-1), None))
            assert top_part is not None  # encode() made context_proj only where W_c splits
            return tanh(context + top_part(top)), weights
        return tanh((w_c or self.W_c)(torch.cat([context, top], dim=-1))), weights

    def _context_projection(self, enc: EncoderOutput) -> Optional[Tensor]:
        """``W_c``'s context columns times the states ``[B, S, H]``, made at the first step of a
        search and kept in ``enc.extra`` (see :meth:`_attend`); None where ``W_c`` cannot split."""
        proj = enc.extra.get("context_proj")
        if proj is None:
            context_part = select_input_columns(self.W_c, slice(0, enc.states.size(-1)), float32=True)
            if context_part is None:
                return None
            proj = enc.extra["context_proj"] = context_part(enc.states)
        return proj

    def _step(
        self, emb: Tensor, state: DecoderState, enc: EncoderOutput
    ) -> tuple[Tensor, Optional[Tensor], DecoderState]:
        """One step from embedded previous tokens ``[N, E]`` -> (h~ ``[N, 1, H]``, weights
        ``[N, 1, S]`` or None, new state): the reference computation of one decoder step."""
        x = torch.cat([emb, state["feed"]], dim=-1) if self.input_feeding else emb
        top, h, c = rnn_step(self.decoder, self.embed_dropout(x), state["h"], state["c"], self._search_cache)
        htilde, weights = self._attend(top.unsqueeze(1), enc, state["step"].unsqueeze(1))
        new_state: DecoderState = {"h": h, "c": cast(Tensor, c), "step": state["step"] + 1}  # c: None for a GRU
        if self.input_feeding:
            new_state["feed"] = htilde.squeeze(1)
        return htilde, weights, new_state

    def decode_step(
        self, prev_tokens: Tensor, state: DecoderState, enc: EncoderOutput, need_attention: bool = True
    ) -> tuple[Tensor, Optional[Tensor], DecoderState]:
        htilde, weights, new_state = self._step(self.tgt_embed(prev_tokens), state, enc)
        logits = self.project_output(self.output_dropout(htilde.squeeze(1)))
        attn = weights.squeeze(1) if weights is not None else None
        return log_probs(logits), attn, new_state

    def _feed_loop(
        self, emb: Tensor, state: DecoderState, enc: EncoderOutput, keep_tops: bool = False
    ) -> tuple[Tensor, Optional[Tensor], Optional[Tensor]]:
        """:meth:`_feed_steps`, through :attr:`loop_graphs` where they apply (training on CUDA)."""
        graphs = self.loop_graphs
        if graphs is None or keep_tops or not graphs.applies(emb):
            return self._feed_steps(emb, state, enc, keep_tops)
        keys = enc.extra.get("keys")
        inputs = (emb, state["h"], state["c"], state["feed"], enc.states, enc.mask) + (() if keys is None else (keys,))
        htilde, attn = graphs.run(self, "_graph_feed_loop", FEED_LOOP_SPECS[keys is not None], inputs)
        return htilde, attn, None

    def _graph_feed_loop(self, emb: Tensor, h: Tensor, c: Tensor, feed: Tensor, states: Tensor, mask: Tensor,
                         keys: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
        """:meth:`_feed_steps` on tensors alone, the form :class:`LoopGraphs` captures."""
        enc = EncoderOutput(states=states, mask=mask, extra={} if keys is None else {"keys": keys})
        htilde, attn, _ = self._feed_steps(emb, {"h": h, "c": c, "feed": feed}, enc)
        assert attn is not None  # input feeding implies attention
        return htilde, attn

    def _feed_steps(
        self, emb: Tensor, state: DecoderState, enc: EncoderOutput, keep_tops: bool = False
    ) -> tuple[Tensor, Optional[Tensor], Optional[Tensor]]:
        """Teacher-forced input-feeding decoder over all steps -> (h~ ``[B, T, H]``, attention,
        top decoder states ``h_t`` ``[B, T, H]`` if ``keep_tops`` else None) (see the module docstring):
        the same computation as repeated :meth:`_step` calls, with the embedding half of
        the first layer's input projected once for all steps.  Each layer's per-step products
        are one product of ``[x_t; h_{t-1}]`` with ``[W_ih W_hh]`` (joined once per batch), and
        every per-step weight (with ``W_c``) is a :class:`LoopWeight`: its gradient is one
        product over all steps."""
        rnn: Any = self.decoder  # an nn.LSTM: its per-layer weights are attributes by name
        layers = self.cfg.layers
        e = self.cfg.embed_dim
        w_ih0 = rnn.weight_ih_l0
        pre = linear(self.embed_dropout(emb), w_ih0[:, :e].contiguous(), rnn.bias_ih_l0 + rnn.bias_hh_l0)  # [B, T, 4H]
        # unbind once: indexing pre[:, t] every step would make each step's backward write a
        # zero-filled [B, T, 4H] gradient (quadratic in T); unbind's backward is one stack
        pre_steps = pre.unbind(1)
        step_weights = [LoopWeight(torch.cat([w_ih0[:, e:], rnn.weight_hh_l0], dim=1))]  # [x_t = feed; h]
        for layer in range(1, layers):
            w_ih, w_hh = getattr(rnn, f"weight_ih_l{layer}"), getattr(rnn, f"weight_hh_l{layer}")
            b_ih, b_hh = getattr(rnn, f"bias_ih_l{layer}"), getattr(rnn, f"bias_hh_l{layer}")
            step_weights.append(LoopWeight(torch.cat([w_ih, w_hh], dim=1), b_ih + b_hh))
        # input feeding chains every step's W_c product to the next step's, which LoopWeight needs
        w_c = LoopWeight(self.W_c.weight) if self.has_attention else None
        products = self.attention.loop_products(enc.states, enc.extra.get("keys")) if self.has_attention else None
        hs = list(state["h"].unbind(1))
        cs = list(state["c"].unbind(1))
        feed = state["feed"]
        bsz, tgt_len = emb.shape[:2]
        layer_drop = rnn.dropout if (rnn.training and rnn.dropout > 0) else 0.0
        # target step of each query (local-m centres its window on it), made once, not per step
        all_steps = torch.arange(tgt_len, device=emb.device)[None, :].expand(bsz, tgt_len)
        outs, attns, tops = [], [], []
        for t in range(tgt_len):
            gates = pre_steps[t] + step_weights[0](torch.cat([self.embed_dropout(feed), hs[0]], dim=1))
            hs[0], cs[0] = lstm_update(gates, cs[0])
            inp = hs[0]
            for layer in range(1, layers):
                if layer_drop:
                    inp = dropout(inp, layer_drop, training=True)
                gates = step_weights[layer](torch.cat([inp, hs[layer]], dim=1))
                hs[layer], cs[layer] = lstm_update(gates, cs[layer])
                inp = hs[layer]
            htilde, weights = self._attend(inp.unsqueeze(1), enc, all_steps[:, t : t + 1], w_c, products)
            feed = htilde.squeeze(1)
            outs.append(htilde)
            attns.append(weights)
            if keep_tops:  # only the posterior reads them; training does not stack them
                tops.append(inp)
        attn = torch.cat(cast("list[Tensor]", attns), dim=1) if self.has_attention else None
        return torch.cat(outs, dim=1), attn, torch.stack(tops, dim=1) if keep_tops else None

    def _teacher_forced(
        self, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor, keep_tops: bool = False
    ) -> tuple[EncoderOutput, Optional[Tensor], Tensor, Optional[Tensor]]:
        """All steps given the previous words -> (encoder output, top decoder states ``h_t``
        ``[B, T, H]`` (with input feeding only if ``keep_tops``), attentional states h~ ``[B, T, H]``,
        attention ``[B, T, S]`` or None)."""
        enc = self.encode(src_tokens, src_lengths)
        state = self.init_decoder_state(enc)
        emb = self.tgt_embed(prev_output_tokens)  # [B, T, E]
        if self.input_feeding:
            # h~_{t-1} feeds step t, so the decoder must run one step at a time.
            htilde, attn, top = self._feed_loop(emb, state, enc, keep_tops)
        else:
            top, _ = self.decoder(
                self.embed_dropout(emb), (layers_first(state["h"]), layers_first(state["c"]))
            )
            bsz, tgt_len = prev_output_tokens.shape
            steps = torch.arange(tgt_len, device=emb.device)[None, :].expand(bsz, tgt_len)
            htilde, attn = self._attend(top, enc, steps)
        return enc, top, htilde, attn

    def forward_features(
        self, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor, need_attention: bool = True
    ) -> tuple[Tensor, Optional[Tensor]]:
        _, _, htilde, attn = self._teacher_forced(src_tokens, src_lengths, prev_output_tokens)
        return self.output_dropout(htilde), attn

    def forward_with_posterior(
        self, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor, targets: Tensor
    ) -> tuple[Tensor, Tensor]:
        # h~_t = tanh(W_c [c_t; h_t]): the W_c columns of c_t are linear in the context
        if not self.has_attention:
            raise NmtkitError("a Luong model without attention (--attention none) has no attention posterior")
        enc, top, htilde, attn = self._teacher_forced(src_tokens, src_lengths, prev_output_tokens, keep_tops=True)
        assert top is not None and attn is not None  # kept (keep_tops), and the model has attention
        logits = self.output_projection(self.output_dropout(htilde))
        w, split = self.W_c.weight, enc.states.size(-1)
        loglik = context_log_likelihoods(linear(top, w[:, split:]), linear(enc.states, w[:, :split]),
                                         lambda x: self.output_projection(tanh(x)), targets, src_lengths,
                                         self.output_projection.out_features)
        return logits, attention_posterior(attn, loglik, enc.mask)
