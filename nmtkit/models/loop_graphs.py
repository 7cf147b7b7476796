"""CUDA graphs of a teacher-forced decoder loop (forward and backward), one per padded shape.

Why: an input-feeding or attention-conditioned decoder runs one small step per target
position, a few kernels per layer each, so on a GPU a training step waits on Python and kernel
launches, not on arithmetic (bench/README.md, "GPU").  A CUDA graph replays the whole loop,
forward and backward, as two launches.  A graph has fixed shapes, so each batch is padded up to
a bucket (batch rows to a multiple of :attr:`LoopGraphs.batch_step`, target and source lengths
to a multiple of :attr:`LoopGraphs.length_step`) and the outputs are cut back; padding is what a
longer sentence in the batch would add (masked source positions, target steps after the last),
and padded rows attend to one source position, so nothing in them is NaN.  The graphs of all
shapes share one memory pool: each forward is followed by its own backward before another
graph runs, which is the order that sharing needs.

A model opts in by passing its loop, a method that takes and returns only tensors, to
:meth:`LoopGraphs.run` with a :class:`LoopSpec` naming each tensor's batch, target and source
dimensions.  Only gradient-enabled calls on CUDA are graphed; everything else (CPU, validation,
search) runs the method as it is, which stays the reference the tests compare with.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, cast

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from nmtkit.utils.amp import autocast_key, uncached_autocast

#: A dimension's role: "B" (sentences), "T" (target steps), "S" (source positions) or None (fixed).
Dims = tuple[Optional[str], ...]


@dataclass(frozen=True)
class LoopSpec:
    """The roles of the dimensions of a loop's inputs and outputs; ``mask``: the index of the
    boolean source mask among the inputs (True at real positions)."""

    inputs: tuple[Dims, ...]
    outputs: tuple[Dims, ...]
    mask: int


def round_up(n: int, step: int) -> int:
    """``n`` rounded up to a multiple of ``step``."""
    return -(-n // step) * step


class _Loop(nn.Module):
    """A model's loop method as a module of its own, so that one graphed copy exists per shape
    (``make_graphed_callables`` replaces the forward of the module it is given) while the
    parameters stay the model's."""

    def __init__(self, owner: nn.Module, method: str) -> None:
        super().__init__()
        self.owner = owner
        self.method = method

    def forward(self, *tensors: Tensor) -> tuple[Tensor, ...]:
        return getattr(self.owner, self.method)(*tensors)


class LoopGraphs:
    """Captured loops by shape (see the module docstring); attach one to a model as
    ``model.loop_graphs``."""

    def __init__(self, batch_step: int = 32, length_step: int = 8, max_shapes: int = 64, warmup_iters: int = 2) -> None:
        self.batch_step = batch_step
        self.length_step = length_step
        self.max_shapes = max_shapes  # beyond this many captured shapes, new shapes run eagerly
        self.warmup_iters = warmup_iters
        self.graphs: dict[tuple, nn.Module] = {}
        self.pool: Any = None  # the graphs' shared memory pool
        self.replays = 0
        self.eager_calls = 0

    @staticmethod
    def applies(x: Tensor) -> bool:
        """Whether a loop over ``x`` is graphed: training-time calls on a CUDA device."""
        return x.is_cuda and torch.is_grad_enabled()

    def _sizes(self, spec: LoopSpec, inputs: tuple[Tensor, ...]) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for dims, x in zip(spec.inputs, inputs):
            for role, n in zip(dims, x.shape):
                if role is not None:
                    sizes.setdefault(role, n)
        return sizes

    def _padded(self, sizes: dict[str, int]) -> dict[str, int]:
        return {role: round_up(n, self.batch_step if role == "B" else self.length_step) for role, n in sizes.items()}

    @staticmethod
    def _pad(x: Tensor, dims: Dims, padded: dict[str, int]) -> Tensor:
        widths: list[int] = []
        for role, n in zip(reversed(dims), reversed(x.shape)):
            widths += [0, (padded[role] - n) if role is not None else 0]
        return F.pad(x, widths) if any(widths) else x

    @staticmethod
    def _pad_mask(mask: Tensor, padded: dict[str, int]) -> Tensor:
        rows, cols = mask.shape
        out = mask.new_zeros(padded["B"], padded["S"])
        out[:rows, :cols] = mask
        out[rows:, 0] = True  # a padded row attends to one position: finite, never NaN
        return out

    def run(self, owner: nn.Module, method: str, spec: LoopSpec, inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """``getattr(owner, method)(*inputs)``, through the graph of the inputs' padded shape."""
        sizes = self._sizes(spec, inputs)
        padded = self._padded(sizes)
        key = (method, owner.training, tuple(sorted(padded.items())), autocast_key(),
               tuple((x.dtype, x.requires_grad) for x in inputs))
        graphed = self.graphs.get(key)
        if graphed is None and len(self.graphs) >= self.max_shapes:
            self.eager_calls += 1
            return getattr(owner, method)(*inputs)
        args = tuple(self._pad_mask(x, padded) if i == spec.mask else self._pad(x, dims, padded)
                     for i, (x, dims) in enumerate(zip(inputs, spec.inputs)))
        if graphed is None:
            graphed = self.graphs[key] = self._capture(owner, method, args)
        self.replays += 1
        outs = graphed(*args)
        return tuple(o[tuple(slice(0, sizes[r]) if r is not None else slice(None) for r in dims)]
                     for o, dims in zip(outs, spec.outputs))

    def _capture(self, owner: nn.Module, method: str, args: tuple[Tensor, ...]) -> nn.Module:
        loop = _Loop(owner, method)
        loop.training = owner.training  # set alone: train() would recurse into the model
        sample = tuple(x.detach().clone().requires_grad_(x.requires_grad) for x in args)
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        with uncached_autocast():
            graphed = torch.cuda.make_graphed_callables(loop, sample, num_warmup_iters=self.warmup_iters,
                                                        allow_unused_input=True, pool=self.pool)
        return cast(nn.Module, graphed)  # a module in, its graphed module out
