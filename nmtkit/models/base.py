"""The contract every nmtkit model honours, so that training, beam search, ensembles,
forced decoding and alignment work with any registered model.

Conventions (all tensors batch-first, except what a model keeps in its own decoder state):

* ``src_tokens`` ``[B, S]``: source ids followed by ``</s>``, right-padded with ``<pad>`` (id 0).
  ``src_lengths`` ``[B]`` counts real tokens including ``</s>``.
* ``prev_output_tokens`` ``[B, T]``: ``<s> y_1 .. y_{T-1}`` (teacher forcing); the training target is
  ``y_1 .. y_{T-1} </s>``, right-padded.
* Attention matrices are always reported over the source positions **in the order given**
  (source reversal is an internal detail of the encoder and is undone before anything leaves
  the model), padding positions get exactly zero weight, the ``</s>`` column is included.
* An :class:`EncoderOutput` holds only batch-first tensors, so reordering it for beam search is
  ``index_select(0, order)`` on each (see :func:`reorder_tensors`).  A decoder state is opaque
  to the search: it is reordered only through the model's ``reorder_decoder_state`` (by default
  the same ``index_select``; the Transformer defers it to its next step).  An ``order`` may be
  longer than the rows it selects from: the eager search decodes one row per sentence at its
  first step and then gives each sentence ``beam`` rows, each continuing one of those.
* A model with ``shares_encoder_rows = True`` also accepts a decoder batch of ``N = g * B`` rows
  against an encoder output of ``B`` sentences, rows ``k*g .. k*g+g-1`` belonging to sentence
  ``k`` (:func:`rows_per_sentence`).  Beam search then keeps one copy of the encoder states per
  sentence instead of one per hypothesis (less memory, and attention reads each sentence's
  states once per step for all its hypotheses).
"""
from __future__ import annotations

from abc import ABCMeta, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator, Optional

import torch
from torch import Tensor, nn

if TYPE_CHECKING:
    from nmtkit.models.gemm import PackedLinear
    from nmtkit.models.loop_graphs import LoopGraphs

DecoderState = dict[str, Tensor]


def rows_per_sentence(n_rows: int, enc: "EncoderOutput") -> int:
    """``g`` of a decoder batch of ``n_rows = g * B`` rows against ``B`` encoded sentences."""
    n_sent = enc.mask.size(0)
    if n_sent == 0 or n_rows % n_sent:
        raise ValueError(f"{n_rows} decoder rows cannot be split evenly over {n_sent} encoded sentences")
    return n_rows // n_sent


def reorder_tensors(d: dict[str, Tensor], order: Tensor) -> dict[str, Tensor]:
    """Select batch rows ``order`` (dim 0) of every tensor in ``d``."""
    return {k: v.index_select(0, order) for k, v in d.items()}


def log_probs(logits: Tensor) -> Tensor:
    """Float32 log-softmax over the last dimension of ``logits``, written over them where they are
    a float32 tensor outside autograd (the caller's temporary: it must not read them again).

    Why: a search step's logits are rows x V floats (beam 5 x batch 64 x 8k words: 10 MB, beyond
    the core's caches); a second tensor of that size costs a pass of page faults and writes to
    memory every step."""
    x = logits.float()
    if x.requires_grad and torch.is_grad_enabled():
        return torch.log_softmax(x, dim=-1)
    return torch.log_softmax(x, dim=-1, out=x)


@dataclass
class EncoderOutput:
    """What the encoder computes once per sentence and the decoder reads every step.

    ``states``: ``[B, S, H]`` annotations in original source order; ``mask``: ``[B, S]`` bool,
    True at real tokens; ``extra``: model-specific precomputed tensors (for example the source
    states projected for the ``general``/``concat`` scores, or the final encoder states that
    initialise the decoder), batch-first.
    """

    states: Tensor
    mask: Tensor
    extra: dict[str, Tensor] = field(default_factory=dict)

    def reorder(self, order: Tensor) -> "EncoderOutput":
        return EncoderOutput(
            states=self.states.index_select(0, order),
            mask=self.mask.index_select(0, order),
            extra=reorder_tensors(self.extra, order),
        )

    @property
    def lengths(self) -> Tensor:
        return self.mask.sum(dim=1)


class Seq2SeqModel(nn.Module, metaclass=ABCMeta):
    """Base class of registered models.

    Subclasses set ``Config`` (a dataclass of every option with its default) and implement
    :meth:`encode`, :meth:`init_decoder_state`, :meth:`decode_step` and :meth:`forward`.
    ``model_name`` is filled in by ``@register_model``.
    """

    model_name: ClassVar[str] = ""
    Config: ClassVar[type]
    #: False for the attention-free baseline: decode_step then returns ``attn=None`` (a model
    #: may set it per instance, from its Config).
    has_attention: bool = True
    #: True when decode_step accepts ``g`` rows per encoded sentence (see the module docstring).
    shares_encoder_rows: ClassVar[bool] = False
    #: True when the reported attention is one of several layers and heads (:meth:`choose_alignment`).
    has_attention_layers: ClassVar[bool] = False
    #: True when :meth:`forward_with_posterior` is implemented (see nmtkit.models.posterior).
    has_posterior: bool = False
    #: Why a model without ``has_posterior`` has none, for the one-line refusal of ``--posterior``
    #: and ``--unk-posterior``: the posterior needs an output computed from one attention context,
    #: which can be replaced by a single source word's annotation.
    no_posterior_reason: str = "its output is not read from one attention context"
    #: True when some parameters learn only from the guided-alignment loss (RNNsearch's
    #: ``alignment_head``): training refuses to run without that loss.
    needs_guided_alignment: bool = False
    #: Names of ``Linear`` submodules whose output feeds the next decoder step besides the
    #: recurrent state (Luong's ``W_c`` under input feeding): ``--quantize int8`` keeps them in
    #: bf16, since int8 rounding there compounds over the steps (nmtkit.generate.quantize).
    feedback_layers: tuple[str, ...] = ()
    #: CUDA graphs of the teacher-forced step loop (nmtkit.models.loop_graphs), attached by the
    #: trainer with ``--cuda-graphs``; None: the loop runs eagerly.
    loop_graphs: Optional["LoopGraphs"] = None
    #: Where ``--cuda-graphs`` applies: "train" (the teacher-forced step loop, see loop_graphs)
    #: and "search" (the fixed-shape search, which needs a decoder state of fixed size).
    cuda_graph_support: ClassVar[frozenset[str]] = frozenset({"train", "search"})

    #: Set by every model: the options it was built with, its dictionaries, its output layer.
    cfg: Any
    src_dict: Any
    tgt_dict: Any
    output_projection: Any  # an nn.Linear, or its int8/bf16 form at inference

    def __init__(self, cfg, src_dict, tgt_dict) -> None:  # noqa: ANN001
        super().__init__()
        self.cfg = cfg
        self.src_dict = src_dict
        self.tgt_dict = tgt_dict

    # -- to implement (abstract: a subclass missing one cannot be instantiated) -------
    @abstractmethod
    def encode(self, src_tokens: Tensor, src_lengths: Tensor) -> EncoderOutput:
        """Run the encoder once per sentence."""

    @abstractmethod
    def init_decoder_state(self, enc: EncoderOutput) -> DecoderState:
        """The decoder state before the first target step."""

    @abstractmethod
    def decode_step(
        self, prev_tokens: Tensor, state: DecoderState, enc: EncoderOutput, need_attention: bool = True
    ) -> tuple[Tensor, Optional[Tensor], DecoderState]:
        """One decoder step for ``N`` rows: ``prev_tokens`` ``[N]`` ->
        (log-probabilities ``[N, V]``, attention ``[N, S]`` or None, new state).

        ``need_attention=False``: the search keeps no attention (no alignments, no
        ``--replace-unk``), so a model may skip the work of reporting it and return None, as in
        :meth:`forward`; a recurrent model's attention is part of its step and costs nothing extra."""

    def forward(
        self, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor, need_attention: bool = True,
        features_only: bool = False,
    ) -> tuple[Tensor, Optional[Tensor]]:
        """Teacher-forced pass: (logits ``[B, T, V]``, attention ``[B, T, S]`` or None).

        ``need_attention=False``: the caller reads only the logits (training without a guided
        loss, validation, perplexity), so a model whose reported attention costs extra work
        (the Transformer's written-out alignment layer, its full-context pass; RNNsearch's
        alignment head) may skip it and return None.
        ``features_only``: the features ``[B, T, F]`` that :attr:`output_projection` maps to
        the logits, in their place (where :func:`trains_from_features`): the loss is then
        computed without the ``[B, T, V]`` logits (:func:`nmtkit.train.loss.output_layer_loss`).
        Through ``forward`` (not :meth:`forward_features`), so that DistributedDataParallel
        sees the call."""
        features, attn = self.forward_features(src_tokens, src_lengths, prev_output_tokens, need_attention)
        return (features if features_only else self.output_projection(features)), attn

    @abstractmethod
    def forward_features(
        self, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor, need_attention: bool = True
    ) -> tuple[Tensor, Optional[Tensor]]:
        """The teacher-forced pass up to the output layer: (features ``[B, T, F]``, attention as
        :meth:`forward`'s); :meth:`forward` maps the features to logits by
        :attr:`output_projection`.  A model that computes its logits otherwise returns them here
        with a parameter-free ``output_projection`` (``nn.Identity``), and is trained from them."""

    def forward_with_posterior(
        self, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor, targets: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Teacher-forced pass that also knows the words emitted (``targets`` ``[B, T]``, i.e.
        ``y_1 .. </s>``; a ``<pad>`` there skips that row, whose posterior is then the prior):
        (logits ``[B, T, V]``, attention posterior ``[B, T, S]``); only where ``has_posterior``
        (see :mod:`nmtkit.models.posterior`).  The prior is the decoder's own attention, also in
        a model with an alignment head (which ``forward`` reports instead)."""
        from nmtkit.errors import NmtkitError  # an optional capability: a refusal, not a missing method

        raise NmtkitError(f"{self.model_name} computes no attention posterior: {self.no_posterior_reason}")

    def max_target_len(self) -> Optional[int]:
        """The largest output bound the decoder can take (the search's ``max_len``: its step
        ``max_len`` forces ``</s>``), or None when it has no limit."""
        return None

    def choose_alignment(self, layer: Optional[int], heads: Optional[int]) -> None:
        """Report the attention of decoder layer ``layer``, averaged over its first ``heads`` heads
        (None: as configured), as fairseq's ``--alignment-layer``/``--alignment-heads``; only a
        model with several attention layers has a choice (the Transformer)."""
        from nmtkit.errors import NmtkitError

        raise NmtkitError(f"--alignment-layer/--alignment-heads: {self.model_name} has one attention to read, "
                          "not layers of heads to choose from")

    def max_source_len(self) -> Optional[int]:
        """The longest source (pieces, without ``</s>``) the model can attend over in full, or
        None when it has no limit.  Translation truncates longer inputs (with a warning)."""
        return None

    # -- shared ----------------------------------------------------------------------
    def reorder_decoder_state(self, state: DecoderState, order: Tensor) -> DecoderState:
        return reorder_tensors(state, order)

    #: The output layer restricted to a vocabulary shortlist, or None (see restrict_output).
    _output_rows: Optional[Callable[[Tensor], Tensor]] = None
    #: The output layer of the search under way (see :meth:`searching`), or None.
    _packed_output: Optional["PackedLinear"] = None
    #: Other products prepared for the search under way (a decoder LSTM's joined layers:
    #: :func:`~nmtkit.models.common.rnn_step`), filled by its first step; None outside a search.
    _search_cache: Optional[dict[Any, Any]] = None

    def restrict_output(self, ids: Optional[Tensor]) -> None:
        """Compute logits only for the target ids ``ids`` (sorted; a vocabulary shortlist) until
        called with None.  Why here: the output projection's rows are sliced once per batch, not
        every step, and :meth:`project_output` then costs ``len(ids)`` instead of ``V`` rows."""
        from nmtkit.models.common import select_output_rows

        self._output_rows = None if ids is None else select_output_rows(self.output_projection, ids)

    @contextmanager
    def searching(self) -> Iterator[None]:
        """One batch's search: its weights stay as they are, so the output layer may be prepared
        once for all its steps (:class:`~nmtkit.models.gemm.PackedLinear`, the bias folded
        into the product on the MKL path), and so may a decoder LSTM's layers (one product each:
        :func:`~nmtkit.models.gemm.joined_lstm_cell`).  Scoped to the block, not cached on the model: an
        optimizer step (the fused Adam bumps no version counter), an EMA swap or a checkpoint
        loaded between two searches can never be served stale."""
        from nmtkit.models.gemm import PackedLinear

        layer = getattr(self, "output_projection", None)  # a model may compute its log-probs otherwise
        self._packed_output = PackedLinear(layer.weight, layer.bias) if isinstance(layer, nn.Linear) else None
        self._search_cache = {}
        try:
            yield
        finally:
            self._packed_output = None
            self._search_cache = None

    def project_output(self, x: Tensor) -> Tensor:
        """The output layer (logits) as ``decode_step`` uses it: over the shortlist when one is
        set, else as prepared for the search under way (:meth:`searching`), else the layer."""
        rows = self._output_rows
        if rows is not None:
            return rows(x)
        packed = self._packed_output
        return self.output_projection(x) if packed is None else packed(x)

    def trains_from_features(self) -> bool:
        """Whether ``forward(..., features_only=True)`` gives what :attr:`output_projection` (an
        ``nn.Linear``) maps to the logits: every built-in model; not one whose output layer is of
        another kind, nor one that overrides :meth:`forward`."""
        return type(self).forward is Seq2SeqModel.forward and isinstance(self.output_projection, nn.Linear)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
