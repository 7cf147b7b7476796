"""Dynamic int8 quantisation of a model for CPU translation (``nmtkit-translate --quantize int8``).

Why dynamic: weights are stored as int8 once, activations are quantised on the fly per
matrix product, so no calibration data is needed and the search code stays unchanged.

What is quantised:

* every ``Linear`` (output projection, attention, deep output, bridges, ``W_c`` without input
  feeding) becomes an :class:`Int8Linear`: most of a decoder step's FLOPs are the output
  projection; a model's ``feedback_layers`` become :class:`Bf16Linear` (see below);
* every ``nn.LSTM``/``nn.GRU``, decoders and (bidirectional) encoders alike, becomes a
  :class:`QuantizedRNN`: per layer and direction, its two gate products as :class:`Int8Linear`
  and the cell's float arithmetic (:func:`~nmtkit.models.gemm.lstm_update`,
  :func:`~nmtkit.models.gemm.gru_update`).  Decoders are stepped one target position at a time
  through :func:`nmtkit.models.common.rnn_step`, which reads the float weights of an ``nn.LSTM``
  (``weight_ih_l0`` ...) that a quantised module does not have; this module registers
  :meth:`QuantizedRNN.step` there (``RNN_STEPS``), :meth:`QuantizedRNN.products` for the encoder's
  step loop (:data:`~nmtkit.models.encoders.RNN_PRODUCTS`: the input products of all steps in one
  int8 product, where torch's packed int8 RNN made one per step)
  and :meth:`Int8Linear.rows` for shortlists (``OUTPUT_ROW_SELECTORS``), so ``nmtkit.models``
  stays float-only.  A whole-sequence decoder call (``rnnencdec``) runs the same step over time.

How (each choice measured against the float32 output of a Multi30k model; the figures are in
bench/RESULTS.md and the CHANGELOG):

* **weights**: int8 with one scale per output row.  The rows of a tied output layer differ in
  norm: one scale for the whole matrix cost BLEU, one per row none.
  torch's own int8 RNNs have one scale per matrix; :class:`QuantizedRNN` has per-row scales too;
* **activations**: quantised per product to unsigned 8 bits.  fbgemm, torch's int8 CPU library,
  by default uses 7 of them ("reduce_range"): without VNNI its AVX2/AVX-512 kernels sum pairs of
  u8 x s8 products in saturating 16 bits.  A CPU with VNNI sums them in 32 bits, so there all
  8 bits are used (:func:`full_range_activations`): half the rounding error, fewer outputs
  that differ from float32, at the same speed.

* **feedback layers stay bf16**: a layer whose output is the next step's input besides the
  recurrent state (Luong's ``W_c`` under input feeding: ``h~_t`` feeds the next step) compounds
  its rounding over the steps: ``W_c`` in float32 halved the int8 outputs that differ from
  float32, the output layer in float32 hardly mattered.
  A model names such layers (``feedback_layers``); they run as :class:`Bf16Linear` where the CPU
  has native bf16 (as close to float32, at int8's speed; float32 ``W_c`` was slower) and stay
  float32 elsewhere.

torch's kernels scale a product's activations by one number for the whole batch, so int8
output can depend on how sentences are batched (float32 output does not).

Embeddings stay float32 (a lookup has no FLOPs to save).  The result is for search
(``decode_step``); teacher-forced ``forward`` of the input-feeding ``luong`` decoder reads
float weights and is not supported on a quantised model.
"""
from __future__ import annotations

import warnings
from typing import Callable, Optional, cast

import torch
from torch import Tensor, nn

from nmtkit.errors import NmtkitError
from nmtkit.generate.ensemble import EnsembleModel
from nmtkit.models.common import INPUT_COLUMN_SELECTORS, OUTPUT_ROW_SELECTORS, RNN_STEPS
from nmtkit.models.encoders import RNN_PRODUCTS
from nmtkit.models.gemm import gru_update, lstm_update

QUANTIZE_CHOICES = ("none", "int8")


def full_range_activations() -> bool:
    """Whether fbgemm may quantise activations to all 8 bits here: only where the CPU has VNNI,
    whose u8 x s8 dot products accumulate in 32 bits (see the module docstring)."""
    probe = getattr(torch.cpu, "_is_vnni_supported", None)
    try:
        return bool(probe is not None and probe())
    except Exception:  # noqa: BLE001 - a probe that fails means "not known to be there"
        return False


def quantize_rows(weight: Tensor) -> Tensor:
    """``weight`` ``[out, in]`` as symmetric int8 with one scale per output row."""
    w = weight.detach().float()
    scales = (w.abs().amax(dim=1).double() / 127).clamp_min(1e-12)  # an all-zero row still gets a valid scale
    with warnings.catch_warnings():  # torch warns that quantised tensors are deprecated; a user cannot act on it
        warnings.simplefilter("ignore")
        return torch.quantize_per_channel(w, scales, torch.zeros(w.size(0), dtype=torch.long), 0, torch.qint8)


class Int8Linear(nn.Module):
    """``x @ weight.T + bias`` with int8 weights (per-row scales) and int8 activations, by fbgemm."""

    def __init__(self, weight: Tensor, bias: Optional[Tensor], full_range: bool) -> None:
        super().__init__()
        q = quantize_rows(weight)
        self.out_features, self.in_features = weight.shape
        self.reduce_range = not full_range
        self.ints, self.scales = q.int_repr(), q.q_per_channel_scales()
        self.bias = None if bias is None else bias.detach().float().clone()
        self.packed = torch.ops.quantized.linear_prepack(q, self.bias)

    @classmethod
    def from_linear(cls, linear: nn.Linear, full_range: bool) -> "Int8Linear":
        return cls(linear.weight, linear.bias, full_range)

    def forward(self, x: Tensor) -> Tensor:
        return torch.ops.quantized.linear_dynamic(x, self.packed, self.reduce_range).to(x.dtype)

    def rows(self, ids: Tensor) -> Callable[[Tensor], Tensor]:
        """Output units ``ids`` only, as a function of ``x`` (vocabulary shortlists): the rows keep
        their own scales, so the result is exactly those columns of :meth:`forward`'s."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            q = torch._make_per_channel_quantized_tensor(self.ints.index_select(0, ids), self.scales.index_select(0, ids),
                                                         torch.zeros(ids.numel(), dtype=torch.long), 0)
        packed = torch.ops.quantized.linear_prepack(q, None if self.bias is None else self.bias.index_select(0, ids))
        reduce_range = self.reduce_range
        return lambda x: torch.ops.quantized.linear_dynamic(x, packed, reduce_range).to(x.dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, reduce_range={self.reduce_range}"


class Bf16Linear(nn.Module):
    """``x @ weight.T + bias`` with bf16 weights and inputs (float32 sums, a bf16 result), for a
    model's ``feedback_layers`` (see the module docstring).  Luong's search uses it by blocks of
    input columns (:meth:`columns`): the context block in float32 once per sentence, the ``h``
    block per step as here, their sum in float32."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.out_features, self.in_features = linear.weight.shape
        self.weight = linear.weight.detach().to(torch.bfloat16).clone()
        self.bias = None if linear.bias is None else linear.bias.detach().to(torch.bfloat16).clone()
        self._blocks: dict[tuple, Tensor] = {}  # column blocks of the (fixed) weight, see columns()

    def forward(self, x: Tensor) -> Tensor:
        return torch.nn.functional.linear(x.to(torch.bfloat16), self.weight, self.bias).to(x.dtype)

    def columns(self, columns: slice, float32: bool = False) -> Callable[[Tensor], Tensor]:
        """``x -> x @ W[:, columns].T`` of a bias-free layer
        (:func:`~nmtkit.models.common.select_input_columns`): as :meth:`forward` computes, or with
        the bf16 weights in float32 arithmetic (``float32``, for a product made once per sentence)."""
        key = (columns.start, columns.stop, columns.step, float32)
        weight = self._blocks.get(key)
        if weight is None:  # copied once: the search asks for the h block every step
            weight = self._blocks[key] = self.weight[:, columns].contiguous().to(torch.float32 if float32 else torch.bfloat16)
        if float32:
            return lambda x: torch.nn.functional.linear(x.float(), weight).to(x.dtype)
        return lambda x: torch.nn.functional.linear(x.to(torch.bfloat16), weight).to(x.dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}"


class QuantizedRNN(nn.Module):
    """A batch-first ``nn.LSTM``/``nn.GRU`` as int8 products, per layer and direction, and the
    cells' float arithmetic.

    Where nmtkit uses such a module: :meth:`step` for :func:`~nmtkit.models.common.rnn_step`
    (decoders: unidirectional, beam-search layout ``[N, layers, H]``), :meth:`forward` for a
    ``batch_first`` sequence call with PyTorch's ``[layers, N, H]`` states (decoders), and
    :meth:`products` for :func:`~nmtkit.models.encoders.masked_rnn` (encoders, bidirectional too:
    the input product of all steps at once, one recurrent product per step).  An LSTM's two biases
    go in with its input product, a GRU's hidden bias with its recurrent one, as in the float loop.
    """

    def __init__(self, rnn: nn.LSTM | nn.GRU, full_range: bool) -> None:
        super().__init__()
        if not rnn.batch_first:
            raise ValueError("QuantizedRNN takes a batch_first RNN")
        self.is_lstm = isinstance(rnn, nn.LSTM)
        self.num_layers = rnn.num_layers
        self.hidden_size = rnn.hidden_size
        self.bidirectional = rnn.bidirectional
        self.dropout = 0.0  # for search only: eval mode
        ih, hh = [], []
        for layer in range(rnn.num_layers):
            for direction in range(2 if rnn.bidirectional else 1):
                sfx = f"_l{layer}" + ("_reverse" if direction else "")
                b_ih, b_hh = getattr(rnn, "bias_ih" + sfx, None), getattr(rnn, "bias_hh" + sfx, None)
                if self.is_lstm:
                    b_ih, b_hh = (None if b_ih is None else b_ih + b_hh), None
                ih.append(Int8Linear(getattr(rnn, "weight_ih" + sfx), b_ih, full_range))
                hh.append(Int8Linear(getattr(rnn, "weight_hh" + sfx), b_hh, full_range))
        self.ih, self.hh = nn.ModuleList(ih), nn.ModuleList(hh)

    def products(self, layer: int, direction: int) -> tuple[Int8Linear, Int8Linear]:
        """(input product, recurrent product) of one layer and direction."""
        k = layer * (2 if self.bidirectional else 1) + direction
        return cast(Int8Linear, self.ih[k]), cast(Int8Linear, self.hh[k])

    def step(self, x: Tensor, h: Tensor, c: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Optional[Tensor]]:
        """One time step; the contract of :func:`~nmtkit.models.common.rnn_step` (eval only)."""
        if self.bidirectional:
            raise ValueError("a bidirectional RNN has no single step")
        hs, cs = [], []
        inp = x
        for k in range(self.num_layers):
            h_k = h[:, k].contiguous()
            if self.is_lstm:
                assert c is not None
                ih, hh = self.products(k, 0)
                h_k, c_k = lstm_update(ih(inp) + hh(h_k), c[:, k])
                cs.append(c_k)
            else:
                ih, hh = self.products(k, 0)
                h_k = gru_update(ih(inp), hh(h_k), h_k)
            hs.append(h_k)
            inp = h_k
        return inp, torch.stack(hs, dim=1), (torch.stack(cs, dim=1) if self.is_lstm else None)

    def forward(self, x: Tensor, hx: Tensor | tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor | tuple[Tensor, Tensor]]:
        """``x`` ``[N, T, I]``, states ``[layers, N, H]`` -> (top outputs ``[N, T, H]``, final states)."""
        c: Optional[Tensor] = None
        if isinstance(hx, tuple):
            h, c = (s.transpose(0, 1) for s in hx)
        else:
            h = hx.transpose(0, 1)
        outs = []
        for t in range(x.size(1)):
            top, h, c = self.step(x[:, t], h, c)
            outs.append(top)
        final_h = h.transpose(0, 1).contiguous()
        final = (final_h, c.transpose(0, 1).contiguous()) if c is not None else final_h
        return torch.stack(outs, dim=1), final


def _register_hooks() -> None:
    """Tell the models' shared step and output-layer code how to run the int8 modules."""
    RNN_STEPS[QuantizedRNN] = lambda rnn, x, h, c: cast(QuantizedRNN, rnn).step(x, h, c)
    RNN_PRODUCTS[QuantizedRNN] = lambda rnn, layer, direction: cast(QuantizedRNN, rnn).products(layer, direction)
    OUTPUT_ROW_SELECTORS[Int8Linear] = lambda layer, ids: cast(Int8Linear, layer).rows(ids)
    INPUT_COLUMN_SELECTORS[Bf16Linear] = lambda layer, columns, float32: cast(Bf16Linear, layer).columns(columns, float32)


_register_hooks()


def quantize_model(model: nn.Module, full_range: Optional[bool] = None) -> nn.Module:
    """Quantise one model (in place, returned for convenience); see the module docstring.
    ``full_range``: 8-bit activations (default: where the CPU has VNNI)."""
    from nmtkit.utils.amp import cpu_has_native_bf16

    if full_range is None:
        full_range = full_range_activations()
    model.eval()
    feedback = getattr(model, "feedback_layers", ())
    keep_float = set()
    for name in feedback:
        layer = getattr(model, name)
        if cpu_has_native_bf16():
            setattr(model, name, Bf16Linear(layer))
        else:  # emulated bf16 is slower than float32
            keep_float.add(id(layer))
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, (nn.LSTM, nn.GRU)):
                setattr(parent, name, QuantizedRNN(child, full_range))
            elif isinstance(child, nn.Linear) and id(child) not in keep_float:
                setattr(parent, name, Int8Linear.from_linear(child, full_range))
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
