"""Pieces every model shares: the options all configs have, option checking, initialisation.

Why a base config: the trainer, checkpoints and ``--list-archs`` treat every model's options
the same way (a flat dataclass of JSON-able values), so the common ones are declared once.
"""
from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
from torch import Tensor, nn

from nmtkit.errors import NmtkitError
from nmtkit.models.dropout import dropout
from nmtkit.models.gemm import PackedLinear, gru_cell, joined_lstm_cell, linear, lstm_cell
from nmtkit.utils.checks import require, require_at_least, require_at_most, require_choice

#: The largest integer a model option may take (sizes, layers, windows): an allocation that large
#: fails as "out of memory", one line, where a larger one overflowed torch's shapes.
MAX_MODEL_INT = 2**31 - 1
#: The largest --init-scale: a uniform range beyond float32 (about 3.4e38) is refused by torch.
MAX_INIT_SCALE = 1e38


def option(default: Any, help: str, *, choices: Optional[tuple[str, ...]] = None, flag: bool = True) -> Any:  # noqa: A002 - click's name
    """A Config field with what ``nmtkit-train`` needs to make a flag of it (its help, its
    choices), declared once where the option is (``nmtkit.cli.model_options`` reads it).

    ``flag=False``: a model option that only ``--model-opt KEY=VALUE`` sets.  A subclass that
    redeclares a field with a plain default keeps the help and choices declared here."""
    meta = {"help": help, "flag": flag}
    if choices is not None:
        meta["choices"] = tuple(choices)
    return dataclasses.field(default=default, metadata=meta)


INIT_SCHEMES = ("uniform", "bahdanau")


@dataclass
class BaseConfig:
    """Options every recurrent model has.  Sizes are per layer; ``layers`` is used by both
    the encoder and the decoder (the papers' models are symmetric)."""

    embed_dim: int = option(256, "Embedding size.")
    hidden_size: int = option(256, "Recurrent units per layer.")
    layers: int = option(1, "Stacked recurrent layers (encoder and decoder).")
    dropout: float = option(0.0, "Dropout rate in [0, 1).")
    dropout_embed: float = option(-1.0, "Dropout on the embedded inputs of encoder and decoder (negative: --dropout).")
    dropout_hidden: float = option(-1.0, "Dropout between stacked recurrent layers (negative: --dropout).")
    dropout_output: float = option(-1.0, "Dropout on the state the output layer reads (negative: --dropout).")
    init: str = option("uniform", "uniform: every parameter from U(-init_scale, init_scale); bahdanau: "
                       "appendix B.1 of Bahdanau et al.", choices=INIT_SCHEMES)
    init_scale: float = option(0.1, "Uniform init range [-x, x] (0: PyTorch's defaults).")
    source_reversal: bool = option(False, "Feed the encoder each source sentence backwards (Sutskever et al. "
                                   "2014); the sentence-final </s> stays last.")
    share_decoder_input_output_embed: bool = option(False, "Tie the output layer to the target embeddings "
                                                    "(Press & Wolf 2017).")
    share_all_embeddings: bool = option(False, "One embedding matrix for source, target and output "
                                        "(joined dictionary).")
    encoder_self_attention: bool = option(False, "Feed the encoder each position's soft match over its sentence, "
                                          "sum_j softmax(h_i.h_j / sqrt(d)) x_j with h the states of a one-layer RNN "
                                          "over the embeddings x, beside its embedding (the lecture's "
                                          "self-attention slide).")

    def validate(self) -> None:
        """Raise :class:`NmtkitError` naming the first contradictory or out-of-range option
        (the one check of a model option's value, also for the command line's flags)."""
        require_at_least("embed_dim", self.embed_dim, 1)
        require_at_least("hidden_size", self.hidden_size, 1)
        require_at_least("layers", self.layers, 1)
        for f in dataclasses.fields(self):  # larger sizes overflowed torch's int64 shapes (a traceback)
            value = getattr(self, f.name)
            if isinstance(value, int) and not isinstance(value, bool):
                require_at_most(f.name, value, MAX_MODEL_INT)
        require(0.0 <= self.dropout < 1.0, f"dropout must be in [0, 1), got {self.dropout}")
        for name in ("dropout_embed", "dropout_hidden", "dropout_output"):
            value = getattr(self, name)
            require(value < 1.0, f"{name} must be < 1 (negative: same as dropout), got {value}")
        require_choice("init", self.init, INIT_SCHEMES)
        require_at_least("init_scale", self.init_scale, 0)
        # torch refuses a uniform range beyond float32 (a traceback at build, or when loading such a checkpoint)
        require_at_most("init_scale", self.init_scale, MAX_INIT_SCALE)

    def dropout_rate(self, where: str) -> float:
        """The dropout rate at ``where`` (embed | hidden | output): its own option when set
        (>= 0), else the shared ``dropout``."""
        value = getattr(self, f"dropout_{where}")
        return self.dropout if value < 0 else value


# -- option values ------------------------------------------------------------------------
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def coerce_option(name: str, expected: Any, value: Any) -> Any:
    """Convert ``value`` to the option's declared type (int, float, bool or str).

    Accepts strings for numbers and booleans (``--model-opt window=5`` style values) and ints
    for floats; anything else of the wrong type is a one-line :class:`NmtkitError`.
    """
    tname = getattr(expected, "__name__", str(expected))
    bad = NmtkitError(f"option {name} expects {tname}, got {value!r}")
    if expected is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise bad
    if expected is int:
        if isinstance(value, bool):
            raise bad
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                raise bad from None
        raise bad
    if expected is float:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise bad
        try:
            out = float(value.strip() if isinstance(value, str) else value)
        except ValueError:
            raise bad from None
        except OverflowError:  # an int beyond any float (JSON 1 followed by 400 zeros): said short
            out = math.inf
        if not math.isfinite(out):  # NaN passes every range check (and nan != nan broke the preset check)
            shown = f"{value!r}" if len(repr(value)) <= 40 else f"{repr(value)[:37]}..."
            raise NmtkitError(f"option {name} expects a finite number, got {shown}")
        return out
    if expected is str:
        if isinstance(value, str):
            return value
        raise bad
    return value


def option_types(config_cls: type) -> dict[str, Any]:
    """Option name -> declared type of a config dataclass."""
    hints = typing.get_type_hints(config_cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(config_cls)}


# -- initialisation ------------------------------------------------------------------------
@torch.no_grad()
def init_uniform_(model: nn.Module, scale: float) -> None:
    """Draw every parameter from U(-scale, scale), as both papers do, then zero the
    ``<pad>`` rows of embeddings so padding never contributes a vector.  LayerNorm (the
    Transformer's; the papers' models have none) starts at gain 1 and bias 0: gains near zero
    would scale every sub-layer's output down to nothing."""
    for p in model.parameters():
        p.uniform_(-scale, scale)
    for m in model.modules():
        if isinstance(m, nn.Embedding) and m.padding_idx is not None:
            m.weight[m.padding_idx].zero_()
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


@torch.no_grad()
def init_bahdanau_(model: nn.Module) -> None:
    """Bahdanau et al. (2015) appendix B.1: recurrent matrices orthogonal, the alignment
    model's ``W_a``/``U_a`` from N(0, 0.001^2), ``v_a`` and every bias 0, all other weights
    from N(0, 0.01^2).

    Which parameter is which is read off the names: ``weight_hh_*`` of an RNN are the
    recurrent matrices (each gate's block made orthogonal), ``attention.W_a``/``attention.U_a``
    the alignment model."""
    for name, p in model.named_parameters():
        if "bias" in name or name.endswith("v_a.weight"):
            p.zero_()
        elif "weight_hh" in name:
            for block in p.chunk(p.size(0) // p.size(1), dim=0):
                nn.init.orthogonal_(block)
        elif name.endswith(("attention.W_a.weight", "attention.U_a.weight")):
            p.normal_(0.0, 0.001)
        else:
            p.normal_(0.0, 0.01)
    for m in model.modules():
        if isinstance(m, nn.Embedding) and m.padding_idx is not None:
            m.weight[m.padding_idx].zero_()


@torch.no_grad()
def init_xavier_(model: nn.Module) -> None:
    """The Transformer's usual scheme (fairseq's, from tensor2tensor): Xavier-uniform matrices,
    zero biases, LayerNorm at (1, 0), embeddings from N(0, d^-1/2) so that, scaled by sqrt(d),
    they start at unit variance; the ``<pad>`` rows zero.  A module (or the model) with an
    ``init_xavier_`` method then sets its own parts where the scheme treats them apart (fairseq's
    attention projections, an untied output layer)."""
    for m in model.modules():
        if isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, 0.0, m.embedding_dim ** -0.5)
            if m.padding_idx is not None:
                m.weight[m.padding_idx].zero_()
        elif isinstance(m, nn.Linear):
            if not any(m.weight is e.weight for e in model.modules() if isinstance(e, nn.Embedding)):
                nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                m.bias.zero_()
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    for m in model.modules():
        own = getattr(m, "init_xavier_", None)
        if callable(own):
            own()


def initialize_(model: nn.Module, cfg: Any) -> None:
    """Apply the config's initialisation scheme (the one place that chooses it)."""
    if cfg.init == "bahdanau":
        init_bahdanau_(model)
    elif cfg.init == "xavier":
        init_xavier_(model)
    elif cfg.init_scale > 0:
        init_uniform_(model, cfg.init_scale)


def tie_embeddings(model: Any, src_embed: nn.Embedding, tgt_embed: nn.Embedding,
                   output_projection: nn.Linear) -> None:
    """Share weights as ``share_all_embeddings``/``share_decoder_input_output_embed`` ask.

    Errors name the sizes that do not match, so a user knows which option to change."""
    cfg = model.cfg
    if cfg.share_all_embeddings:
        require(
            list(model.src_dict.symbols) == list(model.tgt_dict.symbols),
            "share_all_embeddings needs one dictionary for both languages "
            "(preprocess with --joined-dictionary)",
        )
        tgt_embed.weight = src_embed.weight
    if cfg.share_decoder_input_output_embed or cfg.share_all_embeddings:
        require(
            output_projection.in_features == tgt_embed.embedding_dim,
            f"tied output embeddings need the output layer's input size "
            f"({output_projection.in_features}) to equal embed_dim ({tgt_embed.embedding_dim})",
        )
        output_projection.weight = tgt_embed.weight


# -- small tensor helpers ------------------------------------------------------------------------
#: Module type -> ``(module, ids) -> function`` computing only output units ``ids`` of such a
#: module, for output layers that are not ``nn.Linear`` (the int8 ``Linear`` of
#: :mod:`nmtkit.generate.quantize` registers here: models stay float-only and know nothing of it).
OUTPUT_ROW_SELECTORS: dict[type, Callable[[nn.Module, Tensor], Callable[[Tensor], Tensor]]] = {}


def select_output_rows(layer: nn.Module, ids: Tensor) -> Callable[[Tensor], Tensor]:
    """A function computing only output units ``ids`` of ``layer`` (an ``nn.Linear``, or a module
    type registered in :data:`OUTPUT_ROW_SELECTORS`), its weight and bias rows copied once
    (vocabulary shortlists)."""
    if isinstance(layer, nn.Linear):
        weight = layer.weight.index_select(0, ids)
        bias = None if layer.bias is None else layer.bias.index_select(0, ids)
        return PackedLinear(weight, bias)
    selector = OUTPUT_ROW_SELECTORS.get(type(layer))
    if selector is None:
        raise TypeError(f"cannot restrict the rows of a {type(layer).__name__}")
    return selector(layer, ids)


#: Module type -> ``(module, columns, float32) -> function of x`` for layers that are not
#: ``nn.Linear`` (the bf16 layer of :mod:`nmtkit.generate.quantize` registers here); see
#: :func:`select_input_columns`.
INPUT_COLUMN_SELECTORS: dict[type, Callable[[nn.Module, slice, bool], Callable[[Tensor], Tensor]]] = {}


def select_input_columns(layer: nn.Module, columns: slice, float32: bool = False) -> Optional[Callable[[Tensor], Tensor]]:
    """``x -> x @ W[:, columns].T`` for a bias-free ``layer``: its product with one block of its
    input, so that ``layer(cat([a, b]))`` can be computed as the sum of the blocks' products when
    one block is better multiplied elsewhere (once per sentence rather than every step).
    ``float32``: a layer that keeps its weights in lower precision (the bf16 ``W_c`` of
    ``--quantize int8``) multiplies them in float32 (a product made once per sentence costs
    little either way); an ``nn.Linear`` computes as it always does (under autocast, in the
    autocast type).  None for a layer with a bias or of a type that cannot split its input."""
    if getattr(layer, "bias", None) is not None:
        return None
    if isinstance(layer, nn.Linear):
        weight = layer.weight[:, columns]
        return lambda x: linear(x, weight)
    selector = INPUT_COLUMN_SELECTORS.get(type(layer))
    return None if selector is None else selector(layer, columns, float32)


def lengths_to_mask(lengths: Tensor, width: int) -> Tensor:
    """``[B]`` lengths -> ``[B, width]`` bool mask, True at real positions."""
    return torch.arange(width, device=lengths.device)[None, :] < lengths[:, None]


def batch_first(state: Tensor) -> Tensor:
    """``[layers, B, H]`` (PyTorch RNN layout) -> ``[B, layers, H]`` (beam-search layout)."""
    return state.transpose(0, 1).contiguous()


def layers_first(state: Tensor) -> Tensor:
    """``[B, layers, H]`` -> ``[layers, B, H]`` for feeding an ``nn.LSTM``/``nn.GRU``."""
    return state.transpose(0, 1).contiguous()


#: Module type -> its one-step function ``(module, x, h, c) -> (top, h, c)`` for recurrent modules
#: that are not ``nn.LSTM``/``nn.GRU`` (registered by :mod:`nmtkit.generate.quantize`).
RNN_STEPS: dict[type, Callable[..., tuple[Tensor, Tensor, Optional[Tensor]]]] = {}


def rnn_step(rnn: Any, x: Tensor, h: Tensor, c: Optional[Tensor] = None,
             search_cache: Optional[dict[Any, Any]] = None) -> tuple[Tensor, Tensor, Optional[Tensor]]:
    """One time step of a stacked ``nn.LSTM``/``nn.GRU`` (``batch_first``, unidirectional).

    Why: a one-step call of the fused multi-layer RNN pays its per-call overhead every target
    step; running the layers as cells on the same weights is about twice as fast on CPU for
    decoder-sized batches, and is exactly the same computation (dropout between layers, as
    ``nn.LSTM`` applies it, only in training).
    ``x`` ``[N, I]``; ``h``/``c`` ``[N, layers, H]`` (beam-search layout) -> (top output ``[N, H]``,
    new ``h``, new ``c`` (None for a GRU)).
    A module of a type registered in :data:`RNN_STEPS` (the int8 decoder of
    :mod:`nmtkit.generate.quantize`, which has no float weights to read) runs its own step.
    ``search_cache``: the model's products prepared for the search under way
    (:meth:`~nmtkit.models.base.Seq2SeqModel.searching`), where an LSTM layer's two products
    become one (:func:`~nmtkit.models.gemm.joined_lstm_cell`).
    """
    own_step = RNN_STEPS.get(type(rnn))
    if own_step is not None:
        return own_step(rnn, x, h, c)
    is_lstm = isinstance(rnn, nn.LSTM)
    hs, cs = [], []
    inp = x
    for layer in range(rnn.num_layers):
        w_ih = getattr(rnn, f"weight_ih_l{layer}")
        w_hh = getattr(rnn, f"weight_hh_l{layer}")
        b_ih = getattr(rnn, f"bias_ih_l{layer}", None)
        b_hh = getattr(rnn, f"bias_hh_l{layer}", None)
        if is_lstm:
            assert c is not None
            if search_cache is not None:
                h_l, c_l = joined_lstm_cell(inp, h[:, layer], c[:, layer], w_ih, w_hh, b_ih, b_hh, search_cache,
                                            (id(rnn), layer))
            else:
                h_l, c_l = lstm_cell(inp, h[:, layer], c[:, layer], w_ih, w_hh, b_ih, b_hh)
            cs.append(c_l)
        else:
            h_l = gru_cell(inp, h[:, layer], w_ih, w_hh, b_ih, b_hh)
        hs.append(h_l)
        inp = h_l
        if layer < rnn.num_layers - 1 and rnn.dropout > 0 and rnn.training:
            inp = dropout(inp, rnn.dropout, training=True)
    return inp, torch.stack(hs, dim=1), (torch.stack(cs, dim=1) if is_lstm else None)
