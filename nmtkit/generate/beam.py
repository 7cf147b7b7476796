"""Batched beam search over a flat (sentences x beam) decoder state.

Design (why it is fast): all live hypotheses of all unfinished sentences form one flat batch
of ``n_sentences * beam`` rows; each step is one decoder call, one top-k over
``beam * V`` scores per sentence and a few gathers.  Python only touches the (at most
``beam`` per sentence) hypotheses that end at a step.  Sentences that are complete leave
the batch at once (encoder outputs and states are shrunk with ``reorder``), so long
sentences do not drag finished ones along.  Models that declare ``shares_encoder_rows`` (all
built-in ones) keep one copy of the encoder output per sentence, not per hypothesis: a
sentence's ``beam`` rows attend to it together.

Conventions (documented because tests and CLIs rely on them):

* Every step takes the ``2 * beam`` best (hypothesis, token) candidates of each sentence.
  ``</s>`` candidates among the first ``beam`` of them become finished hypotheses; the
  first ``beam`` non-``</s>`` candidates continue.  A sentence is complete once it holds
  ``beam`` finished hypotheses, when it reaches its maximum length, or when no candidate
  with finite score is left.  ``beam=1`` is therefore exactly greedy decoding.
* Ties are broken deterministically: candidates with equal cumulative score are ranked by
  beam position (earlier, i.e. better-ranked, hypothesis first), then by lower token id.
  Finished hypotheses with equal normalized score keep the order in which they finished
  (shorter first; within one step, the better-ranked candidate first).
* Lengths: ``min_len`` is the minimum number of tokens before ``</s>`` (``</s>`` is
  forbidden earlier); ``max_len = int(max_len_a * n_src + max_len_b)`` per sentence, with
  ``n_src`` the number of source tokens excluding ``</s>``; after ``max_len`` tokens
  ``</s>`` is forced (with its real probability).  ``max_len`` wins over ``min_len``.
* ``<pad>`` and ``<s>`` are never produced.  ``unkpen`` is subtracted from the ``<unk>``
  log-probability for ranking; ``positional_scores`` stay the model's log-probabilities.
* Length penalty, with ``L = len(tokens) + 1`` (the ``</s>`` step counts):
  ``fairseq``: ``score = sum / L ** lenpen``; ``gnmt``: ``score = sum / ((5 + L) / 6) ** lenpen``
  where ``sum`` is the cumulative (unk-penalized) log-probability.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from nmtkit.data.dictionary import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from nmtkit.generate.ensemble import EnsembleModel
from nmtkit.generate.hypothesis import Hypothesis, length_penalty
from nmtkit.generate.search_options import SearchOptions, max_output_lengths
from nmtkit.generate.static_search import SearchGraphs

_NEG_INF = float("-inf")


#: Elements per group of :func:`chunked_topk`.
TOPK_GROUP = 8


def chunked_topk(scores: Tensor, m: int) -> Optional[tuple[Tensor, Tensor]]:
    """``scores.topk(m, dim=1)`` in two stages, or None where that would not be exact or fast.

    Why: ATen's CPU top-k over a sentence's ``beam * V`` candidates cost 0.47 ms for 64 rows of
    10,000 (one thread), ten times a maximum over the same numbers.  Each row's columns are split
    into groups of :data:`TOPK_GROUP` (group ``g``: columns ``g, g + G, g + 2G, ...``, so that
    the group maxima are one vectorised maximum over rows of the ``[n, TOPK_GROUP, G]`` view), the
    groups are ranked by their maxima, and the top-``m`` is taken among the elements of the
    ``m`` best groups only: 0.18 ms.  When the ``m``-th best group maximum is finite and above
    the ``m+1``-th, every element outside those groups is below every one of their maxima, so
    the ``m`` largest elements, and every element equal to one of them, lie in the chosen
    groups: the values are exactly ``torch.topk``'s and ties can be ordered as in a full top-k
    (:func:`topk_ordered`).  The rows where that does not hold (ties at the cut, fewer than ``m``
    finite groups: rare with real models) take the full top-k, those rows only.  None for rows
    with fewer than ``64 (m + 1)`` groups,
    where ATen's top-k of the maxima leaves its partial-sort path and costs more than it saves,
    and off the CPU (a GPU's top-k is fast, and its decoder loop is bound by kernel launches).
    ``scores`` ``[n, W]``, ``W`` a multiple of :data:`TOPK_GROUP`; the result is sorted by
    descending value, ties in no specified order."""
    n, width = scores.shape
    groups = width // TOPK_GROUP
    if width % TOPK_GROUP or groups < 64 * (m + 1) or scores.device.type != "cpu":
        return None
    view = scores.view(n, TOPK_GROUP, groups)
    top_max, top_group = view.amax(1).topk(m + 1, dim=1)
    cut = top_max[:, m - 1]
    inexact = ((cut <= top_max[:, m]) | (cut == _NEG_INF)).nonzero().squeeze(1)
    chosen = top_group[:, :m]
    elems = view.gather(2, chosen.unsqueeze(1).expand(n, TOPK_GROUP, m)).reshape(n, TOPK_GROUP * m)
    vals, pos = elems.topk(m, dim=1)
    idx = chosen.gather(1, pos % m) + (pos // m) * groups
    if inexact.numel():
        full_vals, full_idx = scores.index_select(0, inexact).topk(m, dim=1)
        vals.index_copy_(0, inexact, full_vals)
        idx.index_copy_(0, inexact, full_idx)
    return vals, idx


def topk_ordered(scores: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Row-wise top-``k`` by descending score, ties going to the lower column index.

    ``torch.topk`` does not specify which of equal elements it returns, so rows whose
    ``k``-th value equals the ``k+1``-th (a tie across the cut) are redone with a stable sort
    (rare with real models; common with the hand-made tables of the tests).  Wide rows whose
    width is a multiple of :data:`TOPK_GROUP` take :func:`chunked_topk` where it is exact.
    """
    k = min(k, scores.size(1))
    extra = int(k < scores.size(1))  # one more element tells whether a tie crosses the boundary
    fast = chunked_topk(scores, k + extra)
    vals, idx = fast if fast is not None else scores.topk(k + extra, dim=1)
    boundary_tie = (vals[:, k - 1] == vals[:, -1]) & (vals[:, k - 1] > _NEG_INF) if extra else None
    vals, idx = vals[:, :k], idx[:, :k]
    # order the chosen k by (value desc, index asc)
    idx, perm = idx.sort(dim=1)
    vals = vals.gather(1, perm)
    vals, perm = vals.sort(dim=1, descending=True, stable=True)
    idx = idx.gather(1, perm)
    if boundary_tie is None:
        return vals, idx
    rows = boundary_tie.nonzero().squeeze(1)
    if rows.numel():
        sv, si = scores.index_select(0, rows).sort(dim=1, descending=True, stable=True)
        vals[rows] = sv[:, :k]
        idx[rows] = si[:, :k]
    return vals, idx


@torch.inference_mode()
def beam_search(
    model: EnsembleModel,
    src_tokens: Tensor,
    src_lengths: Tensor,
    options: SearchOptions = SearchOptions(),
    return_attention: bool = True,
    shortlist: Optional[Tensor] = None,
    search_graphs: Optional[SearchGraphs] = None,
) -> list[list[Hypothesis]]:
    """Translate a batch: for each input sentence, up to ``options.nbest`` hypotheses, best first.

    ``src_tokens`` ``[B, S]`` end with ``</s>`` and are right-padded (see the model contract);
    ``return_attention=False`` skips collecting attention (``Hypothesis.attention`` is None).
    ``shortlist``: sorted target ids starting with the four specials (``nmtkit.generate.shortlist``):
    every member's output layer is restricted to them and log-probabilities are normalised over
    them; with every id of the vocabulary the result is exactly the unrestricted one.
    ``search_graphs``: on a CUDA device and without a shortlist (which changes the output layer from
    batch to batch), the same search in fixed shapes, each step a CUDA graph replay
    (:mod:`nmtkit.generate.static_search`).
    """
    o = options
    if shortlist is None:
        if search_graphs is not None and search_graphs.applies(src_tokens):
            found = search_graphs.search(model, src_tokens, src_lengths, o, return_attention)
            if found is not None:
                return found
        return _search(model, src_tokens, src_lengths, o.beam, o.nbest, o.max_len_a, o.max_len_b, o.min_len,
                       o.lenpen, o.lenpen_form, o.unkpen, return_attention, None)
    from nmtkit.generate.shortlist import check_shortlist

    check_shortlist(shortlist, len(model.tgt_dict))
    with model.restrict_output(shortlist):
        return _search(model, src_tokens, src_lengths, o.beam, o.nbest, o.max_len_a, o.max_len_b, o.min_len,
                       o.lenpen, o.lenpen_form, o.unkpen, return_attention, shortlist)


def _constrain_(lprobs: Tensor, step: int, min_len: int, unkpen: float, max_len_rows: Tensor, force_any: bool) -> None:
    """The search's rules on one step's log-probs, in place: never ``<pad>``/``<s>``, the unk
    penalty, no ``</s>`` before ``min_len``, and ``</s>`` forced (with its real probability) on
    rows at their maximum length."""
    if force_any:
        eos_lp = lprobs[:, EOS_ID].clone()
    lprobs[:, PAD_ID] = _NEG_INF
    lprobs[:, BOS_ID] = _NEG_INF
    if unkpen:
        lprobs[:, UNK_ID] -= unkpen
    if step < min_len:
        lprobs[:, EOS_ID] = _NEG_INF
    if force_any:
        forced = max_len_rows <= step
        lprobs.masked_fill_(forced.unsqueeze(1), _NEG_INF)
        lprobs[:, EOS_ID] = torch.where(forced, eos_lp, lprobs[:, EOS_ID])


def _candidates(lprobs: Tensor, scores: Tensor, cand: Tensor, step: int, beam: int, n_act: int,
                unkpen: float, shortlist: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The ``2 * beam`` best (hypothesis, token) continuations of each sentence -> (cumulative
    scores, flat row ids, token ids, the model's log-prob of each token), all ``[n_act, 2*beam]``.
    ``cand``: a ``[n_act * beam, W]`` buffer the cumulative scores are written into, ``W`` the
    vocabulary rounded up to a multiple of :data:`TOPK_GROUP` (for :func:`chunked_topk`), its
    extra columns ``-inf``; a candidate there is never valid, and its token is clamped into the
    vocabulary so that every gather stays in range."""
    device, vocab = lprobs.device, lprobs.size(1)
    width = cand.size(1)
    torch.add(lprobs, scores.unsqueeze(1), out=cand[:, :vocab])
    cand = cand.view(n_act, beam, width)[:, 0] if step == 0 else cand.view(n_act, beam * width)
    vals, flat = topk_ordered(cand, 2 * beam)
    if vals.size(1) < 2 * beam:  # tiny vocabularies
        pad = 2 * beam - vals.size(1)
        vals = torch.cat([vals, vals.new_full((n_act, pad), _NEG_INF)], dim=1)
        flat = torch.cat([flat, flat.new_zeros((n_act, pad))], dim=1)
    beam_idx = torch.div(flat, width, rounding_mode="floor")
    tok = flat.remainder(width).clamp_(max=vocab - 1)
    rows = torch.arange(n_act, device=device).unsqueeze(1) * beam + beam_idx  # flat row ids
    step_lp = lprobs.view(-1).gather(0, (rows * vocab + tok).view(-1)).view(n_act, 2 * beam)
    if unkpen:
        step_lp = step_lp + unkpen * (tok == UNK_ID)  # record the model's own log-prob
    if shortlist is not None:
        tok = shortlist[tok]  # shortlist columns -> token ids
    return vals, rows, tok, step_lp


@dataclass
class _History:
    """What the live rows have emitted so far: tokens (``<s>`` first), their log-probs and,
    when asked, their attention rows."""

    tokens: Tensor
    pos: Tensor
    attn: Optional[Tensor] = None

    def finished(self, prow: Tensor, last_lp: Tensor, last_attn: Optional[Tensor]) -> tuple[Tensor, Tensor, Optional[Tensor]]:
        """Tokens, log-probs and attention (CPU) of the rows ``prow`` that end with this step."""
        f_tok = self.tokens.index_select(0, prow)[:, 1:].cpu()
        f_pos = torch.cat([self.pos.index_select(0, prow), last_lp.unsqueeze(1)], 1).cpu()
        f_att = None
        if last_attn is not None:
            last = last_attn.index_select(0, prow).unsqueeze(1)
            f_att = (last if self.attn is None else torch.cat([self.attn.index_select(0, prow), last], 1)).cpu()
        return f_tok, f_pos, f_att

    def advance(self, sel_rows: Tensor, new_tok: Tensor, new_lp: Tensor, attn: Optional[Tensor]) -> None:
        self.tokens = torch.cat([self.tokens.index_select(0, sel_rows), new_tok.reshape(-1, 1)], 1)
        self.pos = torch.cat([self.pos.index_select(0, sel_rows), new_lp.reshape(-1, 1)], 1)
        if attn is not None:
            last = attn.index_select(0, sel_rows).unsqueeze(1)
            self.attn = last if self.attn is None else torch.cat([self.attn.index_select(0, sel_rows), last], 1)


def _hypothesis(ended: tuple[Tensor, Tensor, Optional[Tensor]], i: int, score: float, length: int,
                src_len: int) -> Hypothesis:
    """Row ``i`` of :meth:`_History.finished`'s result as a :class:`Hypothesis` (attention cut to
    the sentence's real source positions)."""
    f_tok, f_pos, f_att = ended
    return Hypothesis(tokens=f_tok[i].numpy().tolist(), score=score, positional_scores=f_pos[i].float(),
                      attention=None if f_att is None else f_att[i, :, :src_len].float(), length=length)


def _pick_finished(ends: list[list[int]], active: list[int], finished: list[list[Hypothesis]],
                   beam: int) -> list[tuple[int, int]]:
    """(sentence in batch, candidate rank) of the ``</s>`` candidates that still fit their
    sentence's ``beam`` finished slots, best first."""
    picks: list[tuple[int, int]] = []
    room: dict[int, int] = {}
    for s, c in ends:
        room.setdefault(s, beam - len(finished[active[s]]))
        if room[s] > 0:
            room[s] -= 1
            picks.append((s, c))
    return picks


def _search(
    model: EnsembleModel, src_tokens: Tensor, src_lengths: Tensor, beam: int, nbest: int, max_len_a: float,
    max_len_b: int, min_len: int, lenpen: float, lenpen_form: str, unkpen: float, return_attention: bool,
    shortlist: Optional[Tensor],
) -> list[list[Hypothesis]]:
    """The search of :func:`beam_search`; with a shortlist, column ``c`` of the log-probs is token
    ``shortlist[c]`` (columns 0-3 are the specials, so their constraints need no mapping)."""
    n_sent, device = src_tokens.size(0), src_tokens.device
    src_lens = [int(n) for n in src_lengths.tolist()]
    max_lens = max_output_lengths(src_lens, max_len_a, max_len_b)
    encs = model.encode(src_tokens, src_lengths)
    per_row = torch.arange(n_sent, device=device).repeat_interleave(beam)
    shared = model.shares_encoder_rows  # one copy of the encoder states per sentence, read by its beam rows
    if shared:
        states = model.reorder_decoder_state(model.init_decoder_state(encs), per_row)
    else:
        encs = model.reorder_encoder_out(encs, per_row)
        states = model.init_decoder_state(encs)
    active = list(range(n_sent))  # original ids of the sentences still in the batch
    max_len_rows = torch.tensor(max_lens, device=device).repeat_interleave(beam)
    beam_offsets = torch.arange(beam, device=device)
    rows_n = n_sent * beam
    hist = _History(torch.full((rows_n, 1), BOS_ID, dtype=torch.long, device=device), torch.zeros(rows_n, 0, device=device))
    scores = torch.zeros(rows_n, device=device)
    finished: list[list[Hypothesis]] = [[] for _ in range(n_sent)]
    cand_buf: Optional[Tensor] = None
    step = 0
    while active:
        n_act = len(active)
        lprobs, attn, states = model.decode_step(hist.tokens[:, -1], states, encs)
        attn = attn if return_attention else None
        _constrain_(lprobs, step, min_len, unkpen, max_len_rows, step >= min(max_lens[s] for s in active))
        if cand_buf is None or cand_buf.dtype != lprobs.dtype:
            # one buffer for every step: allocating (and page-faulting) rows x V floats each step is
            # slow; the columns beyond V (up to a multiple of TOPK_GROUP) stay -inf
            width = -(-lprobs.size(1) // TOPK_GROUP) * TOPK_GROUP
            cand_buf = torch.full((rows_n, width), _NEG_INF, dtype=lprobs.dtype, device=device)
        cand = cand_buf[: n_act * beam]
        vals, rows, tok, step_lp = _candidates(lprobs, scores, cand, step, beam, n_act, unkpen, shortlist)

        valid = vals > _NEG_INF
        ends = (tok[:, :beam] == EOS_ID) & valid[:, :beam]
        goes_on = (tok != EOS_ID) & valid
        order_key = torch.arange(2 * beam, device=device) + (~goes_on).long() * (2 * beam)
        sel = order_key.argsort(dim=1)[:, :beam]
        new_scores = vals.gather(1, sel).masked_fill(~goes_on.gather(1, sel), _NEG_INF)
        new_rows, new_tok, new_lp = rows.gather(1, sel), tok.gather(1, sel), step_lp.gather(1, sel)
        flags = torch.cat([ends, new_scores[:, :1] == _NEG_INF], dim=1).cpu()
        ends_cpu, dead = flags[:, :beam], flags[:, beam].tolist()

        picks = _pick_finished(ends_cpu.nonzero().tolist(), active, finished, beam) if ends_cpu.any() else []
        if picks:  # bookkeeping only for the rows that ended
            ps = torch.tensor([p[0] for p in picks], device=device)
            pc = torch.tensor([p[1] for p in picks], device=device)
            ended = hist.finished(rows[ps, pc], step_lp[ps, pc], attn)
            div = length_penalty(step + 1, lenpen, lenpen_form)
            for i, (f_val, (s, _)) in enumerate(zip(vals[ps, pc].cpu().tolist(), picks)):
                finished[active[s]].append(_hypothesis(ended, i, f_val / div, step + 1, src_lens[active[s]]))

        keep = [s for s, sid in enumerate(active) if len(finished[sid]) < beam and step < max_lens[sid] and not dead[s]]
        if not keep:
            break
        # -- advance the surviving beams, shrinking the batch when sentences completed -----
        shrink = len(keep) < n_act
        if shrink:
            keep_t = torch.tensor(keep, device=device)
            new_rows, new_tok, new_lp, new_scores = (x.index_select(0, keep_t) for x in (new_rows, new_tok, new_lp, new_scores))
        sel_rows = new_rows.reshape(-1)
        hist.advance(sel_rows, new_tok, new_lp, attn)
        scores = new_scores.reshape(-1)
        states = model.reorder_decoder_state(states, sel_rows)
        if shrink:
            enc_rows = (keep_t.unsqueeze(1) * beam + beam_offsets).reshape(-1)
            encs = model.reorder_encoder_out(encs, keep_t if shared else enc_rows)
            max_len_rows = max_len_rows.index_select(0, enc_rows)
            active = [active[s] for s in keep]
        step += 1

    return [sorted(hyps, key=lambda h: -h.score)[:nbest] for hyps in finished]  # stable: earlier-finished wins ties
