"""Several models behind the single-model step API, so search has one code path.

Why: beam search, forced decoding and alignment all talk to an :class:`EnsembleModel`; a lone
model is an ensemble of one.  Members may differ in architecture but must share both
dictionaries, because their distributions are averaged token id by token id.

Combination rule: the ensemble probability is the mean of the members' probabilities,
computed in log space as ``logsumexp_m(log p_m) - log n``; attention is the mean over the
members that report attention (``None`` when none does).
"""
from __future__ import annotations

import math
from contextlib import ExitStack, contextmanager
from typing import Iterator, Optional, Sequence, cast

import torch
from torch import Tensor, nn

from nmtkit.data.dictionary import Dictionary
from nmtkit.errors import NmtkitError
from nmtkit.models.base import DecoderState, EncoderOutput, Seq2SeqModel, log_probs


def _check_dictionaries(models: Sequence[Seq2SeqModel], names: Sequence[str]) -> None:
    """Refuse members whose source or target symbol lists differ (compared by checksum)."""
    for side in ("src_dict", "tgt_dict"):
        ref: Dictionary = getattr(models[0], side)
        ref_sum = ref.checksum()
        for name, m in zip(names[1:], models[1:]):
            d: Dictionary = getattr(m, side)
            if d.checksum() != ref_sum:
                which = "source" if side == "src_dict" else "target"
                raise NmtkitError(
                    f"cannot ensemble {names[0]} and {name}: their {which} dictionaries differ "
                    f"({len(ref)} vs {len(d)} symbols); ensembled models must share dictionaries"
                )


def mean_log_probs(log_probs: Sequence[Tensor]) -> Tensor:
    """log of the mean probability over members: ``logsumexp(stack) - log n`` (exact for n=1)."""
    if len(log_probs) == 1:
        return log_probs[0].float()
    stacked = torch.stack([lp.float() for lp in log_probs], dim=0)
    return torch.logsumexp(stacked, dim=0) - math.log(len(log_probs))


def mean_attention(attns: Sequence[Optional[Tensor]]) -> Optional[Tensor]:
    """Mean over the members that returned attention; ``None`` when none did."""
    present = [a.float() for a in attns if a is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]
    return torch.stack(present, dim=0).mean(dim=0)


class EnsembleModel(nn.Module):
    """The step API of :class:`Seq2SeqModel` over lists of per-member encoder outputs/states.

    ``names`` (checkpoint paths, normally) are only used in error messages.  The members are
    put in eval mode: an ensemble exists for inference.
    """

    def __init__(self, models: Sequence[Seq2SeqModel], names: Optional[Sequence[str]] = None) -> None:
        super().__init__()
        if not models:
            raise NmtkitError("an ensemble needs at least one model")
        names = list(names) if names is not None else [f"model {i + 1}" for i in range(len(models))]
        if len(names) != len(models):
            raise ValueError("one name per model is required")
        _check_dictionaries(models, names)
        self.models = nn.ModuleList(models)
        self.names = names
        self.eval()

    # -- shared facts -------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.models)

    @property
    def members(self) -> list[Seq2SeqModel]:
        """The models, typed (``nn.ModuleList`` items are plain modules to a type checker)."""
        return cast("list[Seq2SeqModel]", list(self.models))

    @property
    def src_dict(self) -> Dictionary:
        return self.members[0].src_dict

    @property
    def tgt_dict(self) -> Dictionary:
        return self.members[0].tgt_dict

    @property
    def has_attention(self) -> bool:
        return any(getattr(m, "has_attention", True) for m in self.members)

    @property
    def has_posterior(self) -> bool:
        return all(getattr(m, "has_posterior", False) for m in self.members)

    def no_posterior_error(self, what: str) -> NmtkitError:
        """The one-line refusal of ``what`` (an option needing the attention posterior): why each
        member without one has none."""
        why = "; ".join(f"{name}: {m.no_posterior_reason}" for name, m in zip(self.names, self.members) if not m.has_posterior)
        return NmtkitError(f"{what}: no attention posterior in {why} (rnnsearch and luong models with attention compute one)")

    @property
    def shares_encoder_rows(self) -> bool:
        """Every member decodes ``g`` rows per encoded sentence (beam search keeps one encoder copy)."""
        return all(getattr(m, "shares_encoder_rows", False) for m in self.members)

    @property
    def cuda_graph_support(self) -> frozenset[str]:
        """Where ``--cuda-graphs`` applies to every member (see Seq2SeqModel.cuda_graph_support)."""
        return frozenset.intersection(*(frozenset(getattr(m, "cuda_graph_support", ())) for m in self.members))

    def choose_alignment(self, layer: Optional[int], heads: Optional[int]) -> None:
        """``--alignment-layer``/``--alignment-heads`` for the members that have layers of heads to
        choose from (a Transformer beside a recurrent model: the Transformer's); with none, the
        first member's one-line refusal."""
        choosers = [m for m in self.members if m.has_attention_layers] or self.members[:1]
        for member in choosers:
            member.choose_alignment(layer, heads)

    def max_source_len(self) -> Optional[int]:
        """The longest source every member can take in full (None: no member has a limit)."""
        limits = [n for n in (m.max_source_len() for m in self.members) if n is not None]
        return min(limits) if limits else None

    def max_target_len(self) -> Optional[int]:
        """The largest output bound every member can decode (None: no member has a limit)."""
        limits = [n for n in (m.max_target_len() for m in self.members) if n is not None]
        return min(limits) if limits else None

    # -- step API -------------------------------------------------------------------------
    def encode(self, src_tokens: Tensor, src_lengths: Tensor) -> list[EncoderOutput]:
        return [m.encode(src_tokens, src_lengths) for m in self.members]

    def init_decoder_state(self, encs: Sequence[EncoderOutput]) -> list[DecoderState]:
        return [m.init_decoder_state(e) for m, e in zip(self.members, encs)]

    def decode_step(
        self, prev_tokens: Tensor, states: Sequence[DecoderState], encs: Sequence[EncoderOutput],
        need_attention: bool = True,
    ) -> tuple[Tensor, Optional[Tensor], list[DecoderState]]:
        """One step for ``N`` rows -> (float32 log-probs ``[N, V]``, attention ``[N, S]`` or None,
        new states; None also when not ``need_attention``).  The returned log-prob tensor may be
        modified in place by the caller."""
        lps, attns, new_states = [], [], []
        for m, s, e in zip(self.members, states, encs):
            lp, a, ns = m.decode_step(prev_tokens, s, e, need_attention)
            lps.append(lp)
            attns.append(a)
            new_states.append(ns)
        return mean_log_probs(lps), (mean_attention(attns) if need_attention else None), new_states

    @contextmanager
    def searching(self) -> Iterator[None]:
        """One batch's search by every member (:meth:`Seq2SeqModel.searching`)."""
        with ExitStack() as stack:
            for m in self.members:
                stack.enter_context(m.searching())
            yield

    @contextmanager
    def restrict_output(self, ids: Optional[Tensor]) -> Iterator[None]:
        """Within the block, every member computes log-probs over the same shortlist ``ids``
        only (columns in the order of ``ids``); None restricts nothing."""
        if ids is None:
            yield
            return
        try:
            for m in self.members:
                m.restrict_output(ids)
            yield
        finally:
            for m in self.members:
                m.restrict_output(None)

    def reorder_encoder_out(self, encs: Sequence[EncoderOutput], order: Tensor) -> list[EncoderOutput]:
        return [e.reorder(order) for e in encs]

    def reorder_decoder_state(self, states: Sequence[DecoderState], order: Tensor) -> list[DecoderState]:
        return [m.reorder_decoder_state(s, order) for m, s in zip(self.members, states)]

    # -- teacher forcing ---------------------------------------------------------------
    def forward_log_probs(
        self, src_tokens: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor,
        posterior_targets: Optional[Tensor] = None, need_attention: bool = True,
    ) -> tuple[Tensor, Optional[Tensor]]:
        """All steps at once via each member's ``forward``: (log-probs ``[B, T, V]``,
        attention ``[B, T, S]`` or None), combined like :meth:`decode_step`.  With
        ``posterior_targets`` (the words emitted, ``[B, T]``) the attention is each member's
        attention posterior (:meth:`Seq2SeqModel.forward_with_posterior`), averaged.
        ``need_attention=False``: only the log-probabilities are read (see :meth:`Seq2SeqModel.forward`)."""
        if posterior_targets is not None and not self.has_posterior:
            raise self.no_posterior_error("the attention posterior")
        lps, attns = [], []
        for m in self.members:
            if posterior_targets is not None:
                logits, a = m.forward_with_posterior(src_tokens, src_lengths, prev_output_tokens, posterior_targets)
            else:
                logits, a = m(src_tokens, src_lengths, prev_output_tokens, need_attention=need_attention)
            lps.append(log_probs(logits))
            attns.append(a)
        return mean_log_probs(lps), mean_attention(attns)
