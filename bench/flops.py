"""Training FLOPs per target token of the recurrent models compared in bench/train_speed.py.

Counted from the layer shapes: multiply-accumulates of every matrix product of one forward
step (embedding lookups, element-wise ops and softmaxes are left out, they are small), times 2
for FLOPs, times 3 for forward plus backward (the backward of a product costs two products).
Padding is not counted.  ``r`` is source tokens per target token and ``s`` the mean source
length, both measured on the training data.  The figures let a throughput ratio between two
different architectures be read per unit of arithmetic.
"""
from __future__ import annotations


def gru_macs(inp: int, hidden: int) -> int:
    """One GRU step: three gates, each an input and a recurrent product."""
    return 3 * hidden * (inp + hidden)


def rnnsearch_macs(e: int, h: int, a: int, m: int, v: int, s: float, r: float) -> float:
    """nmtkit rnnsearch (Bahdanau et al.): biGRU encoder with precomputed attention keys, GRU
    decoder fed [y_{i-1}; c_i], additive attention, maxout deep output, output projection."""
    encoder = r * (2 * gru_macs(e, h) + a * 2 * h)
    attention = a * h + s * a + s * 2 * h  # query projection, v^T tanh(.) per position, context sum
    decoder = gru_macs(e + 2 * h, h) + attention
    output = (h + e + 2 * h) * 2 * m + m * v
    return encoder + decoder + output


def marian_s2s_macs(e: int, h: int, v: int, s: float, r: float) -> float:
    """Marian --type s2s with GRU cells (Nematus): biGRU encoder, conditional GRU decoder (a GRU on
    y_{i-1}, MLP attention of width 2h, a second GRU on the context), deep output of width e."""
    a = 2 * h
    encoder = r * (2 * gru_macs(e, h) + 2 * h * a)
    attention = h * a + s * a + s * 2 * h
    decoder = gru_macs(e, h) + attention + gru_macs(2 * h, h)
    output = (h + e + 2 * h) * e + e * v
    return encoder + decoder + output


def train_flops(macs: float) -> float:
    """Forward and backward FLOPs from forward multiply-accumulates."""
    return 3 * 2 * macs
