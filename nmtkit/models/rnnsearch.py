"""RNNsearch (Bahdanau, Cho & Bengio 2015): bidirectional GRU encoder, additive attention,
GRU decoder with a maxout deep output.

* Annotations ``h_j = [->h_j; <-h_j]`` (top layer of a stacked bidirectional GRU).
* ``s_0 = tanh(W_s <-h_1)``: the backward encoder state at the first word the encoder
  read (the backward RNN's final state), one projection per decoder layer.
* Step ``i``: ``c_i`` attends from the previous top decoder state ``s_{i-1}``;
  ``t~_i = U_o s_{i-1} + V_o E y_{i-1} + C_o c_i`` (one linear map over the concatenation),
  ``t_i = maxout(t~_i)`` with pool size 2 (``maxout_size`` units), logits ``= W_o t_i``;
  then ``s_i = GRU([E y_{i-1}; c_i], s_{i-1})`` for the next step (appendix A.2.2).

Dropout (off in the paper's preset) applies to the embeddings (``dropout_embed``), between
stacked layers (``dropout_hidden``) and to ``t_i`` before the output layer (``dropout_output``).

``alignment_head`` (not in the paper): a second :class:`~nmtkit.models.attention.AdditiveAttention`
whose query is ``[s_{i-1}; E y_i]``, i.e. it also sees the word it aligns (the decoder's own
attention is computed before ``y_i`` is chosen, so it can only guess where the next word comes
from).  It feeds nothing into the translation and is trained only by the guided-alignment loss
(in the spirit of Garg et al. 2019).  Teacher-forced ``forward`` then reports its weights as the
attention (what ``nmtkit-align`` and the guided-alignment loss read); beam search, which does
not know ``y_i``, keeps the decoder's own attention.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor, nn

from nmtkit.data.dictionary import EOS_ID, PAD_ID
from nmtkit.models.attention import AdditiveAttention
from nmtkit.models.base import DecoderState, EncoderOutput, Seq2SeqModel, log_probs, rows_per_sentence
from nmtkit.models.dropout import Dropout
from nmtkit.models.common import BaseConfig, lengths_to_mask, option, require_at_least, rnn_step, tie_embeddings
from nmtkit.models.encoders import RNNEncoder
from nmtkit.models.gemm import Linear, LoopWeight, linear, tanh
from nmtkit.models.loop_graphs import LoopSpec
from nmtkit.models.posterior import attention_posterior, context_log_likelihoods
from nmtkit.models.registry import register_model


#: The roles of :meth:`RNNSearchModel._steps`' tensors (emb, s_0, states, mask, keys -> prev tops, outputs, attention).
STEPS_SPEC = LoopSpec((("B", "T", None), ("B", None, None), ("B", "S", None), ("B", "S"), ("B", "S", None)),
                      (("B", "T", None), ("B", "T", None), ("B", "T", "S")), mask=3)


@dataclass
class RNNSearchConfig(BaseConfig):
    """Options of the ``rnnsearch`` model; ``hidden_size`` is per direction in the encoder."""

    embed_dim: int = 256
    hidden_size: int = 256
    layers: int = 1
    dropout: float = 0.0
    attention_dim: int = option(256, "Hidden units of the alignment model (n' in the paper).")
    maxout_size: int = option(256, "Units after maxout (l in the paper; in rnnencdec only with bahdanau_decoder).")
    alignment_head: bool = option(False, "An extra attention that also sees the target word it aligns, trained "
                                  "only by --guided-alignment-weight; nmtkit-align reads it (the decoder's "
                                  "attention cannot know that word).")

    def validate(self) -> None:
        super().validate()
        require_at_least("attention_dim", self.attention_dim, 1)
        require_at_least("maxout_size", self.maxout_size, 1)


@register_model("rnnsearch")
class RNNSearchModel(Seq2SeqModel):
    """Bahdanau et al.'s jointly aligning and translating model."""

    Config = RNNSearchConfig
    shares_encoder_rows = True
    has_posterior = True

    def __init__(self, cfg: RNNSearchConfig, src_dict, tgt_dict) -> None:  # noqa: ANN001
        super().__init__(cfg, src_dict, tgt_dict)
        h = cfg.hidden_size
        self.encoder = RNNEncoder(
            len(src_dict), cfg.embed_dim, h, cfg.layers, cell="gru", bidirectional=True,
            dropout=cfg.dropout_rate("embed"), reverse_source=cfg.source_reversal,
            layer_dropout=cfg.dropout_rate("hidden"), soft_match=cfg.encoder_self_attention,
        )
        self.W_s = Linear(h, cfg.layers * h)
        self.attention = AdditiveAttention(h, 2 * h, cfg.attention_dim)
        self.align_head = AdditiveAttention(h + cfg.embed_dim, 2 * h, cfg.attention_dim) if cfg.alignment_head else None
        self.needs_guided_alignment = cfg.alignment_head
        self.tgt_embed = nn.Embedding(len(tgt_dict), cfg.embed_dim, padding_idx=PAD_ID)
        self.decoder = nn.GRU(
            cfg.embed_dim + 2 * h, h, num_layers=cfg.layers, batch_first=True,
            dropout=cfg.dropout_rate("hidden") if cfg.layers > 1 else 0.0,
        )
        self.deep_output = Linear(h + cfg.embed_dim + 2 * h, 2 * cfg.maxout_size)
        self.embed_dropout = Dropout(cfg.dropout_rate("embed"))
        self.output_dropout = Dropout(cfg.dropout_rate("output"))
        self.output_projection = Linear(cfg.maxout_size, len(tgt_dict))
        tie_embeddings(self, self.encoder.embed, self.tgt_embed, self.output_projection)

    def encode(self, src_tokens: Tensor, src_lengths: Tensor) -> EncoderOutput:
        enc = self.encoder(src_tokens, src_lengths)
        extra = {
            "keys": self.attention.precompute_keys(enc.outputs),
            # h_n[-1]: top layer, backward direction, i.e. its state at the first word read.
            "backward_first": enc.h_n[-1],
        }
        mask = lengths_to_mask(src_lengths, src_tokens.size(1))
        return EncoderOutput(states=enc.outputs, mask=mask, extra=extra)

    def init_decoder_state(self, enc: EncoderOutput) -> DecoderState:
        init = enc.extra["backward_first"]
        s0 = tanh(self.W_s(init)).view(init.size(0), self.cfg.layers, self.cfg.hidden_size)
        return {"s": s0}

    def _step(
        self, emb: Tensor, state: DecoderState, enc: EncoderOutput, context_product: Optional[LoopWeight] = None
    ) -> tuple[Tensor, Tensor, DecoderState]:
        """Embedded previous tokens ``[N, E]`` (dropout applied) -> (maxout output ``t_i``
        ``[N, M]``, attention ``[N, S]``, new state).  Shared by decode_step and forward (whose
        step loop passes its ``context_product``, see :class:`AdditiveAttention`).
        (Forward's last ``s_i`` is never read, but computing it keeps every parameter in
        the graph even for one-step batches, which DistributedDataParallel requires.)"""
        s_prev = state["s"]
        top = s_prev[:, -1]
        g = rows_per_sentence(top.size(0), enc)
        if g == 1:
            context, weights = self.attention(top, enc.states, enc.mask, enc.extra["keys"], context_product)
        else:  # g hypotheses of one sentence attend to its states together (beam search)
            context, weights = self.attention(top.view(-1, g, top.size(1)), enc.states, enc.mask, enc.extra["keys"])
            context, weights = context.reshape(top.size(0), -1), weights.reshape(top.size(0), -1)
        t = maxout(self.deep_output(torch.cat([top, emb, context], dim=-1)))
        _, s_new, _ = rnn_step(self.decoder, torch.cat([emb, context], dim=-1), s_prev)
        return t, weights, {"s": s_new}

    def decode_step(
        self, prev_tokens: Tensor, state: DecoderState, enc: EncoderOutput, need_attention: bool = True
    ) -> tuple[Tensor, Optional[Tensor], DecoderState]:
        t, weights, new_state = self._step(self.embed_dropout(self.tgt_embed(prev_tokens)), state, enc)
        logits = self.project_output(self.output_dropout(t))
        return log_probs(logits), weights, new_state

    def _teacher_forced(
        self, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor
    ) -> tuple[EncoderOutput, Tensor, Tensor, Tensor, Tensor]:
        """All steps given the previous words -> (encoder output, embedded inputs ``[B, T, E]``,
        previous top states ``s_{i-1}`` ``[B, T, H]``, maxout outputs ``t_i`` ``[B, T, M]``,
        decoder attention ``[B, T, S]``)."""
        enc = self.encode(src_tokens, src_lengths)
        s0 = self.init_decoder_state(enc)["s"]
        emb = self.embed_dropout(self.tgt_embed(prev_output_tokens))
        graphs = self.loop_graphs
        if graphs is not None and graphs.applies(emb):
            prev_tops, outs, attn = graphs.run(self, "_steps", STEPS_SPEC, (emb, s0, enc.states, enc.mask, enc.extra["keys"]))
        else:
            prev_tops, outs, attn = self._steps(emb, s0, enc.states, enc.mask, enc.extra["keys"])
        return enc, emb, prev_tops, outs, attn

    def _steps(self, emb: Tensor, s0: Tensor, states: Tensor, mask: Tensor, keys: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The teacher-forced step loop on tensors alone (the form :class:`LoopGraphs` captures):
        embedded inputs ``[B, T, E]`` and ``s_0`` ``[B, layers, H]`` -> (previous top states,
        maxout outputs, attention), each ``[B, T, *]``."""
        enc = EncoderOutput(states=states, mask=mask, extra={"keys": keys})
        state: DecoderState = {"s": s0}
        outs, attns, prev_tops = [], [], []
        context_product = LoopWeight(states.transpose(1, 2))  # state gradients: one bmm for all steps
        # unbind once (not emb[:, i] per step, whose backward zero-fills [B, T, E] every step)
        for emb_i in emb.unbind(1):  # c_i depends on s_{i-1}: inherently step by step
            prev_tops.append(state["s"][:, -1])
            t, weights, state = self._step(emb_i, state, enc, context_product)
            outs.append(t)
            attns.append(weights)
        return torch.stack(prev_tops, dim=1), torch.stack(outs, dim=1), torch.stack(attns, dim=1)

    def forward_features(
        self, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor, need_attention: bool = True
    ) -> tuple[Tensor, Optional[Tensor]]:
        enc, _, prev_tops, outs, attn = self._teacher_forced(src_tokens, src_lengths, prev_output_tokens)
        features = self.output_dropout(outs)
        if self.align_head is None:
            return features, attn
        if not need_attention:
            return features, None
        target_emb = self.embed_dropout(self.tgt_embed(next_tokens(prev_output_tokens)))
        query = torch.cat([prev_tops, target_emb], dim=-1)  # [B, T, H + E]: all steps at once
        _, weights = self.align_head(query, enc.states, enc.mask, self.align_head.precompute_keys(enc.states))
        return features, weights

    def forward_with_posterior(
        self, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor, targets: Tensor
    ) -> tuple[Tensor, Tensor]:
        # t~_i = U_o s_{i-1} + V_o E y_{i-1} + C_o c_i: the C_o part is linear in the context
        enc, emb, prev_tops, outs, attn = self._teacher_forced(src_tokens, src_lengths, prev_output_tokens)
        logits = self.output_projection(self.output_dropout(outs))
        split = prev_tops.size(-1) + emb.size(-1)
        w = self.deep_output.weight
        query_part = linear(torch.cat([prev_tops, emb], dim=-1), w[:, :split], self.deep_output.bias)
        context_part = linear(enc.states, w[:, split:])
        loglik = context_log_likelihoods(query_part, context_part, lambda x: self.output_projection(maxout(x)),
                                         targets, src_lengths, self.output_projection.out_features)
        return logits, attention_posterior(attn, loglik, enc.mask)


def maxout(x: Tensor) -> Tensor:
    """Max over consecutive pairs of the last dimension (pool size 2): ``[..., 2M] -> [..., M]``."""
    return x.view(*x.shape[:-1], -1, 2).max(dim=-1).values

def next_tokens(prev_output_tokens: Tensor) -> Tensor:
    """``<s> y_1 .. y_{n-1}`` (right-padded) -> ``y_1 .. y_{n-1} </s>``: the word each step emits."""
    lengths = prev_output_tokens.ne(PAD_ID).sum(dim=1)
    out = torch.cat([prev_output_tokens[:, 1:], prev_output_tokens.new_full((prev_output_tokens.size(0), 1), PAD_ID)], 1)
    out[torch.arange(out.size(0), device=out.device), lengths - 1] = EOS_ID
    return out
