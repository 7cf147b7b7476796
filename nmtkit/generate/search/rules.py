"""Every convention of the beam search, written once; both executors call these.

The eager executor (:mod:`.eager`: a batch that shrinks as sentences complete) and the
fixed-shape executor (:mod:`.fixed_shape`: slots, CUDA graphs) differ only in how they keep the
search's state; what a step *decides* is here.  A new rule (coverage, n-gram blocking, prefix
constraints) is written here and both executors follow it.

Conventions (documented because tests and CLIs rely on them):

* Every step takes the ``2 * beam`` best (hypothesis, token) candidates of each sentence
  (:func:`candidates`).  ``</s>`` candidates among the first ``beam`` of them become finished
  hypotheses while the sentence has room (:func:`accept_finished`); the first ``beam``
  non-``</s>`` candidates continue (:func:`split`).  A sentence is complete once it holds
  ``beam`` finished hypotheses, when it reaches its maximum length, or when no candidate with
  finite score is left (:func:`still_searching`).  ``beam=1`` is therefore exactly greedy
  decoding.
* Ties are broken deterministically (:func:`top_candidates`): candidates with equal
  cumulative score are ranked by beam position (earlier, i.e. better-ranked, hypothesis
  first), then by lower token id.  Finished hypotheses with equal normalized score keep the
  order in which they finished (shorter first; within one step, the better-ranked candidate
  first; :func:`best`).
* Lengths (:func:`max_output_lengths`, :func:`constrain_`): ``min_len`` is the minimum number
  of tokens before ``</s>`` (``</s>`` is forbidden earlier); ``max_len = int(max_len_a * n_src
  + max_len_b)`` per sentence, with ``n_src`` the number of source tokens excluding ``</s>``;
  after ``max_len`` tokens ``</s>`` is forced (with its real probability).  ``max_len`` wins
  over ``min_len``.
* ``<pad>`` and ``<s>`` are never produced.  ``unkpen`` is subtracted from the ``<unk>``
  log-probability for ranking; ``positional_scores`` stay the model's log-probabilities.
* Length penalty (:func:`length_penalty`), with ``L = len(tokens) + 1`` (the ``</s>`` step
  counts): ``fairseq``: ``score = sum / L ** lenpen``; ``gnmt``: ``score = sum / ((5 + L) / 6)
  ** lenpen`` where ``sum`` is the cumulative (unk-penalized) log-probability; divided on the
  host in double precision.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Union

import torch
from torch import Tensor

from nmtkit.data.dictionary import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from nmtkit.errors import NmtkitError
from nmtkit.generate.search.hypothesis import Hypothesis
from nmtkit.generate.search.topk import CandidateScores
from nmtkit.generate.search_options import LENPEN_FORMS, SearchOptions
from nmtkit.models.base import DecoderState, EncoderOutput
from nmtkit.utils.checks import one_of_message

NEG_INF = float("-inf")

#: A top-k in the search's tie order: ``(candidate scores [n, W], k) -> (values, columns)``, both ``[n, k]``.
TopK = Callable[[CandidateScores, int], "tuple[Tensor, Tensor]"]


# -- start-up ----------------------------------------------------------------------------------
def max_output_lengths(src_lengths: list[int], max_len_a: float, max_len_b: int,
                       model_limit: Optional[int] = None) -> list[int]:
    """Each sentence's output bound ``int(max_len_a * n_src + max_len_b)``, ``n_src`` its source
    tokens without ``</s>`` (the lengths given include it), at most ``model_limit`` (the model's
    :meth:`~nmtkit.models.base.Seq2SeqModel.max_target_len`: ``</s>`` is then forced where the
    model runs out of positions, instead of failing mid-search)."""
    cap = model_limit if model_limit is not None else float("inf")
    return [int(min(max(0, int(max_len_a * (n - 1) + max_len_b)), cap)) for n in src_lengths]


def start(model, src_tokens: Tensor, src_lengths: Tensor, beam: int  # noqa: ANN001 - an EnsembleModel
          ) -> tuple[list[EncoderOutput], list[DecoderState]]:
    """Encode, and give each sentence ``beam`` decoder rows (the eager search starts with one:
    its first step's candidates fill the beam).  Models that declare ``shares_encoder_rows`` (all
    built-in ones) keep one copy of the encoder output per sentence, read by its ``beam`` rows
    together; the others get one per row.  The states are the model's own tensors, never views
    of the encoder output (the fixed-shape search writes into them)."""
    encs = model.encode(src_tokens, src_lengths)
    per_row = torch.arange(src_tokens.size(0), device=src_tokens.device).repeat_interleave(beam)
    if model.shares_encoder_rows:
        return encs, model.reorder_decoder_state(model.init_decoder_state(encs), per_row)
    encs = model.reorder_encoder_out(encs, per_row)
    return encs, model.init_decoder_state(encs)


# -- one step ----------------------------------------------------------------------------------
def constrain_(lprobs: Tensor, step: Union[int, Tensor], o: SearchOptions, max_len_rows: Tensor,
               force: bool = True) -> None:
    """The search's rules on one step's log-probs ``[rows, V]``, in place: never ``<pad>``/``<s>``,
    the unk penalty, no ``</s>`` before ``min_len``, and ``</s>`` forced (with its real
    probability) on rows at their maximum length.  ``step``: a number, or a tensor (fixed-shape
    steps read it on the device); ``force=False`` says no row is at its bound (a host-side skip)."""
    if force:
        eos_lp = lprobs[:, EOS_ID].clone()
    lprobs[:, PAD_ID] = NEG_INF
    lprobs[:, BOS_ID] = NEG_INF
    if o.unkpen:
        lprobs[:, UNK_ID] -= o.unkpen
    if isinstance(step, Tensor):
        if o.min_len > 0:
            lprobs[:, EOS_ID] = torch.where(step < o.min_len, NEG_INF, lprobs[:, EOS_ID])
    elif step < o.min_len:
        lprobs[:, EOS_ID] = NEG_INF
    if force:
        forced = max_len_rows <= step
        lprobs.masked_fill_(forced.unsqueeze(1), NEG_INF)
        lprobs[:, EOS_ID] = torch.where(forced, eos_lp, lprobs[:, EOS_ID])


def top_candidates(cand: CandidateScores, k: int, topk: TopK) -> tuple[Tensor, Tensor]:
    """The ``k`` best of each sentence's candidates, by descending score, equal scores by lower
    column (so by earlier hypothesis, then lower token id), padded with ``-inf`` where a row is
    narrower than ``k`` (tiny vocabularies).  ``topk``: one of :mod:`.topk`'s forms of that order."""
    vals, flat = topk(cand, k)
    if vals.size(1) < k:
        pad = k - vals.size(1)
        vals = torch.cat([vals, vals.new_full((vals.size(0), pad), NEG_INF)], dim=1)
        flat = torch.cat([flat, flat.new_zeros((flat.size(0), pad))], dim=1)
    return vals, flat


@dataclass
class Candidates:
    """The ``2 * beam`` best (hypothesis, token) continuations of each sentence, each ``[n, 2*beam]``."""

    vals: Tensor     # cumulative (unk-penalised) scores
    rows: Tensor     # flat row ids of the hypotheses they extend (rows of this step's log-probs)
    tok: Tensor      # token ids
    step_lp: Tensor  # the model's own log-prob of each token


def candidates(lprobs: Tensor, scores: Tensor, cand: Optional[Tensor], beam: int, o: SearchOptions, topk: TopK,
               per: Optional[int] = None, columns: Optional[Tensor] = None) -> Candidates:
    """The best ``2 * beam`` candidates of each sentence: each row's cumulative score plus its
    constrained log-probs (:class:`~.topk.CandidateScores`; ``cand``, a ``[rows, V]`` buffer
    reused by the steps, takes them where a form of the top-k writes them all out).
    ``per``: the rows of each sentence (``beam``, the default; 1 at the eager search's first step,
    before the beam is filled).  ``columns``: column ``c`` of the log-probs is token ``columns[c]``
    (a shortlist)."""
    per = beam if per is None else per
    vocab = lprobs.size(1)
    n = lprobs.size(0) // per
    vals, flat = top_candidates(CandidateScores(lprobs, scores, per, cand), 2 * beam, topk)
    tok = flat.remainder(vocab)
    rows = torch.arange(n, device=vals.device).unsqueeze(1) * per + torch.div(flat, vocab, rounding_mode="floor")
    step_lp = lprobs.view(-1).gather(0, (rows * vocab + tok).view(-1)).view(n, 2 * beam)
    if o.unkpen:
        step_lp = step_lp + o.unkpen * (tok == UNK_ID)  # record the model's own log-prob
    if columns is not None:
        tok = columns[tok]
    return Candidates(vals, rows, tok, step_lp)


@dataclass
class Split:
    """What one step's candidates become: ``ends`` ``[n, beam]``, the valid ``</s>`` candidates
    among the first ``beam``; the ``beam`` continuing hypotheses (``-inf`` scores where fewer
    than ``beam`` are valid), ``[n, beam]`` each."""

    ends: Tensor
    scores: Tensor
    rows: Tensor
    tok: Tensor
    lp: Tensor

    @property
    def can_continue(self) -> Tensor:
        """``[n]``: the sentence has a continuing hypothesis of finite score."""
        return self.scores[:, 0] > NEG_INF


def split(c: Candidates, beam: int) -> Split:
    """The continue/finish split: ``</s>`` candidates among the first ``beam`` end, the first
    ``beam`` valid non-``</s>`` candidates continue, in candidate order."""
    valid = c.vals > NEG_INF
    ends = (c.tok[:, :beam] == EOS_ID) & valid[:, :beam]
    goes_on = (c.tok != EOS_ID) & valid
    order_key = torch.arange(2 * beam, device=c.vals.device) + (~goes_on).long() * (2 * beam)
    sel = order_key.argsort(dim=1)[:, :beam]
    scores = c.vals.gather(1, sel).masked_fill(~goes_on.gather(1, sel), NEG_INF)
    return Split(ends, scores, c.rows.gather(1, sel), c.tok.gather(1, sel), c.step_lp.gather(1, sel))


def accept_finished(ends: Tensor, fin_count: Tensor, beam: int, alive: Optional[Tensor] = None
                    ) -> tuple[Tensor, Tensor]:
    """Which ``</s>`` candidates ``ends`` ``[n, beam]`` become finished hypotheses: those that
    fit their (live) sentence's ``beam`` finished slots, taken in candidate order after those of
    earlier steps -> (accepted ``[n, beam]``, each candidate's rank among its sentence's ends)."""
    rank = ends.long().cumsum(1) - 1
    accept = ends & (rank < (beam - fin_count).unsqueeze(1))
    if alive is not None:
        accept &= alive.unsqueeze(1)
    return accept, rank


def still_searching(fin_count: Tensor, step: Union[int, Tensor], max_len: Tensor, can_continue: Tensor,
                    beam: int) -> Tensor:
    """``[n]``: a sentence searches on while it has room for finished hypotheses, is below its
    maximum length and has a continuing hypothesis of finite score."""
    return (fin_count < beam) & (step < max_len) & can_continue


# -- finalisation ------------------------------------------------------------------------------
def length_penalty(length: int, lenpen: float, form: str) -> float:
    """The divisor applied to a cumulative log-probability of ``length`` steps."""
    if form == "fairseq":
        return float(length) ** lenpen
    if form == "gnmt":
        return ((5.0 + length) / 6.0) ** lenpen
    raise NmtkitError(one_of_message("--lenpen-form", form, LENPEN_FORMS))


def finished(tokens: list[int], total: float, length: int, positional: Tensor, attention: Optional[Tensor],
             o: SearchOptions) -> Hypothesis:
    """A finished hypothesis of ``length`` steps (``</s>`` included) whose cumulative score is
    ``total``: its score is ``total`` over the length penalty (CPU tensors, made float32)."""
    return Hypothesis(tokens=tokens, score=total / length_penalty(length, o.lenpen, o.lenpen_form),
                      positional_scores=positional.float(), attention=None if attention is None else attention.float(),
                      length=length)


def best(hyps: list[Hypothesis], nbest: int) -> list[Hypothesis]:
    """A sentence's ``nbest`` best, by score; a stable sort: earlier-finished wins ties."""
    return sorted(hyps, key=lambda h: -h.score)[:nbest]
