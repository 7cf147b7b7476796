"""The attention-free encoder-decoder baseline (Sutskever et al. 2014; Cho et al. 2014).

A stacked LSTM or GRU encoder reads the (optionally reversed) source; its final state of
every layer initialises a decoder of the same shape, which then generates with no further
access to the source, except that with ``feed_context`` the encoder's final top-layer state
``c`` is concatenated to every decoder input (Cho et al.'s fixed summary vector, the setup of
Bahdanau et al.'s RNNencdec baseline).  The softmax reads the top decoder state.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor, nn

from nmtkit.data.dictionary import PAD_ID
from nmtkit.models.base import DecoderState, EncoderOutput, Seq2SeqModel
from nmtkit.models.common import (
    BaseConfig,
    batch_first,
    layers_first,
    lengths_to_mask,
    require_choice,
)
from nmtkit.models.encoders import RNNEncoder
from nmtkit.models.registry import register_model


@dataclass
class RNNEncDecConfig(BaseConfig):
    """Options of the ``rnnencdec`` model."""

    #: lstm | gru
    cell: str = "lstm"
    #: Concatenate the encoder summary to the decoder input at every step.
    feed_context: bool = False

    def validate(self) -> None:
        super().validate()
        require_choice("cell", self.cell, ("lstm", "gru"))


@register_model("rnnencdec")
class RNNEncDecModel(Seq2SeqModel):
    """Encoder-decoder without attention: the whole source passes through one state."""

    Config = RNNEncDecConfig
    has_attention = False

    def __init__(self, cfg: RNNEncDecConfig, src_dict, tgt_dict) -> None:  # noqa: ANN001
        super().__init__(cfg, src_dict, tgt_dict)
        h = cfg.hidden_size
        self.is_lstm = cfg.cell == "lstm"
        self.encoder = RNNEncoder(
            len(src_dict), cfg.embed_dim, h, cfg.layers, cell=cfg.cell,
            dropout=cfg.dropout, reverse_source=cfg.source_reversal,
        )
        self.tgt_embed = nn.Embedding(len(tgt_dict), cfg.embed_dim, padding_idx=PAD_ID)
        rnn_cls = nn.LSTM if self.is_lstm else nn.GRU
        self.decoder = rnn_cls(
            cfg.embed_dim + (h if cfg.feed_context else 0), h, num_layers=cfg.layers,
            batch_first=True, dropout=cfg.dropout if cfg.layers > 1 else 0.0,
        )
        self.dropout = nn.Dropout(cfg.dropout)
        self.output_projection = nn.Linear(h, len(tgt_dict))

    def encode(self, src_tokens: Tensor, src_lengths: Tensor) -> EncoderOutput:
        enc = self.encoder(src_tokens, src_lengths)
        extra = {"h0": batch_first(enc.h_n)}
        if enc.c_n is not None:
            extra["c0"] = batch_first(enc.c_n)
        if self.cfg.feed_context:
            extra["context"] = enc.h_n[-1]
        mask = lengths_to_mask(src_lengths, src_tokens.size(1))
        return EncoderOutput(states=enc.outputs, mask=mask, extra=extra)

    def init_decoder_state(self, enc: EncoderOutput) -> DecoderState:
        state = {"h": enc.extra["h0"]}
        if self.is_lstm:
            state["c"] = enc.extra["c0"]
        return state

    def _run(self, emb: Tensor, state: DecoderState, enc: EncoderOutput) -> tuple[Tensor, DecoderState]:
        """Embedded tokens ``[B, T, E]`` -> (top states ``[B, T, H]``, state after them).
        Every input is known in advance, so forward runs all steps in one RNN call."""
        if self.cfg.feed_context:
            ctx = enc.extra["context"].unsqueeze(1).expand(-1, emb.size(1), -1)
            emb = torch.cat([emb, ctx], dim=-1)
        x = self.dropout(emb)
        if self.is_lstm:
            top, (h, c) = self.decoder(x, (layers_first(state["h"]), layers_first(state["c"])))
            return top, {"h": batch_first(h), "c": batch_first(c)}
        top, h = self.decoder(x, layers_first(state["h"]))
        return top, {"h": batch_first(h)}

    def decode_step(
        self, prev_tokens: Tensor, state: DecoderState, enc: EncoderOutput
    ) -> tuple[Tensor, Optional[Tensor], DecoderState]:
        top, new_state = self._run(self.tgt_embed(prev_tokens).unsqueeze(1), state, enc)
        logits = self.output_projection(self.dropout(top.squeeze(1)))
        return torch.log_softmax(logits, dim=-1), None, new_state

    def forward(
        self, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor
    ) -> tuple[Tensor, Optional[Tensor]]:
        enc = self.encode(src_tokens, src_lengths)
        top, _ = self._run(self.tgt_embed(prev_output_tokens), self.init_decoder_state(enc), enc)
        return self.output_projection(self.dropout(top)), None
