"""Pieces every model shares: the options all configs have, option checking, initialisation.

Why a base config: the trainer, checkpoints and ``--list-archs`` treat every model's options
the same way (a flat dataclass of JSON-able values), so the common ones are declared once.
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, Iterable, Optional

import torch
from torch import Tensor, nn

from nmtkit.errors import NmtkitError


@dataclass
class BaseConfig:
    """Options every recurrent model has.  Sizes are per layer; ``layers`` is used by both
    the encoder and the decoder (the papers' models are symmetric)."""

    embed_dim: int = 256
    hidden_size: int = 256
    layers: int = 1
    dropout: float = 0.0
    #: Parameters drawn uniformly from [-init_scale, init_scale] (both papers: 0.1);
    #: 0 keeps PyTorch's default initialisation.
    init_scale: float = 0.1
    #: Feed the encoder each source sentence backwards (Sutskever et al. 2014); the
    #: sentence-final ``</s>`` stays last.  Undone before anything leaves the model.
    source_reversal: bool = False

    def validate(self) -> None:
        """Raise :class:`NmtkitError` naming the first contradictory or out-of-range option."""
        require(self.embed_dim >= 1, f"embed_dim must be >= 1, got {self.embed_dim}")
        require(self.hidden_size >= 1, f"hidden_size must be >= 1, got {self.hidden_size}")
        require(self.layers >= 1, f"layers must be >= 1, got {self.layers}")
        require(0.0 <= self.dropout < 1.0, f"dropout must be in [0, 1), got {self.dropout}")
        require(self.init_scale >= 0.0, f"init_scale must be >= 0, got {self.init_scale}")


def require(ok: bool, message: str) -> None:
    """Raise a one-line :class:`NmtkitError` when an option check fails."""
    if not ok:
        raise NmtkitError(message)


def require_choice(name: str, value: str, choices: Iterable[str]) -> None:
    choices = tuple(choices)
    require(value in choices, f"{name} must be one of {', '.join(choices)}; got {value!r}")


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
        if isinstance(value, bool):
            raise bad
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                raise bad from None
        raise bad
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
    ``<pad>`` rows of embeddings so padding never contributes a vector."""
    for p in model.parameters():
        p.uniform_(-scale, scale)
    for m in model.modules():
        if isinstance(m, nn.Embedding) and m.padding_idx is not None:
            m.weight[m.padding_idx].zero_()


# -- small tensor helpers ------------------------------------------------------------------------
def lengths_to_mask(lengths: Tensor, width: int) -> Tensor:
    """``[B]`` lengths -> ``[B, width]`` bool mask, True at real positions."""
    return torch.arange(width, device=lengths.device)[None, :] < lengths[:, None]


def batch_first(state: Tensor) -> Tensor:
    """``[layers, B, H]`` (PyTorch RNN layout) -> ``[B, layers, H]`` (beam-search layout)."""
    return state.transpose(0, 1).contiguous()


def layers_first(state: Tensor) -> Tensor:
    """``[B, layers, H]`` -> ``[layers, B, H]`` for feeding an ``nn.LSTM``/``nn.GRU``."""
    return state.transpose(0, 1).contiguous()


def rnn_step(rnn: nn.Module, x: Tensor, h: Tensor, c: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Optional[Tensor]]:
    """One time step of a stacked ``nn.LSTM``/``nn.GRU`` (``batch_first``, unidirectional).

    Why: a one-step call of the fused multi-layer RNN pays its per-call overhead every target
    step; running the layers as cells on the same weights is about twice as fast on CPU for
    decoder-sized batches, and is exactly the same computation (dropout between layers, as
    ``nn.LSTM`` applies it, only in training).
    ``x`` ``[N, I]``; ``h``/``c`` ``[N, layers, H]`` (beam-search layout) -> (top output ``[N, H]``,
    new ``h``, new ``c`` (None for a GRU)).
    """
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
            h_l, c_l = torch.lstm_cell(inp, (h[:, layer], c[:, layer]), w_ih, w_hh, b_ih, b_hh)
            cs.append(c_l)
        else:
            h_l = torch.gru_cell(inp, h[:, layer], w_ih, w_hh, b_ih, b_hh)
        hs.append(h_l)
        inp = h_l
        if layer < rnn.num_layers - 1 and rnn.dropout > 0 and rnn.training:
            inp = nn.functional.dropout(inp, rnn.dropout, training=True)
    return inp, torch.stack(hs, dim=1), (torch.stack(cs, dim=1) if is_lstm else None)
