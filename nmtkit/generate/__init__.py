"""Inference over any model honouring ``nmtkit.models.base``.

* :mod:`.bundle`: :class:`ModelBundle`: checkpoint(s) -> an ensemble with its text pipelines,
  device, precision and batcher; the one place that loads checkpoints for inference;
* :mod:`.translator`, :mod:`.aligner`, :mod:`.scorer`: the front-ends of ``nmtkit-translate``,
  ``nmtkit-align`` and ``nmtkit-score`` (model scoring) over a bundle;
* :mod:`.ensemble`: :class:`EnsembleModel` (one or more models, one step API);
* :mod:`.search`: batched :func:`beam_search` (one set of rules, an eager and a fixed-shape executor)
  with its :class:`SearchOptions` -> :class:`Hypothesis` lists;
* :mod:`.forced`: teacher-forced :func:`score_references` / :func:`score_corpus`;
* :mod:`.word_alignment`: attention -> word-level Pharaoh links;
* :mod:`.unk`: unknown-word replacement from attention;
* :mod:`.quantize`, :mod:`.shortlist`: the CPU fast paths (int8 weights, vocabulary shortlists).

The names below are imported lazily (PEP 562), so a torch-free module of this package (such as
:mod:`.search_options`, which the command line reads when it is defined) does not import torch.
"""
from __future__ import annotations

import importlib
from typing import Any

#: public name -> module that defines it
_LAZY = {
    "EnsembleModel": "nmtkit.generate.ensemble",
    "ForcedResult": "nmtkit.generate.forced",
    "Hypothesis": "nmtkit.generate.search",
    "LoadOptions": "nmtkit.generate.inference_options",
    "OutputOptions": "nmtkit.generate.inference_options",
    "SearchOptions": "nmtkit.generate.search_options",
    "beam_search": "nmtkit.generate.search",
    "score_corpus": "nmtkit.generate.forced",
    "score_references": "nmtkit.generate.forced",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nmtkit.generate' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
