"""nmtkit: attention-based neural machine translation, as command-line tools and as a library.

    from nmtkit import Translator, Aligner, score
    t = Translator.from_checkpoint("ckpt.pt", beam=5)
    t.translate(["A man rides a bike ."])

The library names are imported lazily (PEP 562): ``import nmtkit`` stays free of torch, so the
command-line tools start fast and ``--help`` does not wait for torch.
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: public name -> module that defines it
_LAZY = {
    "Translator": "nmtkit.generate.translator",
    "Translation": "nmtkit.generate.translator",
    "Candidate": "nmtkit.generate.translator",
    "SearchOptions": "nmtkit.generate.search_options",
    "LoadOptions": "nmtkit.generate.inference_options",
    "OutputOptions": "nmtkit.generate.inference_options",
    "Aligner": "nmtkit.generate.aligner",
    "AlignmentRun": "nmtkit.generate.aligner",
    "score": "nmtkit.evaluate.scoring",
    "score_files": "nmtkit.evaluate.scoring",
    "score_model": "nmtkit.generate.scorer",
    "NmtkitError": "nmtkit.errors",
    "InputError": "nmtkit.errors",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nmtkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
