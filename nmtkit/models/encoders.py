"""The recurrent source encoder shared by all models: embeddings, optional source reversal,
a cuDNN-able stacked ``nn.LSTM``/``nn.GRU`` over packed sequences (padding is never read).

Source reversal (Sutskever et al. 2014) reverses the real tokens of each sentence except the
final ``</s>``, which stays last so the encoder always ends on the end-of-sentence marker;
the outputs are un-reversed with the same permutation before they are returned, so callers
always see annotations in the original source order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmtkit.data.dictionary import PAD_ID


def reversal_index(lengths: Tensor, width: int) -> Tensor:
    """``[B, width]`` gather index that reverses positions ``0 .. len-2`` of each row and
    keeps the last real position (``</s>``) and the padding in place.  It is its own inverse."""
    pos = torch.arange(width, device=lengths.device)[None, :].expand(lengths.size(0), width)
    last = (lengths - 1)[:, None]
    return torch.where(pos < last, last - 1 - pos, pos)


@dataclass
class RNNEncoding:
    """Encoder results: ``outputs`` ``[B, S, H * directions]`` in original order (zeros at
    padding), ``h_n`` (and ``c_n`` for LSTMs) ``[layers * directions, B, H]`` as PyTorch returns them."""

    outputs: Tensor
    h_n: Tensor
    c_n: Optional[Tensor]


class RNNEncoder(nn.Module):
    """Embedding -> dropout -> stacked (bi)LSTM/GRU over packed sequences."""

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        hidden_size: int,
        layers: int,
        cell: str = "lstm",
        bidirectional: bool = False,
        dropout: float = 0.0,
        reverse_source: bool = False,
        layer_dropout: Optional[float] = None,
    ) -> None:
        """``dropout`` applies to the embeddings, ``layer_dropout`` (default: ``dropout``)
        between stacked layers."""
        super().__init__()
        if cell not in ("lstm", "gru"):
            raise ValueError(f"cell must be lstm or gru, got {cell!r}")
        self.cell = cell
        self.reverse_source = reverse_source
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD_ID)
        self.dropout = nn.Dropout(dropout)
        rnn_cls = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn_cls(
            embed_dim,
            hidden_size,
            num_layers=layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=(dropout if layer_dropout is None else layer_dropout) if layers > 1 else 0.0,
        )

    def forward(self, src_tokens: Tensor, src_lengths: Tensor) -> RNNEncoding:
        width = src_tokens.size(1)
        index = reversal_index(src_lengths, width) if self.reverse_source else None
        if index is not None:
            src_tokens = src_tokens.gather(1, index)
        x = self.dropout(self.embed(src_tokens))
        packed = pack_padded_sequence(x, src_lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, hidden = self.rnn(packed)
        outputs, _ = pad_packed_sequence(out, batch_first=True, total_length=width)
        if index is not None:
            outputs = outputs.gather(1, index.unsqueeze(-1).expand_as(outputs))
        if self.cell == "lstm":
            h_n, c_n = hidden
        else:
            h_n, c_n = hidden, None
        return RNNEncoding(outputs=outputs, h_n=h_n, c_n=c_n)


def join_directions(state: Tensor) -> Tensor:
    """``[layers * 2, B, H]`` final states of a bidirectional RNN -> ``[layers, B, 2H]``
    (forward and backward state of each layer side by side), the input of a bridge."""
    two_l, bsz, h = state.shape
    return state.view(two_l // 2, 2, bsz, h).transpose(1, 2).reshape(two_l // 2, bsz, 2 * h)
