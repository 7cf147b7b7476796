"""The attention-free encoder-decoder baseline (Sutskever et al. 2014; Cho et al. 2014).

A stacked LSTM or GRU encoder reads the (optionally reversed) source; its final state of
every layer initialises a decoder of the same shape, which then generates with no further
access to the source, except that with ``feed_context`` the encoder's final top-layer state
``c`` is concatenated to every decoder input (Cho et al.'s fixed summary vector).  The softmax
reads the top decoder state.

Bahdanau et al.'s RNNencdec baseline (``rnnencdec_50``) adds, with ``bahdanau_decoder``:

* an initial decoder state ``s_0 = tanh(W_s c)`` (one projection per layer) instead of the
  encoder's final states;
* the maxout deep output of RNNsearch with the fixed summary in place of ``c_i``:
  ``t~_i = U_o s_{i-1} + V_o E y_{i-1} + C_o c``, ``t_i = maxout(t~_i)``, logits ``= W_o t_i``;
  ``s_i = RNN([E y_{i-1}; c], s_{i-1})``.

Every decoder input is known in advance, so training runs the decoder RNN over all steps at
once, and ``s_{i-1}`` is the top output shifted by one step with ``s_0`` in front.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor, nn

from nmtkit.data.dictionary import PAD_ID
from nmtkit.models.base import DecoderState, EncoderOutput, Seq2SeqModel, log_probs, rows_per_sentence
from nmtkit.models.common import (
    BaseConfig,
    batch_first,
    layers_first,
    lengths_to_mask,
    option,
    require,
    require_at_least,
    require_choice,
    tie_embeddings,
)
from nmtkit.models.encoders import RNNEncoder
from nmtkit.models.dropout import Dropout
from nmtkit.models.gemm import Linear, tanh
from nmtkit.models.registry import register_model


#: Recurrent cells of the ``rnnencdec`` model.
CELLS = ("lstm", "gru")


@dataclass
class RNNEncDecConfig(BaseConfig):
    """Options of the ``rnnencdec`` model."""

    cell: str = option("lstm", "Recurrent cell of encoder and decoder.", choices=CELLS)
    feed_context: bool = option(False, "Concatenate the encoder summary to the decoder input at every step.")
    bahdanau_decoder: bool = option(False, "Bahdanau et al.'s RNNencdec decoder: s_0 = tanh(W_s c) and a maxout "
                                    "deep output reading s_{i-1}, E y_{i-1} and c (implies feed_context).")
    maxout_size: int = option(500, "Units after maxout (l in the paper; in rnnencdec only with bahdanau_decoder).")

    def validate(self) -> None:
        super().validate()
        require_choice("cell", self.cell, CELLS)
        require_at_least("maxout_size", self.maxout_size, 1)
        require(
            not self.bahdanau_decoder or self.cell == "gru",
            "bahdanau_decoder is Bahdanau et al.'s GRU decoder; use cell gru",
        )


@register_model("rnnencdec")
class RNNEncDecModel(Seq2SeqModel):
    """Encoder-decoder without attention: the whole source passes through one state."""

    Config = RNNEncDecConfig
    has_attention = False
    shares_encoder_rows = True
    no_posterior_reason = "it has no attention"

    def __init__(self, cfg: RNNEncDecConfig, src_dict, tgt_dict) -> None:  # noqa: ANN001
        super().__init__(cfg, src_dict, tgt_dict)
        h = cfg.hidden_size
        self.is_lstm = cfg.cell == "lstm"
        self.bahdanau = cfg.bahdanau_decoder
        self.feed_context = cfg.feed_context or self.bahdanau
        self.encoder = RNNEncoder(
            len(src_dict), cfg.embed_dim, h, cfg.layers, cell=cfg.cell,
            dropout=cfg.dropout_rate("embed"), reverse_source=cfg.source_reversal,
            layer_dropout=cfg.dropout_rate("hidden"), soft_match=cfg.encoder_self_attention,
        )
        self.tgt_embed = nn.Embedding(len(tgt_dict), cfg.embed_dim, padding_idx=PAD_ID)
        rnn_cls = nn.LSTM if self.is_lstm else nn.GRU
        self.decoder = rnn_cls(
            cfg.embed_dim + (h if self.feed_context else 0), h, num_layers=cfg.layers,
            batch_first=True, dropout=cfg.dropout_rate("hidden") if cfg.layers > 1 else 0.0,
        )
        self.embed_dropout = Dropout(cfg.dropout_rate("embed"))
        self.output_dropout = Dropout(cfg.dropout_rate("output"))
        if self.bahdanau:
            self.W_s = Linear(h, cfg.layers * h)
            self.deep_output = Linear(h + cfg.embed_dim + h, 2 * cfg.maxout_size)
            self.output_projection = Linear(cfg.maxout_size, len(tgt_dict))
        else:
            self.output_projection = Linear(h, len(tgt_dict))
        tie_embeddings(self, self.encoder.embed, self.tgt_embed, self.output_projection)

    def encode(self, src_tokens: Tensor, src_lengths: Tensor) -> EncoderOutput:
        enc = self.encoder(src_tokens, src_lengths)
        extra = {"h0": batch_first(enc.h_n)}
        if enc.c_n is not None:
            extra["c0"] = batch_first(enc.c_n)
        if self.feed_context:
            extra["context"] = enc.h_n[-1]
        mask = lengths_to_mask(src_lengths, src_tokens.size(1))
        return EncoderOutput(states=enc.outputs, mask=mask, extra=extra)

    def init_decoder_state(self, enc: EncoderOutput) -> DecoderState:
        if self.bahdanau:
            summary = enc.extra["context"]
            s0 = tanh(self.W_s(summary)).view(summary.size(0), self.cfg.layers, self.cfg.hidden_size)
            return {"h": s0}
        state = {"h": enc.extra["h0"]}
        if self.is_lstm:
            state["c"] = enc.extra["c0"]
        return state

    def _run(self, emb: Tensor, state: DecoderState, enc: EncoderOutput) -> tuple[Tensor, DecoderState]:
        """Embedded tokens ``[B, T, E]`` (dropout applied) -> (top states ``[B, T, H]``, state
        after them).  Every input is known in advance, so forward runs all steps in one RNN call."""
        if self.feed_context:
            ctx = enc.extra["context"].unsqueeze(1).expand(-1, emb.size(1), -1)
            emb = torch.cat([emb, ctx], dim=-1)
        if self.is_lstm:
            top, (h, c) = self.decoder(emb, (layers_first(state["h"]), layers_first(state["c"])))
            return top, {"h": batch_first(h), "c": batch_first(c)}
        top, h = self.decoder(emb, layers_first(state["h"]))
        return top, {"h": batch_first(h)}

    def _features(self, prev_top: Tensor, top: Tensor, emb: Tensor, enc: EncoderOutput) -> Tensor:
        """What the output layer reads for ``[B, T, *]`` steps: the top state (plain), or
        Bahdanau's maxout over ``s_{i-1}`` (``prev_top``), ``E y_{i-1}`` and the summary."""
        if not self.bahdanau:
            return self.output_dropout(top)
        ctx = enc.extra["context"].unsqueeze(1).expand(-1, emb.size(1), -1)
        t_pre = self.deep_output(torch.cat([prev_top, emb, ctx], dim=-1))
        t = t_pre.view(*t_pre.shape[:-1], -1, 2).max(dim=-1).values
        return self.output_dropout(t)

    def decode_step(
        self, prev_tokens: Tensor, state: DecoderState, enc: EncoderOutput, need_attention: bool = True
    ) -> tuple[Tensor, Optional[Tensor], DecoderState]:
        g = rows_per_sentence(prev_tokens.size(0), enc)
        if g > 1 and "context" in enc.extra:  # the summary of each sentence, for each of its g rows
            enc = EncoderOutput(enc.states, enc.mask, {**enc.extra, "context": enc.extra["context"].repeat_interleave(g, 0)})
        emb = self.embed_dropout(self.tgt_embed(prev_tokens).unsqueeze(1))
        top, new_state = self._run(emb, state, enc)
        logits = self.project_output(self._features(state["h"][:, -1:], top, emb, enc).squeeze(1))
        return log_probs(logits), None, new_state

    def forward_features(
        self, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor, need_attention: bool = True
    ) -> tuple[Tensor, Optional[Tensor]]:
        enc = self.encode(src_tokens, src_lengths)
        state = self.init_decoder_state(enc)
        emb = self.embed_dropout(self.tgt_embed(prev_output_tokens))
        top, _ = self._run(emb, state, enc)
        prev_top = torch.cat([state["h"][:, -1:], top[:, :-1]], dim=1) if self.bahdanau else top
        return self._features(prev_top, top, emb, enc), None
