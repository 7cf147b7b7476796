"""Beam search: one set of rules, two executors, a searcher chosen once per bundle.

* :mod:`.rules`: every convention of the search, once (constraints, candidate scoring and the
  top-k's tie order, the continue/finish split, finished hypotheses, length penalty);
* :mod:`.eager`: the executor whose batch shrinks as sentences complete (any device; with a
  vocabulary shortlist too);
* :mod:`.fixed_shape`: the executor in fixed-shape slots, each step a CUDA graph replay
  (``--cuda-graphs``);
* :mod:`.topk`: the two forms of the tie-ordered top-k (host-checked, and host-free).

A searcher is any callable ``(model, src_tokens, src_lengths, options, return_attention,
shortlist) -> hypotheses``; :func:`choose_searcher` picks one for a bundle and
:func:`beam_search` runs one (the eager searcher unless told otherwise).  :class:`SearchOptions`
goes through whole.
"""
from __future__ import annotations

from typing import Optional, Protocol

import torch
from torch import Tensor

from nmtkit.generate.search.eager import eager_search
from nmtkit.generate.search.hypothesis import Hypothesis
from nmtkit.generate.search_options import SearchOptions

__all__ = ["EagerSearch", "Hypothesis", "SearchOptions", "Searcher", "beam_search", "choose_searcher"]


class Searcher(Protocol):
    def __call__(self, model, src_tokens: Tensor, src_lengths: Tensor, options: SearchOptions,  # noqa: ANN001
                 return_attention: bool = True, shortlist: Optional[Tensor] = None) -> list[list[Hypothesis]]: ...


class EagerSearch:
    """The eager searcher; with a shortlist (sorted target ids starting with the four specials,
    :mod:`nmtkit.generate.shortlist`) every member's output layer is restricted to those ids and
    log-probabilities are normalised over them (with every id of the vocabulary the result is
    exactly the unrestricted one)."""

    @torch.inference_mode()
    def __call__(self, model, src_tokens: Tensor, src_lengths: Tensor, options: SearchOptions,  # noqa: ANN001
                 return_attention: bool = True, shortlist: Optional[Tensor] = None) -> list[list[Hypothesis]]:
        if shortlist is not None:
            from nmtkit.generate.shortlist import check_shortlist

            check_shortlist(shortlist, len(model.tgt_dict))
        with model.searching():
            if shortlist is None:
                return eager_search(model, src_tokens, src_lengths, options, return_attention)
            with model.restrict_output(shortlist):
                return eager_search(model, src_tokens, src_lengths, options, return_attention, shortlist)


def choose_searcher(cuda_graphs: bool = False) -> Searcher:
    """The searcher of a bundle: the fixed-shape one (``--cuda-graphs``; it hands batches it does
    not take, and shortlists, to the eager executor) or the eager one."""
    if cuda_graphs:
        from nmtkit.generate.search.fixed_shape import SearchGraphs

        return SearchGraphs()
    return EagerSearch()


def beam_search(model, src_tokens: Tensor, src_lengths: Tensor,  # noqa: ANN001 - an EnsembleModel
                options: SearchOptions = SearchOptions(), return_attention: bool = True,
                shortlist: Optional[Tensor] = None, searcher: Optional[Searcher] = None) -> list[list[Hypothesis]]:
    """Translate a batch: for each input sentence, up to ``options.nbest`` hypotheses, best first.

    ``src_tokens`` ``[B, S]`` end with ``</s>`` and are right-padded (see the model contract);
    ``return_attention=False`` skips collecting attention (``Hypothesis.attention`` is None).
    ``shortlist``: see :class:`EagerSearch`.  ``searcher``: the bundle's (default: eager).
    """
    return (searcher or EagerSearch())(model, src_tokens, src_lengths, options, return_attention, shortlist)
