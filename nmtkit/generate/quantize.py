"""Dynamic int8 quantisation of a model for CPU translation (``nmtkit-translate --quantize int8``).

Why dynamic: weights are stored as int8 once, activations are quantised on the fly per
matrix product, so no calibration data is needed and the search code stays unchanged.

What is quantised (with :mod:`torch.ao`):

* every ``nn.Linear`` (output projection, attention, ``W_c``, deep output, bridges): most of a
  decoder step's FLOPs are the output projection.  Their weights get one int8 scale **per output
  row** (per-channel): the rows of a tied output layer differ in norm, and one scale for the whole
  matrix cost 0.2 BLEU on Multi30k valid (39.72 against 39.93 in float32, the 1-hour model); per
  row, 39.95 at the same speed (bench/shortlist_valid.py's record in bench/RESULTS.md);
* the encoder RNNs (inside :class:`~nmtkit.models.encoders.RNNEncoder`), replaced by torch's
  dynamically quantised ``LSTM``/``GRU``, which read packed sequences as before;
* every other ``nn.LSTM``/``nn.GRU`` (the decoders) becomes a :class:`QuantizedStackedRNN`:
  one dynamically quantised cell per layer.  The decoders are stepped one target position at a
  time through :func:`nmtkit.models.common.rnn_step`, which reads the float weights of an
  ``nn.LSTM`` (``weight_ih_l0`` ...) that a quantised module does not have; this module
  registers :meth:`QuantizedStackedRNN.step` there (``RNN_STEPS``), and the int8 ``Linear``'s row
  slicing for shortlists (``OUTPUT_ROW_SELECTORS``), so ``nmtkit.models`` stays float-only.
  A whole-sequence call (``rnnencdec``) runs the same step over time.

Embeddings stay float32 (a lookup has no FLOPs to save).  The result is for search
(``decode_step``); teacher-forced ``forward`` of the input-feeding ``luong`` decoder reads
float weights and is not supported on a quantised model.
"""
from __future__ import annotations

import warnings
from typing import Optional

import torch
from torch import Tensor, nn

from nmtkit.errors import NmtkitError
from nmtkit.generate.ensemble import EnsembleModel
from nmtkit.models.common import OUTPUT_ROW_SELECTORS, RNN_STEPS
from nmtkit.models.encoders import RNNEncoder
from nmtkit.models.gemm import Linear, as_plain_linear

QUANTIZE_CHOICES = ("none", "int8")


class QuantizedStackedRNN(nn.Module):
    """A unidirectional stacked ``nn.LSTM``/``nn.GRU`` as int8 dynamic cells, one per layer.

    Same interface as the module it replaces where nmtkit uses one: :meth:`step` for
    :func:`~nmtkit.models.common.rnn_step` (beam-search layout ``[N, layers, H]``) and
    :meth:`forward` for a ``batch_first`` sequence call with PyTorch's ``[layers, N, H]`` states.
    """

    def __init__(self, rnn: nn.LSTM | nn.GRU) -> None:
        super().__init__()
        if rnn.bidirectional or not rnn.batch_first:
            raise ValueError("QuantizedStackedRNN takes a unidirectional batch_first RNN")
        from torch.ao.nn.quantized import dynamic as qd

        self.is_lstm = isinstance(rnn, nn.LSTM)
        self.num_layers = rnn.num_layers
        self.hidden_size = rnn.hidden_size
        cells = []
        for k in range(rnn.num_layers):
            w_ih = getattr(rnn, f"weight_ih_l{k}")
            float_cell = (nn.LSTMCell if self.is_lstm else nn.GRUCell)(w_ih.size(1), rnn.hidden_size, bias=rnn.bias)
            with torch.no_grad():
                float_cell.weight_ih.copy_(w_ih)
                float_cell.weight_hh.copy_(getattr(rnn, f"weight_hh_l{k}"))
                if rnn.bias:
                    float_cell.bias_ih.copy_(getattr(rnn, f"bias_ih_l{k}"))
                    float_cell.bias_hh.copy_(getattr(rnn, f"bias_hh_l{k}"))
            float_cell.qconfig = torch.ao.quantization.default_dynamic_qconfig
            q_cls = qd.LSTMCell if self.is_lstm else qd.GRUCell
            cells.append(q_cls.from_float(float_cell))
        self.cells = nn.ModuleList(cells)

    def step(self, x: Tensor, h: Tensor, c: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Optional[Tensor]]:
        """One time step; the contract of :func:`~nmtkit.models.common.rnn_step` (eval only)."""
        hs, cs = [], []
        inp = x
        for k, cell in enumerate(self.cells):
            if self.is_lstm:
                assert c is not None
                h_k, c_k = cell(inp, (h[:, k], c[:, k]))
                cs.append(c_k)
            else:
                h_k = cell(inp, h[:, k])
            hs.append(h_k)
            inp = h_k
        return inp, torch.stack(hs, dim=1), (torch.stack(cs, dim=1) if self.is_lstm else None)

    def forward(self, x: Tensor, hx: Tensor | tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor | tuple[Tensor, Tensor]]:
        """``x`` ``[N, T, I]``, states ``[layers, N, H]`` -> (top outputs ``[N, T, H]``, final states)."""
        if self.is_lstm:
            h, c = (s.transpose(0, 1) for s in hx)
        else:
            h, c = hx.transpose(0, 1), None
        outs = []
        for t in range(x.size(1)):
            top, h, c = self.step(x[:, t], h, c)
            outs.append(top)
        final_h = h.transpose(0, 1).contiguous()
        final = (final_h, c.transpose(0, 1).contiguous()) if self.is_lstm else final_h
        return torch.stack(outs, dim=1), final


def int8_output_rows(linear: nn.Module, ids: Tensor):  # noqa: ANN201 - a function of x
    """Output units ``ids`` of torch's int8 dynamic ``Linear`` as a function of ``x`` (shortlists).

    Unpacking the int8 weight costs ~10 ms for a large vocabulary: once per layer, not per batch;
    keyed on the packed weights, so new weights (``set_weight_bias``, ``load_state_dict``) unpack
    again.  The rows are packed once per batch and run by the op ``qd.Linear.forward`` runs (a
    ``qd.Linear`` built per batch packed a dummy weight first).  Per-row scales stay with their
    rows: torch's ``index_select`` takes per-tensor quantised tensors only, so the integer rows,
    scales and zero points are cut apart."""
    packed = linear._packed_params._packed_params
    cached = getattr(linear, "_nmtkit_unpacked", None)
    if cached is None or cached[0] is not packed:
        weight, bias = linear._weight_bias()
        per_row = weight.qscheme() != torch.per_tensor_affine
        if per_row and weight.q_per_channel_axis() != 0:
            raise ValueError("int8 output rows need per-row (axis 0) scales")
        parts = (weight.int_repr(), weight.q_per_channel_scales(), weight.q_per_channel_zero_points()) if per_row else None
        cached = linear._nmtkit_unpacked = (packed, None if per_row else weight, bias, parts)
    _, weight, bias, parts = cached
    if parts is None:
        rows = weight.index_select(0, ids)
    else:
        ints, scales, zero_points = parts
        rows = torch._make_per_channel_quantized_tensor(ints.index_select(0, ids), scales.index_select(0, ids),
                                                        zero_points.index_select(0, ids), 0)
    packed_rows = torch.ops.quantized.linear_prepack(rows, None if bias is None else bias.index_select(0, ids))
    reduce_range = not (linear.version is None or linear.version < 4)  # as qd.Linear.forward decides
    return lambda x: torch.ops.quantized.linear_dynamic(x, packed_rows, reduce_range).to(x.dtype)


def _register_hooks() -> None:
    """Tell the models' shared step and output-layer code how to run the int8 modules."""
    from torch.ao.nn.quantized import dynamic as qd

    RNN_STEPS[QuantizedStackedRNN] = lambda rnn, x, h, c: rnn.step(x, h, c)
    OUTPUT_ROW_SELECTORS[qd.Linear] = int8_output_rows


_register_hooks()


def quantize_model(model: nn.Module) -> nn.Module:
    """Quantise one model (in place, returned for convenience); see the module docstring."""
    from torch.ao.quantization import quantize_dynamic

    model.eval()
    # torch.ao warns that eager quantisation is deprecated on every call; a user cannot act on it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # decoder RNNs first: they are stepped as cells, so they get QuantizedStackedRNN
        encoder_rnns = {id(m.rnn) for m in model.modules() if isinstance(m, RNNEncoder)}
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, (nn.LSTM, nn.GRU)) and id(child) not in encoder_rnns:
                    setattr(parent, name, QuantizedStackedRNN(child))
                elif isinstance(child, Linear):  # torch quantises the exact type nn.Linear only
                    setattr(parent, name, as_plain_linear(child))
        qconfigs = {nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig,
                    nn.LSTM: torch.ao.quantization.default_dynamic_qconfig,  # torch's int8 RNNs: per-tensor only
                    nn.GRU: torch.ao.quantization.default_dynamic_qconfig}
        quantize_dynamic(model, qconfigs, dtype=torch.qint8, inplace=True)
    return model


def check_quantize(mode: str, device: torch.device) -> None:
    """Refuse an unknown mode, or int8 off the CPU (torch's dynamic int8 kernels are CPU-only);
    called before loading, so the error comes at once."""
    if mode not in QUANTIZE_CHOICES:
        raise NmtkitError(f"--quantize must be one of {', '.join(QUANTIZE_CHOICES)}, got {mode!r}")
    if mode != "none" and device.type != "cpu":
        raise NmtkitError(f"--quantize {mode} runs on the CPU only (got device {device}); use --device cpu")


def quantize_ensemble(model: EnsembleModel, mode: str, device: torch.device) -> EnsembleModel:
    """Apply ``--quantize MODE`` (none | int8) to every member, in place."""
    check_quantize(mode, device)
    if mode == "none":
        return model
    for m in model.models:
        quantize_model(m)
    return model
