"""The recurrent source encoder shared by all models: embeddings, optional source reversal,
a cuDNN-able stacked ``nn.LSTM``/``nn.GRU`` over packed sequences (padding is never read).

For float32 on the CPU the same weights run as a step loop instead (:func:`masked_rnn`): ATen
steps a packed CPU RNN one time step at a time anyway (oneDNN's fused RNN takes no packed
input), and its backward pass zero-fills and adds a full ``[source tokens, 4H]`` gradient at every
step (6-8 % of a ``luong_small`` update on an Intel Xeon).  The loop makes one product per layer
for the inputs of all steps (by :mod:`nmtkit.models.gemm`'s oneDNN or MKL) and one per step for
the recurrence, sums the recurrent weight's gradient once (:class:`~nmtkit.models.gemm.LoopWeight`),
and keeps each sentence's state fixed past its length (so padding is never read either).

Source reversal (Sutskever et al. 2014) reverses the real tokens of each sentence except the
final ``</s>``, which stays last so the encoder always ends on the end-of-sentence marker;
the outputs are un-reversed with the same permutation before they are returned, so callers
always see annotations in the original source order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, cast

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmtkit.data.dictionary import PAD_ID
from nmtkit.models import gemm
from nmtkit.models.common import lengths_to_mask
from nmtkit.models.dropout import Dropout, dropout


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
        soft_match: bool = False,
    ) -> None:
        """``dropout`` applies to the embeddings, ``layer_dropout`` (default: ``dropout``)
        between stacked layers; ``soft_match``: each position also reads its :func:`soft_match`
        over the embedded sentence beside its own embedding, scored by the states of a one-layer
        RNN of the same cell and directions (``match_rnn``) over the embeddings."""
        super().__init__()
        if cell not in ("lstm", "gru"):
            raise ValueError(f"cell must be lstm or gru, got {cell!r}")
        self.cell = cell
        self.reverse_source = reverse_source
        self.soft_match = soft_match
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD_ID)
        self.dropout = Dropout(dropout)
        rnn_cls = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn_cls(
            2 * embed_dim if soft_match else embed_dim,
            hidden_size,
            num_layers=layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=(dropout if layer_dropout is None else layer_dropout) if layers > 1 else 0.0,
        )
        # the lecture's h_i: source hidden states computed before the encoder reads x~ (a one-layer
        # RNN of its own: the encoder's first layer takes [x; x~], so it cannot score them itself)
        self.match_rnn = rnn_cls(embed_dim, hidden_size, batch_first=True, bidirectional=bidirectional) if soft_match else None

    def forward(self, src_tokens: Tensor, src_lengths: Tensor) -> RNNEncoding:
        width = src_tokens.size(1)
        index = reversal_index(src_lengths, width) if self.reverse_source else None
        if index is not None:
            src_tokens = src_tokens.gather(1, index)
        x = self.dropout(self.embed(src_tokens))
        if self.match_rnn is not None:
            states, _, _ = run_rnn(self.match_rnn, x, src_lengths)
            x = torch.cat([x, soft_match(states, x, lengths_to_mask(src_lengths.to(x.device), width))], -1)
        outputs, h_n, c_n = run_rnn(self.rnn, x, src_lengths)
        if index is not None:
            outputs = outputs.gather(1, index.unsqueeze(-1).expand_as(outputs))
        return RNNEncoding(outputs=outputs, h_n=h_n, c_n=c_n)


def run_rnn(rnn: Any, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor, Optional[Tensor]]:
    """``rnn`` over the padded batch ``x`` ``[B, T, I]`` with ``lengths``: the step loop of
    :func:`masked_rnn` for float32 on the CPU (:func:`~nmtkit.models.gemm.cpu_float32`, or where
    the module brings its own products), else PyTorch's packed RNN (cuDNN on a GPU) -> (outputs
    ``[B, T, H * directions]``, zeros at padding; ``h_n``; ``c_n`` or None for a GRU)."""
    if type(rnn) in RNN_PRODUCTS or (type(rnn) in (nn.LSTM, nn.GRU) and gemm.cpu_float32(x, cast(Tensor, rnn.weight_ih_l0))):
        return masked_rnn(rnn, x, lengths)
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, hidden = rnn(packed)
    outputs, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
    return (outputs, *hidden) if isinstance(hidden, tuple) else (outputs, hidden, None)


def soft_match(h: Tensor, x: Tensor, mask: Tensor) -> Tensor:
    """The lecture's self-attention ("Extensions of Attention"): each position's soft match over
    its sentence, ``x~_i = sum_j beta_ij x_j`` with ``beta_ij = softmax_j(h_i . h_j / sqrt(d))``
    over the real positions (``mask`` ``[B, S]``, True there); ``h`` ``[B, S, d]`` are source
    hidden states, ``x`` ``[B, S, E]`` the embeddings -> ``[B, S, E]``.  The slide leaves the
    scale out; without it the dot products of hundreds of tanh-bounded state values (d = 256 for
    ``luong_m30k``'s 2 x 128) make each row nearly one-hot on its own position (so x~_i = x_i),
    hence Vaswani et al.'s 1/sqrt(d).  Given ``h``, permuting the positions permutes the result;
    ``h`` itself comes from an RNN over the sentence as the encoder reads it (reversed or not)."""
    scores = torch.bmm(h, h.transpose(1, 2)).float() / h.size(-1) ** 0.5
    beta = torch.softmax(scores.masked_fill(~mask[:, None, :], float("-inf")), dim=-1)
    return torch.bmm(beta.to(x.dtype), x)


#: The two products of one layer and direction of a recurrent module: (input product over all
#: steps ``[B, T, I] -> [B, T, G]``, with the LSTM's two biases or the GRU's input bias; recurrent
#: product of one step ``[B, H] -> [B, G]``, with the GRU's hidden bias).
Products = tuple[Callable[[Tensor], Tensor], Callable[[Tensor], Tensor]]

#: Module type -> ``(module, layer, direction) -> Products`` for recurrent modules that are not
#: ``nn.LSTM``/``nn.GRU`` (the int8 RNN of :mod:`nmtkit.generate.quantize` registers here, so the
#: models stay float-only); such a module has ``is_lstm``, ``num_layers``, ``bidirectional``,
#: ``hidden_size`` and ``dropout`` as ``nn.LSTM`` has.
RNN_PRODUCTS: dict[type, Callable[[nn.Module, int, int], Products]] = {}


def float_products(rnn: Any, layer: int, direction: int) -> Products:
    """The products of an ``nn.LSTM``/``nn.GRU``'s weights by :mod:`nmtkit.models.gemm`."""
    sfx = f"_l{layer}" + ("_reverse" if direction else "")
    w_ih, w_hh = getattr(rnn, "weight_ih" + sfx), getattr(rnn, "weight_hh" + sfx)
    b_ih, b_hh = getattr(rnn, "bias_ih" + sfx, None), getattr(rnn, "bias_hh" + sfx, None)
    if isinstance(rnn, nn.LSTM):  # both biases go in with the input product, once for all steps
        bias = b_ih + b_hh if b_ih is not None else None
        # the recurrent weight's gradient: one product over all steps (gemm.LoopWeight)
        return (lambda inp: gemm.linear(inp, w_ih, bias)), gemm.LoopWeight(w_hh)
    # a GRU's hidden bias sits inside r * (W_hn h + b_hn)
    return (lambda inp: gemm.linear(inp, w_ih, b_ih)), gemm.LoopWeight(w_hh, b_hh)


def masked_rnn(rnn: Any, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor, Optional[Tensor]]:
    """What ``rnn`` (a batch-first ``nn.LSTM``/``nn.GRU``, or a module of :data:`RNN_PRODUCTS`)
    returns for the packed ``x`` ``[B, T, I]`` with ``lengths``, as a step loop over its products
    -> (outputs ``[B, T, H * directions]``, zeros at padding; ``h_n``; ``c_n`` or None for a GRU)."""
    own = RNN_PRODUCTS.get(type(rnn))
    products = own or float_products
    is_lstm = rnn.is_lstm if own else isinstance(rnn, nn.LSTM)
    bsz, width, _ = x.shape
    real = (torch.arange(width, device=x.device)[None, :] < lengths.to(x.device)[:, None]).unsqueeze(-1)  # [B, T, 1]
    inp, h_n, c_n = x, [], []
    for layer in range(rnn.num_layers):
        if layer and rnn.training and rnn.dropout > 0:
            inp = dropout(inp, rnn.dropout, training=True)
        outs = []
        for direction in range(2 if rnn.bidirectional else 1):
            input_product, recurrent = products(rnn, layer, direction)
            pre = input_product(inp).unbind(1)
            h = x.new_zeros(bsz, rnn.hidden_size)
            c = x.new_zeros(bsz, rnn.hidden_size) if is_lstm else None
            steps: list[Optional[Tensor]] = [None] * width
            for t in (range(width - 1, -1, -1) if direction else range(width)):
                keep = real[:, t]
                if is_lstm:
                    h_t, c_t = gemm.lstm_update(pre[t] + recurrent(h), cast(Tensor, c))
                    c = torch.where(keep, c_t, cast(Tensor, c))
                else:
                    h_t = gemm.gru_update(pre[t], recurrent(h), h)
                h = torch.where(keep, h_t, h)
                steps[t] = h_t * keep
            outs.append(torch.stack(cast("list[Tensor]", steps), dim=1))
            h_n.append(h)
            if is_lstm:
                c_n.append(c)
        inp = torch.cat(outs, dim=-1) if len(outs) > 1 else outs[0]
    return inp, torch.stack(h_n), (torch.stack(cast("list[Tensor]", c_n)) if is_lstm else None)


def join_directions(state: Tensor) -> Tensor:
    """``[layers * 2, B, H]`` final states of a bidirectional RNN -> ``[layers, B, 2H]``
    (forward and backward state of each layer side by side), the input of a bridge."""
    two_l, bsz, h = state.shape
    return state.view(two_l // 2, 2, bsz, h).transpose(1, 2).reshape(two_l // 2, bsz, 2 * h)
