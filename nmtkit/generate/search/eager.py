"""The eager executor: the search's state as a batch that shrinks as sentences complete.

Why it is fast: all live hypotheses of all unfinished sentences form one flat batch of
``n_sentences * beam`` rows (one per sentence at the first step, whose rows would be equal);
each step is one decoder call, one top-k over ``beam * V`` scores per sentence and a few
gathers.  Python only touches the (at most ``beam`` per sentence) hypotheses that end at a step.
Sentences that are complete leave the batch at once (encoder outputs and states are shrunk with
``reorder``), so long sentences do not drag finished ones along.  What a step decides is
:mod:`.rules`'; this module keeps the state.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from nmtkit.data.dictionary import BOS_ID
from nmtkit.generate.search import rules
from nmtkit.generate.search.hypothesis import Hypothesis
from nmtkit.generate.search.topk import topk_ordered
from nmtkit.generate.search_options import SearchOptions


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


class _Batch:
    """The shrinking batch: the sentences still searching (``active``: their ids in the input),
    their rows' scores, history, decoder states and encoder outputs.  Each sentence has ``per``
    rows: one until the first step's candidates fill its beam (the first step's rows would all
    be equal: decoding ``beam`` copies of them cost a batch's first step ``beam`` times over)."""

    def __init__(self, model, src_tokens: Tensor, src_lengths: Tensor, o: SearchOptions) -> None:  # noqa: ANN001
        n, device = src_tokens.size(0), src_tokens.device
        self.src_lens = [int(x) for x in src_lengths.tolist()]
        self.max_lens = rules.max_output_lengths(self.src_lens, o.max_len_a, o.max_len_b, model.max_target_len())
        self.encs, self.states = rules.start(model, src_tokens, src_lengths, 1)
        self.per = 1
        self.active = list(range(n))
        self.max_len = torch.tensor(self.max_lens)  # CPU, per active sentence
        self.max_len_rows = torch.tensor(self.max_lens, device=device)  # per row (``per`` per sentence)
        self.hist = _History(torch.full((n, 1), BOS_ID, dtype=torch.long, device=device), torch.zeros(n, 0, device=device))
        self.scores = torch.zeros(n, device=device)
        self.finished: list[list[Hypothesis]] = [[] for _ in range(n)]
        self._cand: Optional[Tensor] = None
        self._max_rows = n * o.beam

    def cand(self, lprobs: Tensor) -> Tensor:
        """The candidate-score buffer of the live rows, where a step writes them all out (off the
        CPU, and narrow rows: :func:`~.topk.topk_ordered`): one buffer for every step (allocating
        and page-faulting rows x V floats each step is slow; pages never written cost nothing)."""
        if self._cand is None or self._cand.dtype != lprobs.dtype or self._cand.size(1) != lprobs.size(1):
            self._cand = torch.empty((self._max_rows, lprobs.size(1)), dtype=lprobs.dtype, device=lprobs.device)
        return self._cand[: self.scores.size(0)]

    def fin_count(self) -> Tensor:
        return torch.tensor([len(self.finished[s]) for s in self.active], dtype=torch.long)

    def finish(self, c: rules.Candidates, accept: Tensor, attn: Optional[Tensor], step: int, o: SearchOptions) -> None:
        """The accepted ``</s>`` candidates become finished hypotheses (bookkeeping only for them)."""
        picks = accept.nonzero().tolist()
        device = c.vals.device
        ps = torch.tensor([p[0] for p in picks], device=device)
        pc = torch.tensor([p[1] for p in picks], device=device)
        f_tok, f_pos, f_att = self.hist.finished(c.rows[ps, pc], c.step_lp[ps, pc], attn)
        for i, (total, (s, _)) in enumerate(zip(c.vals[ps, pc].cpu().tolist(), picks)):
            sid = self.active[s]
            att = None if f_att is None else f_att[i, :, : self.src_lens[sid]]
            self.finished[sid].append(rules.finished(f_tok[i].numpy().tolist(), total, step + 1, f_pos[i], att, o))

    def advance(self, model, sp: rules.Split, keep: list[int], attn: Optional[Tensor], beam: int) -> None:  # noqa: ANN001
        """The surviving beams go on (``beam`` rows per sentence from now on); the batch shrinks
        when sentences completed."""
        new_rows, new_tok, new_lp, new_scores = sp.rows, sp.tok, sp.lp, sp.scores
        shrink = len(keep) < len(self.active)
        kept = torch.tensor(keep, device=new_rows.device) if shrink else None
        if kept is not None:
            new_rows, new_tok, new_lp, new_scores = (x.index_select(0, kept) for x in (new_rows, new_tok, new_lp, new_scores))
        sel_rows = new_rows.reshape(-1)
        self.hist.advance(sel_rows, new_tok, new_lp, attn)
        self.scores = new_scores.reshape(-1)
        self.states = model.reorder_decoder_state(self.states, sel_rows)
        if kept is not None or self.per != beam:
            sentences = kept if kept is not None else torch.arange(len(self.active), device=new_rows.device)
            # a sentence's rows read equal encoder outputs and bounds: its first row's, ``beam`` times
            first_rows = (sentences * self.per).repeat_interleave(beam)
            if not model.shares_encoder_rows:
                self.encs = model.reorder_encoder_out(self.encs, first_rows)
            elif kept is not None:
                self.encs = model.reorder_encoder_out(self.encs, kept)
            self.max_len_rows = self.max_len_rows.index_select(0, first_rows)
            self.per = beam
        if shrink:
            self.max_len = self.max_len[keep]
            self.active = [self.active[s] for s in keep]


def eager_search(model, src_tokens: Tensor, src_lengths: Tensor, o: SearchOptions,  # noqa: ANN001 - an EnsembleModel
                 return_attention: bool, shortlist: Optional[Tensor] = None) -> list[list[Hypothesis]]:
    """The search of :func:`nmtkit.generate.search.beam_search` on a shrinking batch; with a
    shortlist, column ``c`` of the log-probs is token ``shortlist[c]`` (columns 0-3 are the
    specials, so their constraints need no mapping)."""
    beam = o.beam
    b = _Batch(model, src_tokens, src_lengths, o)
    step = 0
    while b.active:
        lprobs, attn, b.states = model.decode_step(b.hist.tokens[:, -1], b.states, b.encs, return_attention)
        rules.constrain_(lprobs, step, o, b.max_len_rows, force=step >= min(b.max_lens[s] for s in b.active))
        c = rules.candidates(lprobs, b.scores, b.cand(lprobs), beam, o, topk_ordered, per=b.per, columns=shortlist)
        sp = rules.split(c, beam)
        flags = torch.cat([sp.ends, sp.can_continue.unsqueeze(1)], dim=1).cpu()
        fin_count = b.fin_count()
        accept, _ = rules.accept_finished(flags[:, :beam], fin_count, beam)
        if accept.any():
            b.finish(c, accept, attn, step, o)
        searching = rules.still_searching(fin_count + accept.sum(1), step, b.max_len, flags[:, beam], beam)
        keep = searching.nonzero().squeeze(1).tolist()
        if not keep:
            break
        b.advance(model, sp, keep, attn, beam)
        step += 1
    return [rules.best(hyps, o.nbest) for hyps in b.finished]
