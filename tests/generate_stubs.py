"""Stub models for the search/forced-decoding tests (not collected by pytest).

``TableModel``: next-token probabilities come from a Python function of (source words,
output prefix), so expected beam-search results can be computed by hand.
``TinyLSTM``: a small random attentional LSTM that handles padding properly, for checks that
batched search equals one-sentence-at-a-time search on a "real-ish" model.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import Tensor, nn

from nmtkit.data.dictionary import BOS_ID, EOS_ID, Dictionary
from nmtkit.models.base import EncoderOutput, Seq2SeqModel

SPECIAL_FREE = ("<pad>", "<s>", "<unk>")


def make_dict(words: list[str]) -> Dictionary:
    d = Dictionary()
    for w in words:
        d.add(w)
    return d


def default_attention(n_src: int, t: int) -> list[float]:
    """A deterministic, step-dependent distribution over ``n_src`` positions (incl. </s>)."""
    w = [1.0 / (1.0 + abs(j - t)) for j in range(n_src)]
    z = sum(w)
    return [x / z for x in w]


DistFn = Callable[[tuple[str, ...], tuple[str, ...]], dict[str, float]]


def table_fn(table: dict[str, dict[str, float]], default: Optional[dict[str, float]] = None) -> DistFn:
    """Prefix-only table: key is the space-joined output prefix ("" at the start)."""
    default = default if default is not None else {"</s>": 1.0}
    return lambda src, prefix: table.get(" ".join(prefix), default)


class TableModel(Seq2SeqModel):
    """Listed probabilities are used as given; the leftover mass ``1 - sum`` is spread evenly
    over the unlisted ordinary tokens and ``</s>`` (never ``<pad>``, ``<s>``, ``<unk>``)."""

    def __init__(self, src_dict: Dictionary, tgt_dict: Dictionary, fn: DistFn, attention: bool = True) -> None:
        super().__init__(None, src_dict, tgt_dict)
        self.fn = fn
        self.has_attention = attention
        self.output_projection = nn.Identity()  # forward_features returns the log-probs themselves
        self.rows = 0  # rows decoded so far, to check that finished sentences leave the batch

    def _probs(self, src: tuple[str, ...], prefix: tuple[str, ...]) -> list[float]:
        listed = self.fn(src, prefix)
        symbols = self.tgt_dict.symbols
        p = [0.0] * len(symbols)
        for w, q in listed.items():
            p[self.tgt_dict.index[w]] = q
        rest = [i for i, s in enumerate(symbols) if s not in SPECIAL_FREE and s not in listed]
        left = 1.0 - sum(listed.values())
        if rest and left > 1e-12:
            for i in rest:
                p[i] = left / len(rest)
        return p

    def encode(self, src_tokens: Tensor, src_lengths: Tensor) -> EncoderOutput:
        mask = src_tokens.ne(0)
        return EncoderOutput(states=mask.float().unsqueeze(2), mask=mask, extra={"src": src_tokens})

    #: The longest output a table model decodes (its state has a fixed shape, as real models' do).
    MAX_PREFIX = 64

    def init_decoder_state(self, enc: EncoderOutput) -> dict[str, Tensor]:
        n = enc.mask.size(0)
        return {"prefix": enc.mask.new_zeros((n, self.MAX_PREFIX), dtype=torch.long),
                "length": enc.mask.new_zeros(n, dtype=torch.long)}

    def decode_step(self, prev_tokens, state, enc, need_attention=True):
        self.rows += prev_tokens.size(0)
        prefix, length = state["prefix"].clone(), state["length"] + 1
        prefix[torch.arange(prefix.size(0)), state["length"]] = prev_tokens
        rows_p, rows_a = [], []
        width = enc.mask.size(1)
        for r in range(prefix.size(0)):
            ids = enc.extra["src"][r][enc.mask[r]].tolist()
            src = tuple(self.src_dict[i] for i in ids[:-1])
            out = tuple(self.tgt_dict[i] for i in prefix[r, 1:int(length[r])].tolist())
            rows_p.append(self._probs(src, out))
            a = default_attention(len(ids), len(out))
            rows_a.append(a + [0.0] * (width - len(a)))
        lp = torch.tensor(rows_p).log()
        attn = torch.tensor(rows_a) if self.has_attention else None
        return lp, attn, {"prefix": prefix, "length": length}

    def forward_features(self, src_tokens, src_lengths, prev_output_tokens, need_attention=True):
        return step_forward(self, src_tokens, src_lengths, prev_output_tokens)


def step_forward(model: Seq2SeqModel, src_tokens: Tensor, src_lengths: Tensor, prev: Tensor):
    """Teacher forcing by looping decode_step (the stubs' forward)."""
    enc = model.encode(src_tokens, src_lengths)
    state = model.init_decoder_state(enc)
    lps, attns = [], []
    for t in range(prev.size(1)):
        lp, a, state = model.decode_step(prev[:, t], state, enc)
        lps.append(lp)
        attns.append(a)
    attn = torch.stack(attns, 1) if attns[0] is not None else None
    return torch.stack(lps, 1), attn


@dataclass
class TinyConfig:
    emb: int = 8
    hidden: int = 16
    seed: int = 0
    eos_bias: float = 0.0  # added to the </s> output bias: makes hypotheses end at varied lengths


class TinyLSTM(Seq2SeqModel):
    """Random attentional LSTM: packed encoder (padding-exact), LSTMCell decoder, dot attention."""

    def __init__(self, src_dict: Dictionary, tgt_dict: Dictionary, cfg: TinyConfig = TinyConfig(), attention: bool = True) -> None:
        super().__init__(cfg, src_dict, tgt_dict)
        g = torch.Generator().manual_seed(cfg.seed)
        self.has_attention = attention
        self.src_emb = nn.Embedding(len(src_dict), cfg.emb, padding_idx=0)
        self.tgt_emb = nn.Embedding(len(tgt_dict), cfg.emb, padding_idx=0)
        self.enc = nn.LSTM(cfg.emb, cfg.hidden, batch_first=True)
        self.dec = nn.LSTMCell(cfg.emb, cfg.hidden)
        self.out = nn.Linear(2 * cfg.hidden, len(tgt_dict))
        self.output_projection = nn.Identity()  # forward_features returns shifted log-probs as logits
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.8)
            self.out.bias[EOS_ID] += cfg.eos_bias

    def encode(self, src_tokens, src_lengths):
        packed = nn.utils.rnn.pack_padded_sequence(
            self.src_emb(src_tokens), src_lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        out, (h, c) = self.enc(packed)
        states, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=src_tokens.size(1))
        return EncoderOutput(states=states, mask=src_tokens.ne(0), extra={"h": h[-1], "c": c[-1]})

    def init_decoder_state(self, enc):
        return {"h": enc.extra["h"], "c": enc.extra["c"]}

    def decode_step(self, prev_tokens, state, enc, need_attention=True):
        h, c = self.dec(self.tgt_emb(prev_tokens), (state["h"], state["c"]))
        if self.has_attention:
            e = torch.bmm(enc.states, h.unsqueeze(2)).squeeze(2).masked_fill(~enc.mask, -math.inf)
            a = torch.softmax(e, dim=1)
            ctx = torch.bmm(a.unsqueeze(1), enc.states).squeeze(1)
        else:
            a = None
            m = enc.mask.unsqueeze(2).float()
            ctx = (enc.states * m).sum(1) / m.sum(1)
        lp = torch.log_softmax(self.out(torch.cat([h, ctx], dim=1)), dim=-1)
        return lp, a, {"h": h, "c": c}

    def forward_features(self, src_tokens, src_lengths, prev_output_tokens, need_attention=True):
        lp, a = step_forward(self, src_tokens, src_lengths, prev_output_tokens)
        return lp * 1.0 + 3.0, a  # logits up to a constant: log_softmax must undo the shift


def pad_batch(seqs: list[list[int]]) -> tuple[Tensor, Tensor]:
    """Right-pad id lists (each already ending with </s>)."""
    n = max(len(s) for s in seqs)
    toks = torch.zeros(len(seqs), n, dtype=torch.long)
    for i, s in enumerate(seqs):
        toks[i, : len(s)] = torch.tensor(s)
    return toks, torch.tensor([len(s) for s in seqs])


def lstm_dicts(n_src: int = 9, n_tgt: int = 11) -> tuple[Dictionary, Dictionary]:
    return make_dict([f"s{i}" for i in range(n_src)]), make_dict([f"t{i}" for i in range(n_tgt)])


__all__ = ["BOS_ID", "EOS_ID", "TableModel", "TinyLSTM", "TinyConfig", "make_dict", "pad_batch", "table_fn", "lstm_dicts", "default_attention"]
