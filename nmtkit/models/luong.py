"""Luong, Pham & Manning (2015): stacked LSTM encoder-decoder with global or local attention.

Encoder: unidirectional stacked LSTM (optionally reading the source reversed).  Decoder:
stacked LSTM initialised with the encoder's final ``(h, c)`` of every layer.  With attention,
the top decoder state ``h_t`` attends over the encoder states (``nmtkit.models.attention``)
giving a context ``c_t`` and the attentional state ``h~_t = tanh(W_c [c_t; h_t])``, which the
softmax reads; without attention the softmax reads ``h_t``.  Input feeding makes the first
decoder layer's input ``[y_{t-1}; h~_{t-1}]`` (``h~_0 = 0``).

Dropout (Zaremba et al. 2014, as in the paper) is applied to the inputs of the first layer
of encoder and decoder, between stacked layers, and to ``h~_t`` before the softmax.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor, nn

from nmtkit.data.dictionary import PAD_ID
from nmtkit.models.attention import ATTENTION_TYPES, SCORE_FUNCTIONS, LuongAttention
from nmtkit.models.base import DecoderState, EncoderOutput, Seq2SeqModel
from nmtkit.models.common import (
    BaseConfig,
    batch_first,
    layers_first,
    lengths_to_mask,
    require,
    require_choice,
    rnn_step,
)
from nmtkit.models.encoders import RNNEncoder
from nmtkit.models.registry import register_model


@dataclass
class LuongConfig(BaseConfig):
    """Options of the ``luong`` model (see the module docstring)."""

    embed_dim: int = 256
    hidden_size: int = 256
    layers: int = 2
    dropout: float = 0.2
    #: none | global | local-m | local-p
    attention: str = "global"
    #: dot | general | concat | location
    score: str = "general"
    input_feeding: bool = True
    #: Half-width D of the local attention window [p_t - D, p_t + D].
    window: int = 10
    #: Positions the ``location`` score can address; source tokens beyond get zero weight.
    max_source_positions: int = 100

    def validate(self) -> None:
        super().validate()
        require_choice("attention", self.attention, ATTENTION_TYPES)
        require_choice("score", self.score, SCORE_FUNCTIONS)
        require(
            not (self.input_feeding and self.attention == "none"),
            "input_feeding needs attention (it feeds the attentional state h~_t); "
            "use attention global/local-m/local-p or input_feeding false",
        )
        if self.attention in ("local-m", "local-p"):
            require(self.window >= 1, f"local attention needs window >= 1, got {self.window}")
        if self.attention != "none" and self.score == "location":
            require(
                self.max_source_positions >= 1,
                f"location score needs max_source_positions >= 1, got {self.max_source_positions}",
            )


@register_model("luong")
class LuongModel(Seq2SeqModel):
    """Stacked LSTM encoder-decoder with Luong attention, input feeding and dropout."""

    Config = LuongConfig

    def __init__(self, cfg: LuongConfig, src_dict, tgt_dict) -> None:  # noqa: ANN001
        super().__init__(cfg, src_dict, tgt_dict)
        self.has_attention = cfg.attention != "none"
        self.input_feeding = cfg.input_feeding
        h = cfg.hidden_size
        self.encoder = RNNEncoder(
            len(src_dict), cfg.embed_dim, h, cfg.layers, cell="lstm",
            dropout=cfg.dropout, reverse_source=cfg.source_reversal,
        )
        self.tgt_embed = nn.Embedding(len(tgt_dict), cfg.embed_dim, padding_idx=PAD_ID)
        dec_input = cfg.embed_dim + (h if cfg.input_feeding else 0)
        self.decoder = nn.LSTM(
            dec_input, h, num_layers=cfg.layers, batch_first=True,
            dropout=cfg.dropout if cfg.layers > 1 else 0.0,
        )
        self.dropout = nn.Dropout(cfg.dropout)
        if self.has_attention:
            self.attention = LuongAttention(
                h, cfg.attention, cfg.score, cfg.window, cfg.max_source_positions
            )
            self.W_c = nn.Linear(2 * h, h, bias=False)
        self.output_projection = nn.Linear(h, len(tgt_dict))

    # -- encoder ---------------------------------------------------------------------------
    def encode(self, src_tokens: Tensor, src_lengths: Tensor) -> EncoderOutput:
        enc = self.encoder(src_tokens, src_lengths)
        extra = {"h0": batch_first(enc.h_n), "c0": batch_first(enc.c_n)}
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

    def _attend(self, top: Tensor, enc: EncoderOutput, steps: Tensor) -> tuple[Tensor, Optional[Tensor]]:
        """Top decoder states ``[B, T, H]`` -> (attentional states ``[B, T, H]``, weights)."""
        if not self.has_attention:
            return top, None
        context, weights = self.attention(top, enc.states, enc.mask, enc.extra.get("keys"), steps)
        return torch.tanh(self.W_c(torch.cat([context, top], dim=-1))), weights

    def _step(
        self, emb: Tensor, state: DecoderState, enc: EncoderOutput
    ) -> tuple[Tensor, Optional[Tensor], DecoderState]:
        """One step from embedded previous tokens ``[N, E]`` -> (h~ ``[N, 1, H]``, weights
        ``[N, 1, S]`` or None, new state).  Shared by decode_step and forward."""
        x = torch.cat([emb, state["feed"]], dim=-1) if self.input_feeding else emb
        top, h, c = rnn_step(self.decoder, self.dropout(x), state["h"], state["c"])
        htilde, weights = self._attend(top.unsqueeze(1), enc, state["step"].unsqueeze(1))
        new_state = {"h": h, "c": c, "step": state["step"] + 1}
        if self.input_feeding:
            new_state["feed"] = htilde.squeeze(1)
        return htilde, weights, new_state

    def decode_step(
        self, prev_tokens: Tensor, state: DecoderState, enc: EncoderOutput
    ) -> tuple[Tensor, Optional[Tensor], DecoderState]:
        htilde, weights, new_state = self._step(self.tgt_embed(prev_tokens), state, enc)
        logits = self.output_projection(self.dropout(htilde.squeeze(1)))
        attn = weights.squeeze(1) if weights is not None else None
        return torch.log_softmax(logits, dim=-1), attn, new_state

    def forward(
        self, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor
    ) -> tuple[Tensor, Optional[Tensor]]:
        enc = self.encode(src_tokens, src_lengths)
        state = self.init_decoder_state(enc)
        emb = self.tgt_embed(prev_output_tokens)  # [B, T, E]
        if self.input_feeding:
            # h~_{t-1} feeds step t, so the decoder must run one step at a time.
            outs, attns = [], []
            for t in range(emb.size(1)):
                htilde, weights, state = self._step(emb[:, t], state, enc)
                outs.append(htilde)
                attns.append(weights)
            htilde = torch.cat(outs, dim=1)
            attn = torch.cat(attns, dim=1) if self.has_attention else None
        else:
            top, _ = self.decoder(
                self.dropout(emb), (layers_first(state["h"]), layers_first(state["c"]))
            )
            bsz, tgt_len = prev_output_tokens.shape
            steps = torch.arange(tgt_len, device=emb.device)[None, :].expand(bsz, tgt_len)
            htilde, attn = self._attend(top, enc, steps)
        return self.output_projection(self.dropout(htilde)), attn
