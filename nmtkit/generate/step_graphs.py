"""CUDA graphs of the search's decoder step, one per padded shape (``--cuda-graphs``).

Why: on a GPU, beam search over the Luong and RNNsearch models is bound by kernel launches,
not arithmetic: one batch of 128 test2016 sentences at beam 5 launched 5,446 kernels and kept
an H200 busy 22 % of its wall time (bench/README.md, "GPU").  The decoder step is about half
of those launches; replayed as a graph it is one.

A graph has fixed shapes, and a search's batch shrinks as sentences finish, so the rows are
padded: sentences to a multiple of :attr:`SearchStepGraphs.sentence_step` (their beam rows
with them), and the source, before encoding, to a multiple of :attr:`length_step` positions
(:func:`pad_source`; masked, as if a longer sentence were in the batch).  Each step copies the
live rows' state into the graph's input buffers (the encoder's tensors only when the search
replaced them), replays, and hands back the first rows of the outputs.  Padded rows compute on
whatever their buffers hold; rows never mix in a step, so they change nothing.  Output is the
eager search's up to the rounding of differently shaped products (bench/README.md gives how
many lines of test2016 changed).

The first step of each batch runs eagerly: it makes the per-sentence tensors a model keeps
in its encoder output (Luong's ``context_proj``), which the graphs then read as inputs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import torch
from torch import Tensor
from torch.nn import functional as F

from nmtkit.data.dictionary import PAD_ID
from nmtkit.models.base import DecoderState, EncoderOutput
from nmtkit.models.loop_graphs import round_up

#: (role, member, name) of one tensor the step reads: role "state" (one row per hypothesis) or
#: "enc" (one row per sentence, or per hypothesis for models that do not share encoder rows).
Leaf = tuple[str, int, str]


def pad_source(src_tokens: Tensor, length_step: int) -> Tensor:
    """Right-pad ``[B, S]`` source ids with ``<pad>`` to a multiple of ``length_step`` columns."""
    extra = round_up(src_tokens.size(1), length_step) - src_tokens.size(1)
    return F.pad(src_tokens, (0, extra), value=PAD_ID) if extra else src_tokens


def _leaves(states: Sequence[DecoderState], encs: Sequence[EncoderOutput]) -> list[tuple[Leaf, Tensor]]:
    out: list[tuple[Leaf, Tensor]] = []
    for m, s in enumerate(states):
        out += [(("state", m, k), s[k]) for k in sorted(s)]
    for m, e in enumerate(encs):
        out += [(("enc", m, "states"), e.states), (("enc", m, "mask"), e.mask)]
        out += [(("enc", m, f"extra.{k}"), e.extra[k]) for k in sorted(e.extra)]
    return out


def _rebuild(leaves: list[tuple[Leaf, Tensor]], members: int) -> tuple[list[DecoderState], list[EncoderOutput]]:
    states: list[DecoderState] = [{} for _ in range(members)]
    parts: list[dict] = [{"extra": {}} for _ in range(members)]
    for (role, m, name), t in leaves:
        if role == "state":
            states[m][name] = t
        elif name.startswith("extra."):
            parts[m]["extra"][name[6:]] = t
        else:
            parts[m][name] = t
    return states, [EncoderOutput(states=p["states"], mask=p["mask"], extra=p["extra"]) for p in parts]


@dataclass
class _Captured:
    """One shape's graph: its input buffers, outputs, and the encoder tensors last copied in."""

    graph: "torch.cuda.CUDAGraph"
    tokens: Tensor
    inputs: list[tuple[Leaf, Tensor]]
    lprobs: Tensor
    attn: Optional[Tensor]
    new_states: list[DecoderState]
    enc_sources: list[Optional[Tensor]]


class SearchStepGraphs:
    """The search's decoder step through CUDA graphs (see the module docstring); one per
    translator, kept across its batches."""

    def __init__(self, sentence_step: int = 16, length_step: int = 16, max_shapes: int = 64) -> None:
        self.sentence_step = sentence_step
        self.length_step = length_step
        self.max_shapes = max_shapes  # beyond this many captured shapes, new shapes run eagerly
        self.graphs: dict[tuple, _Captured] = {}
        self.pool: Optional[tuple] = None
        self.replays = 0
        self.eager_calls = 0

    @staticmethod
    def applies(x: Tensor) -> bool:
        """Whether a search on ``x``'s device is graphed (CUDA only)."""
        return x.is_cuda

    def step(self, model, tokens: Tensor, states: Sequence[DecoderState],  # noqa: ANN001 - an EnsembleModel
             encs: Sequence[EncoderOutput]) -> tuple[Tensor, Optional[Tensor], list[DecoderState]]:
        """``model.decode_step(tokens, states, encs)`` through the graph of the padded shape."""
        leaves = _leaves(states, encs)
        n_rows, n_enc = tokens.size(0), encs[0].mask.size(0)
        g = n_rows // n_enc
        enc_rows = round_up(n_enc, self.sentence_step)
        cast = torch.is_autocast_enabled("cuda")
        key = (enc_rows, g, cast, torch.get_autocast_dtype("cuda") if cast else None,
               tuple((name, tuple(t.shape[1:]), t.dtype) for name, t in leaves))
        cap = self.graphs.get(key)
        if cap is None:
            if len(self.graphs) >= self.max_shapes:
                self.eager_calls += 1
                return model.decode_step(tokens, states, encs)
            cap = self.graphs[key] = self._capture(model, tokens, leaves, enc_rows * g, enc_rows, len(encs))
        cap.tokens[:n_rows].copy_(tokens)
        for i, ((role, _, _), t) in enumerate(leaves):
            buf = cap.inputs[i][1]
            if role == "state":
                buf[:n_rows].copy_(t)
            elif cap.enc_sources[i] is not t:  # the encoder's tensors change only when the batch shrinks
                buf[:n_enc].copy_(t)
                cap.enc_sources[i] = t
        cap.graph.replay()
        self.replays += 1
        new_states = [{k: v[:n_rows] for k, v in s.items()} for s in cap.new_states]
        return cap.lprobs[:n_rows], None if cap.attn is None else cap.attn[:n_rows], new_states

    @staticmethod
    def _buffers(tokens: Tensor, leaves: list[tuple[Leaf, Tensor]], rows: int,
                 enc_rows: int) -> tuple[Tensor, list[tuple[Leaf, Tensor]]]:
        """Input buffers of ``rows`` hypotheses over ``enc_rows`` encoder rows, holding the first
        step's inputs."""
        def padded(role: str, name: str, t: Tensor) -> Tensor:
            n = rows if role == "state" else enc_rows
            buf = t.new_zeros((n,) + tuple(t.shape[1:]))
            buf[: t.size(0)] = t
            if name == "mask":
                buf[t.size(0):, 0] = True  # a padded sentence attends to one position: never NaN
            return buf

        return padded("state", "tokens", tokens), [(leaf, padded(leaf[0], leaf[2], t)) for leaf, t in leaves]

    def _capture(self, model, tokens: Tensor, leaves: list[tuple[Leaf, Tensor]], rows: int,  # noqa: ANN001
                 enc_rows: int, members: int) -> _Captured:
        static_tokens, inputs = self._buffers(tokens, leaves, rows, enc_rows)
        states, encs = _rebuild(inputs, members)
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        cast = torch.is_autocast_enabled("cuda")
        # the graph must cast weights itself: autocast's cache is emptied when its context closes
        with torch.autocast("cuda", dtype=torch.get_autocast_dtype("cuda"), enabled=cast, cache_enabled=False):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # lazy initialisation (cuBLAS workspaces) stays out of the graph
                model.decode_step(static_tokens, states, encs)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.pool):
                lprobs, attn, new_states = model.decode_step(static_tokens, states, encs)
        enc_sources: list[Optional[Tensor]] = [None] * len(leaves)
        for i, ((role, _, _), t) in enumerate(leaves):
            if role == "enc":
                enc_sources[i] = t  # already in the buffer
        return _Captured(graph, static_tokens, inputs, lprobs, attn, list(new_states), enc_sources)
