"""Search and forced decoding over any model honouring ``nmtkit.models.base``.

* :mod:`.ensemble`: :class:`EnsembleModel` (one or more models, one step API);
* :mod:`.beam`: batched :func:`beam_search` -> :class:`Hypothesis` lists;
* :mod:`.forced`: teacher-forced :func:`score_references` / :func:`score_corpus`;
* :mod:`.word_alignment`: attention -> word-level Pharaoh links;
* :mod:`.unk`: unknown-word replacement from attention.
"""
from nmtkit.generate.beam import Hypothesis, beam_search
from nmtkit.generate.ensemble import EnsembleModel
from nmtkit.generate.forced import ForcedResult, collate, score_corpus, score_references

__all__ = [
    "EnsembleModel",
    "ForcedResult",
    "Hypothesis",
    "beam_search",
    "collate",
    "score_corpus",
    "score_references",
]
