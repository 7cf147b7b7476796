"""Checkpoint path(s) -> a ready model with its text pipelines: what translate, align, score and
validation BLEU share.

Why one object: "checkpoint files -> an ensemble on a device, in the right precision, with the
text pipelines and dictionaries -> length-sorted batches -> results in input order" used to be
written four times (the translator, the aligner, model scoring, validation BLEU), with three
different checks that a data directory fits the model and two batchers.  A :class:`ModelBundle`
is the one place each of those lives; :class:`~nmtkit.generate.translator.Translator`,
:class:`~nmtkit.generate.aligner.Aligner` and :class:`~nmtkit.generate.scorer.Scorer` are thin
front-ends over it.  It is also the only module of ``nmtkit.generate`` that loads checkpoints.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ContextManager, Literal, Optional, Sequence, Union, cast

import numpy as np
import torch

from nmtkit.data.text_pipeline import TextPipeline
from nmtkit.errors import NmtkitError
from nmtkit.generate.checkpoint_paths import PathsLike, checkpoint_paths
from nmtkit.generate.ensemble import EnsembleModel
from nmtkit.generate.inference_options import DEFAULT_BATCH_SIZE, LoadOptions
from nmtkit.generate.search import EagerSearch, Searcher, choose_searcher
from nmtkit.utils.amp import autocast

if TYPE_CHECKING:
    from nmtkit.data.dataset import DataDir
    from nmtkit.data.dictionary import Dictionary
    from nmtkit.models.base import Seq2SeqModel


def load_ensemble(paths: PathsLike, device: Optional[torch.device] = None) -> tuple[EnsembleModel, list[dict[str, Any]]]:
    """Load every checkpoint of ``paths`` onto ``device`` as one ensemble (eval mode), with the
    checkpoint dictionaries in the same order; members must share their text pipelines."""
    from nmtkit.checkpoint import load_model

    items = checkpoint_paths(paths)
    loaded = [load_model(p, device) for p in items]
    model = EnsembleModel([m for m, _ in loaded], names=items)
    ckpts = [c for _, c in loaded]
    for name, ckpt in zip(items[1:], ckpts[1:]):
        for side in ("src_pipeline", "tgt_pipeline"):
            if ckpt.get(side) != ckpts[0].get(side):
                which = "source" if side == "src_pipeline" else "target"
                raise NmtkitError(f"cannot ensemble {items[0]} and {name}: their {which} text pipelines "
                                  "(tokenizer, lowercasing or BPE codes) differ")
    return model, ckpts


@dataclass
class ModelBundle:
    """An ensemble ready for inference: its checkpoints, text pipelines, device, precision and
    batching.  Make one with :meth:`load` (checkpoint files) or :meth:`of_model` (a model in
    memory, e.g. during training)."""

    model: EnsembleModel
    src_pipe: TextPipeline
    tgt_pipe: TextPipeline
    device: torch.device
    paths: list[str] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    amp_dtype: Optional[torch.dtype] = None
    quantize: str = "none"
    batch_size: int = DEFAULT_BATCH_SIZE
    max_tokens: Optional[int] = None
    #: The search, chosen once (:func:`nmtkit.generate.search.choose_searcher`): eager, or in fixed
    #: shapes as CUDA graphs (``--cuda-graphs``).
    searcher: Searcher = field(default_factory=EagerSearch)

    @classmethod
    def load(cls, path: PathsLike, options: Optional[LoadOptions] = None, **settings: Any) -> "ModelBundle":
        """Load a checkpoint or an ensemble (``"a.pt:b.pt"`` or a list) as ``options`` say
        (:class:`~nmtkit.generate.inference_options.LoadOptions`; keyword ``settings`` replace
        its fields).  Options are checked before the (slow) loading."""
        from nmtkit.checkpoint import pipelines_from_checkpoint
        from nmtkit.generate.quantize import check_quantize, quantize_ensemble
        from nmtkit.utils.amp import resolve_amp
        from nmtkit.utils.device import parse_device

        o = dataclasses.replace(options or LoadOptions(), **settings)
        device, amp, quantize, cuda_graphs = o.device, o.amp, o.quantize, o.cuda_graphs
        dev = parse_device(device)
        check_quantize(quantize, dev)
        amp_dtype = resolve_amp(amp, dev)
        if amp_dtype is not None and quantize != "none":
            raise NmtkitError(f"--quantize {quantize} runs its own int8 arithmetic: not with --amp {amp} (use --amp none)")
        if cuda_graphs and dev.type != "cuda":
            raise NmtkitError(f"--cuda-graphs needs a CUDA device (this run is on {dev})")
        items = checkpoint_paths(path)
        model, ckpts = load_ensemble(items, dev)
        if o.alignment_layer is not None or o.alignment_heads is not None:
            model.choose_alignment(o.alignment_layer, o.alignment_heads)
        quantize_ensemble(model, quantize, dev)
        src_pipe, tgt_pipe = pipelines_from_checkpoint(ckpts[0])
        if cuda_graphs:
            check_graphed_search(model)
        bundle = cls(model, src_pipe, tgt_pipe, dev, items, ckpts, amp_dtype, quantize, o.batch_size, o.max_tokens,
                     choose_searcher(cuda_graphs))
        if o.data is not None:
            bundle.use_data_pipelines(o.data)
        return bundle

    @classmethod
    def of_model(cls, model: torch.nn.Module, src_pipe: TextPipeline, tgt_pipe: TextPipeline,
                 device: torch.device, **settings: Any) -> "ModelBundle":
        """A bundle around a model already in memory (validation BLEU during training)."""
        ensemble = model if isinstance(model, EnsembleModel) else EnsembleModel([cast("Seq2SeqModel", model)])
        return cls(ensemble, src_pipe, tgt_pipe, device, **settings)

    @property
    def search_graphs(self) -> Optional[Searcher]:
        """The fixed-shape searcher (its captured shapes in ``.graphs``), or None for the eager one."""
        return None if isinstance(self.searcher, EagerSearch) else self.searcher

    # -- what the model is -----------------------------------------------------------------
    @property
    def src_dict(self) -> "Dictionary":
        return self.model.src_dict

    @property
    def tgt_dict(self) -> "Dictionary":
        return self.model.tgt_dict

    @property
    def name(self) -> str:
        """How errors name the model: its first checkpoint, or the ensemble's member names."""
        return self.paths[0] if self.paths else ", ".join(self.model.names)

    def max_source_len(self) -> Optional[int]:
        """The longest source every member can take in full (asked of the models)."""
        return self.model.max_source_len()

    def autocast(self) -> ContextManager:
        """The mixed-precision context every forward pass of this bundle runs in."""
        return autocast(self.device, self.amp_dtype)

    # -- data directories ------------------------------------------------------------------
    def fit_data_dir(self, data_dir: Union[str, os.PathLike], uses: Literal["ids", "pipelines", "tokens"]) -> "DataDir":
        """The one check that a preprocessed data directory fits this model, for what is taken
        from it: ``ids`` (binarized splits, read as they are) and ``pipelines`` (its tokenizer and
        BPE codes) need the model's dictionaries; ``tokens`` (the ``.tok`` text, re-encoded by the
        model's own pipeline) needs the model's tokenizer and lowercasing.  The translation
        direction must match in every case."""
        from nmtkit.data.dataset import DataDir

        data = DataDir(data_dir)
        src, tgt = self.src_pipe, self.tgt_pipe
        if (data.src_lang, data.tgt_lang) != (src.lang, tgt.lang):
            raise NmtkitError(f"{data_dir} is {data.src_lang}->{data.tgt_lang} but the model translates "
                              f"{src.lang}->{tgt.lang}")
        if uses in ("ids", "pipelines"):
            for side, mine, theirs in (("source", self.src_dict, data.src_dict), ("target", self.tgt_dict, data.tgt_dict)):
                if mine.checksum() != theirs.checksum():
                    raise NmtkitError(f"{self.name} and {data_dir}: the {side} dictionaries differ (preprocessed "
                                      "with other settings? preprocess with the model's dictionaries)")
        else:
            checks: tuple[tuple[str, object, object], ...] = (
                ("tokenizer", src.tokenizer, data.meta.get("tokenizer", "none")),
                ("lowercasing", src.lowercase, bool(data.meta.get("lowercase", False))))
            for what, used, found in checks:
                if used != found:
                    raise NmtkitError(f"{data_dir} was preprocessed with {what} {found!r} but the model uses {used!r}: "
                                      "the .tok text would not be the model's tokens (use --source/--target)")
        return data

    def use_data_pipelines(self, data_dir: Union[str, os.PathLike]) -> None:
        """Take the text pipelines of ``data_dir`` (which must fit) instead of the checkpoint's."""
        data = self.fit_data_dir(data_dir, "pipelines")
        self.src_pipe, self.tgt_pipe = data.pipeline(data.src_lang), data.pipeline(data.tgt_lang)

    # -- batching --------------------------------------------------------------------------
    def batches(self, src_sizes: Sequence[int], tgt_sizes: Optional[Sequence[int]] = None, *,
                sort_by: Literal["source", "target"] = "source", batch_size: Optional[int] = None,
                max_tokens: Optional[int] = None) -> list[list[int]]:
        """Indices ``0 .. n-1`` in length-sorted groups under this bundle's sentence count and
        padded-token budget (or the ones given): the batcher every inference front-end uses.

        ``sort_by`` ``source``: by source then target length (search and model scoring, whose
        padding is the source's); ``target``: target first (forced alignment, as training).
        """
        from nmtkit.data.dataset import make_batches

        src = np.asarray(src_sizes, dtype=np.int64)
        tgt = np.zeros_like(src) if tgt_sizes is None else np.asarray(tgt_sizes, dtype=np.int64)
        budget = max_tokens if max_tokens is not None else self.max_tokens
        return make_batches(src, tgt, max_tokens=budget or None, batch_size=batch_size or self.batch_size,
                            shuffle=False, sort_by=sort_by)


def check_graphed_search(model: EnsembleModel) -> None:
    """``--cuda-graphs`` translates in fixed shapes: a one-line refusal for members whose decoder
    state grows every step (a Transformer's key/value cache)."""
    if "search" in model.cuda_graph_support:
        return
    names = ", ".join(sorted({m.model_name for m in model.members if "search" not in m.cuda_graph_support}))
    raise NmtkitError(f"--cuda-graphs: the fixed-shape search needs a decoder state of fixed size, which {names} "
                      "does not have (its state grows every step); translate without --cuda-graphs")
