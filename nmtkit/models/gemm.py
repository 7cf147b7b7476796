"""Float32 matrix products on the CPU through oneDNN instead of MKL.

Why: the MKL inside PyTorch's CPU wheels picks its AVX2 kernels on AMD CPUs, while oneDNN, in
the same wheel, uses AVX-512 on them.  What that is worth depends on the core: on one with
full-width AVX-512 units oneDNN ran translation-sized products and the output layer far faster
than MKL; where AVX-512 runs on 256-bit units (Zen 4) both reach about the core's float32 peak,
oneDNN a little ahead for the output layer and translation and behind for a per-step gate
product with its own weight gradient (which training does not compute: :class:`LoopWeight`),
and training was still faster with it, so oneDNN stays the default on AMD CPUs.  The figures
and their hosts: ``bench/gemm_speed.py``, bench/RESULTS.md.

The arithmetic is the same float32 (the summation order differs, so results differ in the last
bits, as between any two BLAS libraries).

Every float32 ``linear`` of the models, their recurrent cells and their backward passes go
through :func:`linear`; it falls back to :func:`torch.nn.functional.linear` wherever oneDNN is
not known to be the better choice: off the CPU, for other dtypes (under bf16 autocast ``F.linear``
already runs in oneDNN), when oneDNN is missing, and on CPUs other than AMD's (and Hygon's)
x86: on Intel CPUs MKL runs its own AVX-512 kernels, and on the one Intel host measured (a Xeon
with AVX-512 and AMX, 2026-11-28) MKL was level with oneDNN for the output layer and translation
and well ahead for the training gate products (oneDNN at 0.53-0.66x).

What does not depend on the library is how step loops are arranged: :class:`LoopWeight` (one
weight-gradient product per loop) and the encoders' step loop (:func:`cpu_float32`) apply to
every float32 CPU product, whether oneDNN or MKL computes it.
``NMTKIT_ONEDNN=1`` or ``0`` in the environment forces the path on or off (A/B measurements).
"""
from __future__ import annotations

import os
from typing import Any, Optional

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable
from torch.nn import functional as F


#: oneDNN's float32 linear is in this torch.
AVAILABLE = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def _cpu_vendor() -> str:
    """``vendor_id`` of /proc/cpuinfo ("" where there is none: not Linux, not x86)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _enabled() -> bool:
    forced = os.environ.get("NMTKIT_ONEDNN")
    if forced in ("0", "1"):
        return AVAILABLE and forced == "1"
    return AVAILABLE and _cpu_vendor() in ("AuthenticAMD", "HygonGenuine")


#: Whether float32 CPU products take the oneDNN path (see the module docstring).
ENABLED = _enabled()


def _dense(t: Tensor) -> bool:
    """Row-major or, for a matrix, its transpose: the layouts oneDNN runs at full speed (a slice
    such as ``w[:, k:]`` sends it to a kernel about 1,000x slower)."""
    return t.is_contiguous() or (t.dim() == 2 and t.t().is_contiguous())


def _onednn_linear(x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
    """``x @ weight.T + bias`` by oneDNN (``x`` ``[..., K]``, ``weight`` ``[N, K]``, both dense)."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


def cpu_float32(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> bool:
    """Whether ``x @ weight.T + bias`` is a float32 product on the CPU outside autocast: where
    :class:`LoopWeight` sums its steps' weight gradients and recurrent encoders run as the step
    loop of :func:`nmtkit.models.encoders.masked_rnn`, whichever library computes the products."""
    return (x.device.type == "cpu" and x.dtype == torch.float32 and weight.dtype == torch.float32
            and x.dim() >= 2 and weight.dim() == 2 and x.numel() > 0 and weight.numel() > 0
            and (bias is None or (bias.dtype == torch.float32 and bias.shape == weight.shape[:1]))
            and not torch.is_autocast_enabled("cpu"))


def applies(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> bool:
    """Whether :func:`linear` computes ``x @ weight.T + bias`` by oneDNN (else ``F.linear``)."""
    return ENABLED and cpu_float32(x, weight, bias)


def product(x: Tensor, weight: Tensor, bias: Optional[Tensor], out: Optional[Tensor] = None) -> Tensor:
    """``x @ weight.T + bias`` of dense CPU operands: float32 by oneDNN where :data:`ENABLED`,
    else (and in the autocast type, see :func:`_cpu_autocast`) by ATen.  Not :func:`linear`:
    inside an autograd Function, which records nothing, and reading a transposed ``weight`` in
    place where ``linear`` would copy it contiguous (the backward pass's ``grad @ weight`` at
    every step).  ``out``: a 2-D product's result is written there where the library can (ATen),
    and copied there otherwise."""
    if ENABLED and x.dtype == torch.float32:
        y = _onednn_linear(x, weight, bias)
        return y if out is None else out.copy_(y)
    if out is None:
        return F.linear(x, weight, bias)
    return torch.mm(x, weight.t(), out=out) if bias is None else torch.addmm(bias, x, weight.t(), out=out)


class _OneDnnLinear(torch.autograd.Function):
    """``F.linear`` with forward and backward products in oneDNN."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:  # noqa: ANN001
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return _onednn_linear(x, weight, bias)

    @staticmethod
    @once_differentiable  # the products below are not recorded: a double backward must fail, not drop terms
    def backward(ctx, grad: Tensor) -> tuple[Optional[Tensor], Optional[Tensor], Optional[Tensor]]:  # noqa: ANN001
        x, weight = ctx.saved_tensors
        grad = grad.contiguous()
        flat = grad.reshape(-1, grad.size(-1))
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = _onednn_linear(grad, weight.t(), None)  # grad @ weight
        if ctx.needs_input_grad[1]:
            # grad.T @ x, computed as (x.T @ grad).T: oneDNN copies a transposed input, and grad
            # (rows x out) is the larger operand (faster for the output layer's weight)
            gw = _onednn_linear(x.reshape(-1, x.size(-1)).t(), flat.t(), None).t()
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = flat.sum(0)
        return gx, gw, gb


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``F.linear``, by oneDNN for float32 on the CPU (see the module docstring)."""
    if not applies(x, weight, bias):
        return F.linear(x, weight, bias)
    if not _dense(x):
        x = x.contiguous()
    if not _dense(weight):  # a slice of a larger matrix: copied (and so differentiated) here
        weight = weight.contiguous()
    if bias is not None and not bias.is_contiguous():  # oneDNN would read a strided bias as dense
        bias = bias.contiguous()
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)):
        return _OneDnnLinear.apply(x, weight, bias)
    return _onednn_linear(x, weight, bias)


class PackedLinear:
    """``x @ weight.T + bias`` at inference from a copy of the weight laid out ``[K (+ 1), N]``,
    its last row the bias, multiplied by ``[x, 1]``; :func:`linear` wherever that does not apply.
    Called with several inputs, it multiplies them joined along their last dimension (an LSTM
    layer's ``[x, h]`` by ``[W_ih, W_hh]``: :func:`joined_lstm_cell`).

    Why: a search step's output layer is its largest product (rows x 256 x 8k), and through MKL
    (the path off AMD CPUs) ``F.linear`` first writes the bias into every row of the
    ``[rows, V]`` result and then has the product read it back: on the Intel host measured that
    copy took a third as long as the product itself.  With the bias a row of the weight the
    product writes its result once.  The ``[K, N]`` layout also ran faster than ``F.linear``'s
    transposed weight there, most at small batches (5 rows: 0.36 against 0.62 ms).  It applies
    to float32 CPU products through MKL that need no gradient; oneDNN (AMD) adds the bias inside
    its product already.  Made for one search, whose weights do not change (the copy is packed
    at its first product): see :meth:`nmtkit.models.base.Seq2SeqModel.searching` and
    :func:`nmtkit.models.common.select_output_rows` (a shortlist's rows, sliced per batch)."""

    def __init__(self, weight: Tensor, bias: Optional[Tensor] = None) -> None:
        self.weight, self.bias = weight, bias
        self._packed: Optional[Tensor] = None

    def __call__(self, x: Tensor, *more: Tensor) -> Tensor:
        w, b = self.weight, self.bias
        if ENABLED or not all(cpu_float32(t, w, b) for t in (x, *more)) or (torch.is_grad_enabled() and (
                any(t.requires_grad for t in (x, *more)) or w.requires_grad or (b is not None and b.requires_grad))):
            return linear(torch.cat([x, *more], dim=-1) if more else x, w, b)
        if self._packed is None:
            with torch.no_grad():
                self._packed = (w if b is None else torch.cat([w, b[:, None]], dim=1)).t().contiguous()
        parts = [t.reshape(-1, t.size(-1)) for t in (x, *more)]
        if b is not None:
            parts.append(x.new_ones(parts[0].size(0), 1))
        flat = torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]
        return torch.mm(flat, self._packed).view(*x.shape[:-1], w.size(0))


class LoopWeight:
    """A weight (and bias) that every step of one recurrent loop multiplies by, whose gradient is
    summed over the steps in one product instead of one per step.

    Why: in the backward pass of a step loop, the weight gradient of ``x_t @ w.T`` is
    ``g_t.T @ x_t`` with an inner size of one batch (64 sentences in training), which runs at
    about half the rate of the same product over all steps, and autograd then adds every step's
    ``[N, K]`` gradient into the total.  Here each step keeps its ``(x_t, g_t)``; the loop's
    first step, whose backward runs last because every later step depends on it, computes
    ``cat(g).T @ cat(x)`` once.  The input gradients stay per step (the recurrence needs them).
    Make one per loop (one forward pass).  It sums on the CPU, in float32 (:func:`cpu_float32`)
    and under autocast (:func:`_cpu_autocast`: the weight and bias are cast once, here); on GPUs,
    or where the weight needs no gradient, a call is plain :func:`linear`.

    A batched weight ``[B, N, K]`` (one matrix per sentence: attention keys, or the transposed
    encoder states a context is read from) gives ``bmm(x_t, weight^T)`` for ``x_t`` ``[B, R, K]``.
    Its per-step weight gradient is an outer product per sentence, which ATen's CPU ``bmm`` runs
    at a small fraction of its speed (in a float32 ``luong_small`` profile the attention's two
    per-step outer products cost about a tenth of an update); summed here, it is one ``bmm`` over
    all steps.  That holds on any CPU and under autocast (the weight is cast once), not on GPUs.  Each backward pass (graph task) starts a fresh
    sum, so a partial pass over a retained graph (``torch.autograd.grad`` of an input of a later
    step, which never reaches the first step) leaves nothing behind for the next one.
    """

    def __init__(self, weight: Tensor, bias: Optional[Tensor] = None) -> None:
        kind = weight.device.type
        if torch.is_autocast_enabled(kind) and weight.dtype == torch.float32:
            # cast once per loop, not at every step: autocast caches the casts of leaf weights only
            weight = weight.to(torch.get_autocast_dtype(kind))
            if bias is not None and bias.dtype == torch.float32:
                bias = bias.to(weight.dtype)
        self.weight = weight if weight.dim() == 3 or _dense(weight) else weight.contiguous()  # bmm reads any layout
        self.bias = bias if bias is None or bias.is_contiguous() else bias.contiguous()
        self.calls = 0
        self.task = -1  # the backward pass the kept steps belong to
        self.steps: list[tuple[Tensor, Tensor]] = []

    def __call__(self, x: Tensor) -> Tensor:
        """``x @ weight.T + bias`` (batched: ``bmm(x, weight^T)``) for one step."""
        w, b = self.weight, self.bias
        wants_grad = w.requires_grad or (b is not None and b.requires_grad)
        if w.dim() == 3:
            x = x.to(w.dtype)  # under autocast: what bmm's autocast would do
            if not (torch.is_grad_enabled() and wants_grad and w.device.type == "cpu"):
                return torch.bmm(x, w.transpose(1, 2))
            self.calls += 1
            return _LoopStepLinear.apply(x, w, None, self, self.calls == 1)
        if not (torch.is_grad_enabled() and wants_grad):
            return linear(x, w, b)
        if not cpu_float32(x, w, b):
            if not _cpu_autocast(x, w):
                return linear(x, w, b)
            x = x.to(w.dtype)  # what linear's autocast would do
        self.calls += 1
        return _LoopStepLinear.apply(x if _dense(x) else x.contiguous(), w, b, self, self.calls == 1)


def _cpu_autocast(x: Tensor, weight: Tensor) -> bool:
    """Whether ``x @ weight.T`` is a CPU product under autocast whose weight :class:`LoopWeight`
    has cast to the autocast type already.

    Why the loop sums these too: under bf16 autocast each step's weight gradient was one
    ``[N, K]`` bf16 product with an inner size of one batch, added into the cast weight's
    gradient in bf16 at every step; on the Intel host measured those additions alone took an
    eighth of a ``luong_small`` update.  One product over all steps (AMX or AVX-512 bf16, float32
    accumulation inside) does the sum once and rounds it once."""
    return (weight.device.type == "cpu" and x.device.type == "cpu" and torch.is_autocast_enabled("cpu")
            and weight.dim() == 2 and weight.dtype == torch.get_autocast_dtype("cpu")
            and x.dim() >= 2 and x.numel() > 0 and weight.numel() > 0)


class _LoopStepLinear(torch.autograd.Function):
    """One step's product of a :class:`LoopWeight`: the input gradient now, the weight and bias
    gradients of all steps at the first step."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Optional[Tensor], loop: LoopWeight, first: bool) -> Tensor:  # noqa: ANN001
        ctx.save_for_backward(x, weight)
        ctx.loop, ctx.first, ctx.has_bias = loop, first, bias is not None
        if weight.dim() == 3:
            return torch.bmm(x, weight.transpose(1, 2))
        return product(x, weight, bias)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Optional[Tensor], ...]:  # noqa: ANN001
        x, weight = ctx.saved_tensors
        loop: LoopWeight = ctx.loop
        task = torch._C._current_graph_task_id()
        if task != loop.task:  # a new backward pass: what an earlier (partial) one kept is not ours
            loop.task, loop.steps = task, []
        grad = grad.contiguous()
        if weight.dim() == 3:  # per sentence: [B, R, N] gradients of [B, R, K] inputs
            gx = torch.bmm(grad, weight) if ctx.needs_input_grad[0] else None
            loop.steps.append((x, grad))
            if not ctx.first:
                return gx, None, None, None, None
            xs, gs = torch.cat([s[0] for s in loop.steps], dim=1), torch.cat([s[1] for s in loop.steps], dim=1)
            loop.steps = []
            return gx, torch.bmm(gs.transpose(1, 2), xs) if ctx.needs_input_grad[1] else None, None, None, None
        gx = product(grad, weight.t(), None) if ctx.needs_input_grad[0] else None
        loop.steps.append((x.reshape(-1, x.size(-1)), grad.reshape(-1, grad.size(-1))))
        if not ctx.first:
            return gx, None, None, None, None
        xs = torch.cat([s[0] for s in loop.steps])
        gs = torch.cat([s[1] for s in loop.steps])
        loop.steps = []
        gw = None
        if ctx.needs_input_grad[1]:  # oneDNN as _OneDnnLinear; MKL reads the transposes in place
            gw = _onednn_linear(xs.t(), gs.t(), None).t() if ENABLED and xs.dtype == torch.float32 else gs.t().mm(xs)
        gb = gs.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return gx, gw, gb, None, None


class Linear(nn.Linear):
    """``nn.Linear`` computed by :func:`linear`: the same parameters and state dict keys."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)


def _fast_tanh_enabled() -> bool:
    forced = os.environ.get("NMTKIT_FAST_TANH")
    if forced in ("0", "1"):
        return forced == "1"
    return _cpu_vendor() in ("AuthenticAMD", "HygonGenuine")


#: Whether :func:`tanh` computes float32 CPU tanh through sigmoid (see there).
FAST_TANH = _fast_tanh_enabled()


def tanh(x: Tensor) -> Tensor:
    """``torch.tanh``; as ``2 sigmoid(2x) - 1`` for float32 on the CPU when no gradient is needed.

    Why: on the AMD hosts measured, torch's CPU tanh ran several times slower than its sigmoid
    whatever ATen's vector level, and a decoder step computes up to five tanh.  The identity
    costs three cheap kernels and is within 2e-7 of ``torch.tanh`` everywhere (absolute; it
    loses relative precision only where tanh is itself below 1e-7).  Training (autograd) keeps
    ``torch.tanh``, so gradients and the training exactness tests are untouched.  As with
    :func:`linear`, only AMD (and Hygon) CPUs take this path by default; ``NMTKIT_FAST_TANH=1``
    or ``0`` forces it on or off."""
    if not FAST_TANH or x.dtype != torch.float32 or x.device.type != "cpu" or (x.requires_grad and torch.is_grad_enabled()):
        return torch.tanh(x)
    return torch.sigmoid(x * 2).mul_(2).sub_(1)


def lstm_update(gates: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    """An LSTM cell's arithmetic after its products: gates ``[N, 4H]`` (i, f, g, o, as
    ``torch.lstm_cell``) and the cell state -> (h, c)."""
    i, f, g, o = gates.chunk(4, dim=1)
    c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * tanh(g)
    return torch.sigmoid(o) * tanh(c_new), c_new


def gru_update(input_part: Tensor, hidden_part: Tensor, h: Tensor) -> Tensor:
    """A GRU cell's arithmetic after its products ``x W_ih^T + b_ih`` and ``h W_hh^T + b_hh``
    (gates r, z, n, as ``torch.gru_cell``) -> the new h."""
    i_r, i_z, i_n = input_part.chunk(3, dim=1)
    h_r, h_z, h_n = hidden_part.chunk(3, dim=1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = tanh(i_n + r * h_n)
    return n + z * (h - n)


def lstm_cell(x: Tensor, h: Tensor, c: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Optional[Tensor],
              b_hh: Optional[Tensor]) -> tuple[Tensor, Tensor]:
    """``torch.lstm_cell`` with its two products by :func:`linear`."""
    if not applies(x, w_ih):
        return torch.lstm_cell(x, (h, c), w_ih, w_hh, b_ih, b_hh)
    return lstm_update(linear(x, w_ih, b_ih) + linear(h, w_hh, b_hh), c)


def joined_lstm_cell(x: Tensor, h: Tensor, c: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Optional[Tensor],
                     b_hh: Optional[Tensor], cache: dict[Any, Any], key: Any) -> tuple[Tensor, Tensor]:
    """:func:`lstm_cell` at inference as one product, ``[x, h, 1]`` by ``[W_ih, W_hh, b_ih + b_hh]``
    (packed into ``cache[key]`` at a search's first step), where :class:`PackedLinear` applies.

    Why: a search step's LSTM layer made two products (320 x 512 and 320 x 256 by 1,024 gates at
    beam 5, batch 64), each first writing its bias into every row of its result (MKL), and then
    added them.  The bias sum rounds differently from adding the two products' biases one at a
    time (the last bits, as another BLAS would)."""
    if torch.is_grad_enabled() or not cpu_float32(x, w_ih, b_ih):
        return lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh)
    joined = cache.get(key)
    if joined is None:
        bias = b_ih if b_hh is None else (b_hh if b_ih is None else b_ih + b_hh)
        joined = cache[key] = PackedLinear(torch.cat([w_ih, w_hh], dim=1), bias)
    return lstm_update(joined(x, h), c)


def gru_cell(x: Tensor, h: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Optional[Tensor], b_hh: Optional[Tensor]) -> Tensor:
    """``torch.gru_cell`` with its two products by :func:`linear`."""
    if not applies(x, w_ih):
        return torch.gru_cell(x, h, w_ih, w_hh, b_ih, b_hh)
    return gru_update(linear(x, w_ih, b_ih), linear(h, w_hh, b_hh), h)
