"""FLOPs per target token of every architecture the benchmarks time, and the share of peak.

Counted from the layer shapes: multiply-accumulates (MACs) of every matrix product of one
forward step (embedding lookups, element-wise ops and softmaxes are left out, they are small),
times 2 for FLOPs, times 3 for forward plus backward in training (the backward of a product
costs two products).  Padding is not counted.  Per target token, with

* ``r``: source tokens per target token, ``s``: mean source length, ``t``: mean target length
  (all measured on the training data, ``data_stats``); per-source-token work is counted ``r``
  times, per-sentence work (bridges, initial states) ``1 / t`` times.

``model_macs(model, cfg, ...)`` covers nmtkit's ``luong``, ``rnnsearch``, ``rnnencdec`` and
``transformer`` from their Config fields (a dict or the dataclass, ``arch_config`` resolves a
preset); ``marian_s2s_macs`` Marian's s2s with GRU cells.  ``share_of_peak`` turns a measured
throughput into a fraction of the host's probed peak (bench/host.py): every speed record
carries it, so a figure says how much of the machine it used, not just how fast it was.

The transformer count is the standard one (Vaswani et al.; Kaplan et al. 2020, table 1):
per layer the four attention projections ``4 d^2`` and the feed-forward ``2 d d_ff`` per token,
plus ``d`` per attended position for the scores and again for the weighted sum (over the target
positions actually computed in training, ``t``, as a causal mask is applied after the full
product; over ``s`` source positions in cross-attention, whose key and value projections
``2 d^2`` are per source token), and the output layer ``d V``.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping


def gru_macs(inp: int, hidden: int) -> int:
    """One GRU step: three gates, each an input and a recurrent product."""
    return 3 * hidden * (inp + hidden)


def lstm_macs(inp: int, hidden: int) -> int:
    """One LSTM step: four gates, each an input and a recurrent product."""
    return 4 * hidden * (inp + hidden)


def _cfg(cfg: Any) -> Mapping[str, Any]:
    return dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else dict(cfg)


def arch_config(arch: str, **overrides: Any) -> tuple[str, dict]:
    """(model name, Config fields as a dict) of an nmtkit preset with overrides, as nmtkit-train
    resolves them."""
    from nmtkit.models import registry

    model, cfg = registry.resolve_config(arch, overrides)
    return model, dataclasses.asdict(cfg)


# -- nmtkit's models ------------------------------------------------------------------------------
def luong_macs(cfg: Any, v: int, s: float, r: float, t: float) -> float:
    """nmtkit ``luong``: stacked LSTM encoder (uni- or bidirectional + bridge), stacked LSTM
    decoder with optional input feeding, Luong attention (dot/general/concat/location; global
    or a local window of 2D+1), ``h~ = tanh(W_c [c; h])``, the output layer."""
    c = _cfg(cfg)
    e, h, layers = c["embed_dim"], c["hidden_size"], c["layers"]
    bi = c.get("encoder_bidirectional", False)
    u = (c.get("encoder_hidden_size") or h // 2) if bi else h
    dirs = 2 if bi else 1
    ann = u * dirs
    enc = sum(dirs * lstm_macs(e if k == 0 else ann, u) for k in range(layers))
    per_sentence = 2 * (layers * ann) * (layers * h) if bi else 0
    attention = c.get("attention", "global")
    feed = c.get("input_feeding", True) and attention != "none"
    dec = sum(lstm_macs((e + (h if feed else 0)) if k == 0 else h, h) for k in range(layers))
    att, per_source = 0.0, 0.0
    if attention != "none":
        score = c.get("score", "general")
        span = s if attention == "global" else min(s, 2 * c.get("window", 10) + 1)
        if score in ("dot", "general"):
            att = span * (ann if score == "dot" else h) + span * ann
            per_source = ann * h if score == "general" else 0
        elif score == "concat":
            att = h * h + span * h + span * ann
            per_source = ann * h
        else:  # location
            att = h * c.get("max_source_positions", 100) + span * ann
        if attention == "local-p":
            att += h * h + h
        att += (ann + h) * h  # W_c
    out = h * v
    return r * (enc + per_source) + per_sentence / t + dec + att + out


def rnnsearch_macs(e: int, h: int, a: int, m: int, v: int, s: float, r: float, layers: int = 1, t: float = float("inf")) -> float:
    """nmtkit rnnsearch (Bahdanau et al.): biGRU encoder with precomputed attention keys, GRU
    decoder fed [y_{i-1}; c_i], additive attention, maxout deep output, output projection."""
    encoder = r * (sum(2 * gru_macs(e if k == 0 else 2 * h, h) for k in range(layers)) + a * 2 * h)
    attention = a * h + s * a + s * 2 * h  # query projection, v^T tanh(.) per position, context sum
    decoder = sum(gru_macs(e + 2 * h if k == 0 else h, h) for k in range(layers)) + attention
    output = (h + e + 2 * h) * 2 * m + m * v
    init = h * layers * h / t  # s_0 = tanh(W_s <-h_1), once per sentence
    return encoder + decoder + output + init


def rnnencdec_macs(cfg: Any, v: int, s: float, r: float, t: float) -> float:
    """nmtkit rnnencdec: stacked LSTM/GRU encoder and decoder, optional fixed context fed at
    every step, Bahdanau et al.'s decoder (s_0 = tanh(W_s c), maxout deep output)."""
    c = _cfg(cfg)
    e, h, layers = c["embed_dim"], c["hidden_size"], c["layers"]
    cell = lstm_macs if c.get("cell", "lstm") == "lstm" else gru_macs
    bahdanau = c.get("bahdanau_decoder", False)
    feed = c.get("feed_context", False) or bahdanau
    enc = sum(cell(e if k == 0 else h, h) for k in range(layers))
    dec = sum(cell((e + (h if feed else 0)) if k == 0 else h, h) for k in range(layers))
    if bahdanau:
        m = c.get("maxout_size", 500)
        out = (h + e + h) * 2 * m + m * v
        per_sentence = h * layers * h
    else:
        out, per_sentence = h * v, 0
    return r * enc + dec + out + per_sentence / t


def transformer_macs(cfg: Any, v: int, s: float, r: float, t: float) -> float:
    """The standard count (module docstring) from ``embed_dim``, ``ffn_dim``, ``encoder_layers``,
    ``decoder_layers`` (``heads`` changes no product size)."""
    c = _cfg(cfg)
    d, f = c["embed_dim"], c["ffn_dim"]
    enc_layer = 4 * d * d + 2 * d * f + 2 * s * d  # per source token
    dec_layer = (4 * d * d + 2 * t * d) + (2 * d * d + 2 * s * d) + 2 * d * f  # self, cross (Q, O), FFN
    cross_kv = 2 * d * d  # per source token and decoder layer
    return r * (c["encoder_layers"] * enc_layer + c["decoder_layers"] * cross_kv) + c["decoder_layers"] * dec_layer + d * v


def model_macs(model: str, cfg: Any, v: int, s: float, r: float, t: float) -> float:
    """Forward MACs per target token of nmtkit model ``model`` with Config ``cfg`` and a target
    vocabulary of ``v``."""
    if model == "luong":
        return luong_macs(cfg, v, s, r, t)
    if model == "rnnsearch":
        c = _cfg(cfg)
        return rnnsearch_macs(c["embed_dim"], c["hidden_size"], c.get("attention_dim", 256), c.get("maxout_size", 256), v, s, r,
                              c.get("layers", 1), t)
    if model == "rnnencdec":
        return rnnencdec_macs(cfg, v, s, r, t)
    if model == "transformer":
        return transformer_macs(cfg, v, s, r, t)
    raise ValueError(f"no FLOP count for model {model!r}")


def sentence_decode_macs(model: str, cfg: Any, v: int, s: float, t_out: float, beam: int) -> float:
    """Forward MACs of translating one sentence of ``s`` source tokens into ``t_out`` target
    tokens with a beam of ``beam``: the encoder once, every decoder step for each of the ``beam``
    hypotheses (finished hypotheses and the search's own work are left out)."""
    dec = model_macs(model, cfg, v, s, 0.0, t_out)  # per target token, no per-source-token work
    enc_per_source = model_macs(model, cfg, v, s, 1.0, t_out) - dec
    return s * enc_per_source + beam * t_out * dec


def checkpoint_shape(path: Path) -> tuple[str, dict, int]:
    """(model name, Config fields, target vocabulary) of an nmtkit checkpoint."""
    from nmtkit.checkpoint import load_checkpoint

    ck = load_checkpoint(path)
    return ck["model_name"], dict(ck["model_config"]), len(ck["tgt_dict"])


# -- peers ------------------------------------------------------------------------------------------
def marian_s2s_macs(e: int, h: int, v: int, s: float, r: float) -> float:
    """Marian --type s2s with GRU cells (Nematus): biGRU encoder, conditional GRU decoder (a GRU on
    y_{i-1}, MLP attention of width 2h, a second GRU on the context), deep output of width e."""
    a = 2 * h
    encoder = r * (2 * gru_macs(e, h) + 2 * h * a)
    attention = h * a + s * a + s * 2 * h
    decoder = gru_macs(e, h) + attention + gru_macs(2 * h, h)
    output = (h + e + 2 * h) * e + e * v
    return encoder + decoder + output


# -- from MACs to what a record says ---------------------------------------------------------------
def train_flops(macs: float) -> float:
    """Forward and backward FLOPs from forward multiply-accumulates."""
    return 3 * 2 * macs


def decode_flops(macs: float) -> float:
    """Forward-only FLOPs (translation, per hypothesis token) from forward multiply-accumulates."""
    return 2 * macs


def share_of_peak(tokens_per_s: float, flops_per_token: float, peak_gflops: float | None) -> float | None:
    """Achieved FLOP/s as a fraction of the probed peak (None without a probe)."""
    if not peak_gflops:
        return None
    return tokens_per_s * flops_per_token / (peak_gflops * 1e9)


def data_stats(src: Path, tgt: Path) -> dict:
    """``r`` (source tokens per target token), ``s`` and ``t`` (mean source and target lengths),
    ``</s>`` included, from parallel tokenized text files."""
    src_lines = Path(src).read_text(encoding="utf-8").splitlines()
    tgt_lines = Path(tgt).read_text(encoding="utf-8").splitlines()
    s_tok = sum(len(line.split()) + 1 for line in src_lines)
    t_tok = sum(len(line.split()) + 1 for line in tgt_lines)
    return {"r": s_tok / t_tok, "s": s_tok / len(src_lines), "t": t_tok / len(tgt_lines)}


def speed_fields(tok_s: float, macs: float, peak: dict | None, amp: str, training: bool = True) -> dict:
    """What a speed record adds: FLOPs per target token, achieved GFLOP/s, and its share of the
    host's probed peak of the precision measured (``peak``: ``{"fp32": ..., "bf16": ...}``)."""
    per_tok = train_flops(macs) if training else decode_flops(macs)
    gflops = tok_s * per_tok / 1e9
    prec = "bf16" if amp == "bf16" else "fp32"
    out = {"flops_per_tok": round(per_tok), "achieved_gflops": round(gflops, 2)}
    if peak and peak.get(prec):
        out.update(peak_gflops=peak[prec], peak_precision=prec, share_of_peak=round(gflops / peak[prec], 4))
    return out
