"""Inference over any model honouring ``nmtkit.models.base``.

* :mod:`.bundle`: :class:`ModelBundle`: checkpoint(s) -> an ensemble with its text pipelines,
  device, precision and batcher; the one place that loads checkpoints for inference;
* :mod:`.translator`, :mod:`.aligner`, :mod:`.scorer`: the front-ends of ``nmtkit-translate``,
  ``nmtkit-align`` and ``nmtkit-score`` (model scoring) over a bundle;
* :mod:`.ensemble`: :class:`EnsembleModel` (one or more models, one step API);
* :mod:`.beam`: batched :func:`beam_search` with its :class:`SearchOptions` -> :class:`Hypothesis` lists;
* :mod:`.forced`: teacher-forced :func:`score_references` / :func:`score_corpus`;
* :mod:`.word_alignment`: attention -> word-level Pharaoh links;
* :mod:`.unk`: unknown-word replacement from attention;
* :mod:`.quantize`, :mod:`.shortlist`: the CPU fast paths (int8 weights, vocabulary shortlists).
"""
from nmtkit.generate.beam import Hypothesis, SearchOptions, beam_search
from nmtkit.generate.ensemble import EnsembleModel
from nmtkit.generate.forced import ForcedResult, score_corpus, score_references

__all__ = [
    "EnsembleModel",
    "ForcedResult",
    "Hypothesis",
    "SearchOptions",
    "beam_search",
    "score_corpus",
    "score_references",
]
