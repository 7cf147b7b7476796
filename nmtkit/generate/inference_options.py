"""How an inference front-end is loaded and what it outputs, beside the search's own settings
(:class:`~nmtkit.generate.search_options.SearchOptions`): each option declared once, with its
one default, in a typed object.

Why objects, torch-free: ``nmtkit-translate`` builds them from its flags (whose defaults they
give) before torch loads, and hands them whole to :meth:`Translator.from_checkpoint
<nmtkit.generate.translator.Translator.from_checkpoint>`; a library caller may give the same
settings as keywords (``beam=5, device="cpu"``), sorted onto the objects by name
(:func:`sort_settings`).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Literal, Optional, TypeVar, Union

from nmtkit.generate.search_options import SearchOptions

#: Sentences per batch of every inference command unless it says otherwise (the one default).
DEFAULT_BATCH_SIZE = 64

PathArg = Union[str, os.PathLike]


@dataclass(frozen=True)
class LoadOptions:
    """How checkpoints become a ready model (:meth:`nmtkit.generate.bundle.ModelBundle.load`).

    ``device``: None or ``"auto"`` takes a GPU when present.  ``amp``: ``auto|none|bf16|fp16``
    (:mod:`nmtkit.utils.amp`).  ``quantize="int8"``: dynamic int8 weights (CPU only,
    :mod:`nmtkit.generate.quantize`).  ``cuda_graphs``: the search in fixed shapes, each step a
    CUDA graph replay (a CUDA device, no shortlist; :mod:`nmtkit.generate.search.fixed_shape`).
    ``data``: use that data directory's text pipelines instead of the checkpoint's.
    ``alignment_layer``/``alignment_heads``: read attention from that decoder layer, averaged over
    its first N heads (0: all), instead of what the model was trained with (models with several
    attention layers; :meth:`~nmtkit.models.base.Seq2SeqModel.choose_alignment`)."""

    device: Any = None
    amp: str = "auto"
    quantize: str = "none"
    batch_size: int = DEFAULT_BATCH_SIZE
    max_tokens: Optional[int] = None
    cuda_graphs: bool = False
    data: Optional[PathArg] = None
    alignment_layer: Optional[int] = None
    alignment_heads: Optional[int] = None


@dataclass(frozen=True)
class OutputOptions:
    """What a translator adds to the search's hypotheses.

    ``replace_unk``: True copies the most-attended source word for each ``<unk>``; a path or
    dict translates it through a ``source target`` lexicon first.  ``unk_posterior`` (with
    ``replace_unk``): choose each ``<unk>``'s source word from the attention posterior given the
    ``<unk>`` (one forced pass over the hypotheses that have one; :mod:`nmtkit.models.posterior`),
    not from the search's attention.  ``alignments``: compute word alignments (``"auto"``: when
    the model has attention), output word ``t`` from step ``t + align_shift``.
    ``max_source_len``: longer inputs are truncated (default: the model's limit, else 400; never above the model's limit).
    ``shortlist``: a ``source target count`` lexical table restricting the output layer per batch
    to the top ``shortlist_k`` translations of the source words plus the ``shortlist_frequent``
    most frequent targets (:mod:`nmtkit.generate.shortlist`)."""

    replace_unk: Union[bool, PathArg, dict[str, str]] = False
    unk_posterior: bool = False
    alignments: Union[bool, Literal["auto"]] = False
    align_shift: int = 0
    max_source_len: Optional[int] = None
    shortlist: Optional[PathArg] = None
    shortlist_k: int = 50
    shortlist_frequent: int = 100


T = TypeVar("T")


def field_defaults(cls: type) -> dict[str, Any]:
    """``name -> default`` of an options class (what a command's flags show)."""
    return {f.name: f.default for f in dataclasses.fields(cls)}  # type: ignore[arg-type]  # any options dataclass


def from_values(cls: type[T], values: dict[str, Any], **overrides: Any) -> T:
    """An options object from a command's parsed values (flag destinations are field names);
    ``overrides`` for the fields a command computes."""
    names = set(field_defaults(cls))
    return cls(**{**{k: v for k, v in values.items() if k in names}, **overrides})


def sort_settings(settings: dict[str, Any], search: Optional[SearchOptions] = None, load: Optional[LoadOptions] = None,
                  output: Optional[OutputOptions] = None) -> tuple[SearchOptions, LoadOptions, OutputOptions]:
    """The three objects, each keyword of ``settings`` set on the one that declares it (a
    ``TypeError`` for a name none declares, as a function's unknown keyword)."""
    objs: list[Any] = [search or SearchOptions(), load or LoadOptions(), output or OutputOptions()]
    for i, obj in enumerate(objs):
        if not dataclasses.is_dataclass(obj) or not isinstance(obj, (SearchOptions, LoadOptions, OutputOptions)[i]):
            raise TypeError(f"expected {(SearchOptions, LoadOptions, OutputOptions)[i].__name__}, got {obj!r:.60}")
        mine = {k: settings.pop(k) for k in list(settings) if k in {f.name for f in dataclasses.fields(obj)}}
        if mine:
            objs[i] = dataclasses.replace(obj, **mine)
    if settings:
        raise TypeError(f"unexpected keyword argument {next(iter(settings))!r}")
    return objs[0], objs[1], objs[2]
