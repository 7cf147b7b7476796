"""The fixed-shape executor: the search's state in slots, each step one CUDA graph replay
(``--cuda-graphs``).

Why: on a GPU the eager search (:mod:`.eager`) is bound by kernel launches and host round
trips, not arithmetic (bench/README.md, "GPU").  Here the whole step (decoder, the rules,
finished hypotheses, reordering) works on tensors of fixed shape, so it is captured once per
shape and replayed, and the host looks at the GPU only every :attr:`SearchGraphs.check_every`
steps.  What a step decides is :mod:`.rules`' (the tests run both executors on the same cases);
what differs is how the state is kept, and, on a GPU, the last bits of products whose shapes
the padding changes.  A NaN score ranks below ``-inf`` in :func:`.topk.exact_topk` and above
everything in ``torch.topk``; a model that produces NaNs gives no meaningful translation either way.

* The batch does not shrink.  Sentences are padded to a multiple of
  :attr:`SearchGraphs.sentence_step` (with one-token dummy sentences that never search) and
  the source to a multiple of :attr:`SearchGraphs.length_step` positions; a sentence that is
  complete stops taking finished hypotheses, and its rows compute on unread.
* Finished hypotheses go to fixed slots (``beam`` per sentence, plus one that takes whatever is
  not kept) in the order in which they finish, so the final stable sort by score keeps the
  eager search's order among equal scores.
* The top-k is :func:`.topk.keyed_topk`: the tie order without looking at the data on the host.
* The first step ranks every row, the rows after each sentence's first starting at ``-inf``.
* The first step runs eagerly on the buffers: it makes the per-sentence tensors a model keeps in
  its encoder output (Luong's ``context_proj``), which the graph then reads.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch
from torch import Tensor

from nmtkit.data.dictionary import BOS_ID, EOS_ID, PAD_ID
from nmtkit.errors import NmtkitError
from nmtkit.generate.search import EagerSearch, rules
from nmtkit.generate.search.hypothesis import Hypothesis
from nmtkit.generate.search.topk import keyed_topk
from nmtkit.generate.search_options import SearchOptions
from nmtkit.models.base import DecoderState, EncoderOutput
from nmtkit.models.loop_graphs import round_up
from nmtkit.utils.amp import autocast_key, uncached_autocast

_NEG_INF = rules.NEG_INF


@dataclass
class _State:
    """Everything one search step reads and writes, in tensors of fixed shape (``N`` sentences,
    ``R = N * beam`` rows, ``T`` steps at most, ``S`` source positions)."""

    states: list[DecoderState]
    encs: list[EncoderOutput]
    last: Tensor          # [R] the tokens the rows emitted last
    scores: Tensor        # [R] cumulative (unk-penalised) log-probabilities
    step: Tensor          # [] the step number
    alive: Tensor         # [N] still taking finished hypotheses
    max_len_rows: Tensor  # [R]
    max_len: Tensor       # [N]
    cand: Tensor          # [R, V] candidate scores
    hist_tokens: Tensor   # [R, T + 1] <s> then the emitted tokens
    hist_pos: Tensor      # [R, T] their log-probabilities
    hist_att: Optional[Tensor]  # [R, T, S] their attention rows (float32)
    fin_count: Tensor     # [N]
    fin_tokens: Tensor    # [N * (beam + 1), T + 1]; slot ``beam`` of a sentence takes what is not kept
    fin_pos: Tensor       # [N * (beam + 1), T]
    fin_att: Optional[Tensor]  # [N * (beam + 1), T, S]
    fin_val: Tensor       # [N * (beam + 1)] cumulative score (not yet length-normalised)
    fin_len: Tensor       # [N * (beam + 1)]
    derived: dict[tuple[int, str], Tensor] = field(default_factory=dict)  # encoder extras made by step 0

    def tensors(self) -> list[Tensor]:
        """Every tensor a step may write (for a snapshot around the warm-up before a capture)."""
        out = [self.last, self.scores, self.step, self.alive, self.cand, self.hist_tokens, self.hist_pos,
               self.fin_count, self.fin_tokens, self.fin_pos, self.fin_val, self.fin_len]
        out += [t for t in (self.hist_att, self.fin_att) if t is not None]
        out += [t for s in self.states for t in s.values()]
        return out


def _step(model, s: _State, o: SearchOptions) -> None:  # noqa: ANN001 - an EnsembleModel
    """One search step, in place on ``s``: :mod:`.rules` on fixed-shape buffers."""
    k = o.beam
    lprobs, attn, new_states = model.decode_step(s.last, s.states, s.encs, s.hist_att is not None)
    rules.constrain_(lprobs, s.step, o, s.max_len_rows)
    c = rules.candidates(lprobs, s.scores, s.cand, k, o, keyed_topk)
    sp = rules.split(c, k)
    _keep_finished(s, k, sp.ends, c, attn)
    s.alive &= rules.still_searching(s.fin_count, s.step, s.max_len, sp.can_continue, k)

    sel_rows = sp.rows.view(-1)
    r = sel_rows.size(0)
    at_step = s.step.view(1, 1).expand(r, 1)
    s.hist_tokens.copy_(s.hist_tokens.index_select(0, sel_rows).scatter_(1, at_step + 1, sp.tok.view(-1, 1)))
    s.hist_pos.copy_(s.hist_pos.index_select(0, sel_rows).scatter_(1, at_step, sp.lp.view(-1, 1)))
    if s.hist_att is not None and attn is not None:
        att = s.hist_att.index_select(0, sel_rows)
        att.scatter_(1, at_step.unsqueeze(2).expand(r, 1, att.size(2)), attn.index_select(0, sel_rows).float().unsqueeze(1))
        s.hist_att.copy_(att)
    s.scores.copy_(sp.scores.view(-1))
    s.last.copy_(sp.tok.view(-1))
    for buf, new in zip(s.states, model.reorder_decoder_state(new_states, sel_rows)):
        for name, t in buf.items():
            if new[name].shape != t.shape:
                raise NmtkitError(f"the fixed-shape search (--cuda-graphs) needs decoder states of fixed shape; "
                                  f"{name!r} went from {tuple(t.shape)} to {tuple(new[name].shape)}")
            t.copy_(new[name])
    s.step += 1


def _keep_finished(s: _State, k: int, ends: Tensor, c: rules.Candidates, attn: Optional[Tensor]) -> None:
    """Copy the accepted ``</s>`` candidates (:func:`.rules.accept_finished`) into their
    sentence's next finished slots; the others go to the spare slot."""
    n = ends.size(0)
    ended_rows, vals, step_lp = c.rows[:, :k].reshape(-1), c.vals[:, :k], c.step_lp[:, :k]
    accept, rank = rules.accept_finished(ends, s.fin_count, k, s.alive)
    slot = torch.where(accept, s.fin_count.unsqueeze(1) + rank, torch.full_like(rank, k))
    dest = (torch.arange(n, device=ends.device).unsqueeze(1) * (k + 1) + slot).view(-1)
    at_step = s.step.view(1, 1).expand(dest.size(0), 1)
    s.fin_tokens.index_copy_(0, dest, s.hist_tokens.index_select(0, ended_rows))
    s.fin_pos.index_copy_(0, dest, s.hist_pos.index_select(0, ended_rows).scatter_(1, at_step, step_lp.reshape(-1, 1)))
    if s.fin_att is not None and s.hist_att is not None and attn is not None:
        att = s.hist_att.index_select(0, ended_rows)
        att.scatter_(1, at_step.unsqueeze(2).expand(-1, 1, att.size(2)), attn.index_select(0, ended_rows).float().unsqueeze(1))
        s.fin_att.index_copy_(0, dest, att)
    s.fin_val.index_copy_(0, dest, vals.reshape(-1))
    s.fin_len.index_copy_(0, dest, (s.step + 1).repeat(dest.size(0)))
    s.fin_count += accept.sum(1)


@dataclass
class _Captured:
    state: _State
    replay: Callable[[], None]


class SearchGraphs:
    """The fixed-shape searcher: captured search steps by shape (see the module docstring); one
    per bundle, kept across its batches.  ``capture=False`` runs the same fixed-shape steps
    eagerly (the CPU tests do, to check it against the eager executor)."""

    def __init__(self, sentence_step: int = 16, length_step: int = 16, check_every: int = 8,
                 max_shapes: int = 32, max_buffer_bytes: int = 2**30, capture: bool = True) -> None:
        self.sentence_step = sentence_step
        self.length_step = length_step
        self.check_every = check_every
        self.max_shapes = max_shapes  # beyond this many shapes, new ones take the eager search
        self.max_buffer_bytes = max_buffer_bytes  # history buffers above this take the eager search
        self.capture = capture
        self.graphs: dict[tuple, _Captured] = {}
        self.pool: Any = None  # the CUDA graphs' shared memory pool
        self.replays = 0

    @staticmethod
    def applies(x: Tensor) -> bool:
        """Whether a search on ``x``'s device uses the graphs (CUDA only)."""
        return x.is_cuda

    @torch.inference_mode()
    def __call__(self, model, src_tokens: Tensor, src_lengths: Tensor, options: SearchOptions,  # noqa: ANN001
                 return_attention: bool = True, shortlist: Optional[Tensor] = None) -> list[list[Hypothesis]]:
        """The search in fixed shapes where it applies; the eager executor elsewhere (another
        device, a shortlist, a full cache, huge buffers)."""
        if shortlist is None and self.applies(src_tokens):
            found = self.search(model, src_tokens, src_lengths, options, return_attention)
            if found is not None:
                return found
        # the eager searcher as a whole: it restricts the output layer to the shortlist (the
        # executor alone would read full-vocabulary columns as shortlist ones) and prepares it
        return EagerSearch()(model, src_tokens, src_lengths, options, return_attention, shortlist)

    def search(self, model, src_tokens: Tensor, src_lengths: Tensor, o: SearchOptions,  # noqa: ANN001
               return_attention: bool) -> Optional[list[list[Hypothesis]]]:
        """The search in fixed shapes, or None where the eager executor should run instead: a
        new shape once :attr:`max_shapes` are captured, or buffers over :attr:`max_buffer_bytes`
        (very long ``--max-len-a``/``--max-len-b`` bounds)."""
        n_real = src_tokens.size(0)
        if n_real == 0:
            return []
        src_lens = [int(x) for x in src_lengths.tolist()]
        max_lens = rules.max_output_lengths(src_lens, o.max_len_a, o.max_len_b, model.max_target_len())
        n = round_up(n_real, self.sentence_step)
        k = o.beam
        steps = max(max_lens) + 1
        room = round_up(steps, self.length_step)
        attention = return_attention and model.has_attention
        width = round_up(src_tokens.size(1), self.length_step) if attention else 1
        if 2 * n * (k + 1) * (room + 1) * (width + 2) * 4 > self.max_buffer_bytes:
            return None
        src_tokens, src_lengths = _pad_batch(src_tokens, src_lengths, n, self.length_step)
        encs, states = rules.start(model, src_tokens, src_lengths, k)
        # only these options are baked into a step; the others act on the host or through the start values
        key = (n, src_tokens.size(1), room, (o.beam, o.min_len, o.unkpen), attention, autocast_key(),
               _structure(states, encs))
        cap = self.graphs.get(key)
        if cap is None and len(self.graphs) >= self.max_shapes:
            return None
        start = _start(max_lens, n, k, src_tokens.device)
        if cap is None:
            s = _new_state(states, encs, start, room, len(model.tgt_dict), attention)
        else:
            s = cap.state
            _load(s, start, states, encs)
        before = {(m, name) for m, e in enumerate(s.encs) for name in e.extra}
        _step(model, s, o)  # step 0, eagerly: it may add per-sentence tensors to the encoder output
        _keep_derived(s, before)
        if cap is not None:
            replay = cap.replay
        else:
            replay = self._capture(model, s, o) if self.capture else (lambda: _step(model, s, o))
            self.graphs[key] = _Captured(s, replay)
        for step in range(1, steps):
            replay()
            self.replays += 1
            if step % self.check_every == 0 and not bool(s.alive.any()):
                break
        return _hypotheses(s, n_real, k, o, src_lens, attention)

    def _capture(self, model, s: _State, o: SearchOptions) -> Callable[[], None]:  # noqa: ANN001
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        snapshot = [t.clone() for t in s.tensors()]
        with uncached_autocast():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # lazy initialisation (cuBLAS workspaces) stays out of the graph
                _step(model, s, o)
            torch.cuda.current_stream().wait_stream(side)
            for t, saved in zip(s.tensors(), snapshot):
                t.copy_(saved)  # the warm-up step is undone
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.pool):
                _step(model, s, o)
        return graph.replay


def _structure(states: list[DecoderState], encs: list[EncoderOutput]) -> tuple:
    """Names, shapes and types of the step's inputs: equal structures can share a graph."""
    parts: list[tuple] = [tuple((k, tuple(v.shape), v.dtype) for k, v in sorted(st.items())) for st in states]
    parts += [(tuple(e.states.shape), e.states.dtype, tuple(sorted((k, tuple(v.shape), v.dtype) for k, v in e.extra.items())))
              for e in encs]
    return tuple(parts)


def _pad_batch(src_tokens: Tensor, src_lengths: Tensor, n: int, length_step: int) -> tuple[Tensor, Tensor]:
    """Source rows padded with one-token (``</s>``) dummy sentences to ``n``, and columns to a
    multiple of ``length_step``."""
    rows, cols = src_tokens.shape
    out = src_tokens.new_full((n, round_up(cols, length_step)), PAD_ID)
    out[:rows, :cols] = src_tokens
    out[rows:, 0] = EOS_ID
    lengths = torch.cat([src_lengths, src_lengths.new_ones(n - rows)])
    return out, lengths


def _start(max_lens: list[int], n: int, k: int, dev: torch.device) -> dict[str, Any]:
    """The values a search starts from (``n`` sentences, the first ``len(max_lens)`` real)."""
    real = len(max_lens)
    max_len = torch.zeros(n, dtype=torch.long, device=dev)
    max_len[:real] = torch.tensor(max_lens, device=dev)
    alive = torch.zeros(n, dtype=torch.bool, device=dev)
    alive[:real] = True
    scores = torch.full((n, k), _NEG_INF, device=dev)
    scores[:, 0] = 0.0  # the first step extends the first row of each sentence only
    return {"last": torch.full((n * k,), BOS_ID, dtype=torch.long, device=dev), "scores": scores.view(-1),
            "step": torch.zeros((), dtype=torch.long, device=dev), "alive": alive, "max_len": max_len,
            "max_len_rows": max_len.repeat_interleave(k), "fin_count": torch.zeros(n, dtype=torch.long, device=dev)}


def _new_state(states: list[DecoderState], encs: list[EncoderOutput], start: dict[str, Any], steps: int, vocab: int,
               attention: bool) -> _State:
    n, r = start["alive"].size(0), start["last"].size(0)
    dev, src_len, slots = start["last"].device, encs[0].mask.size(1), n * (r // n + 1)
    hist_tokens = torch.zeros(r, steps + 1, dtype=torch.long, device=dev)
    hist_tokens[:, 0] = BOS_ID
    return _State(
        states=states, encs=encs, **start, cand=torch.empty(r, vocab, device=dev, dtype=torch.float32),
        hist_tokens=hist_tokens, hist_pos=torch.zeros(r, steps, device=dev),
        hist_att=torch.zeros(r, steps, src_len, device=dev) if attention else None,
        fin_tokens=torch.zeros(slots, steps + 1, dtype=torch.long, device=dev), fin_pos=torch.zeros(slots, steps, device=dev),
        fin_att=torch.zeros(slots, steps, src_len, device=dev) if attention else None,
        fin_val=torch.zeros(slots, device=dev), fin_len=torch.zeros(slots, dtype=torch.long, device=dev))


def _load(s: _State, start: dict[str, Tensor], states: list[DecoderState], encs: list[EncoderOutput]) -> None:
    """A captured shape's buffers take a new batch's start (its encoder outputs and states)."""
    for name, t in start.items():
        getattr(s, name).copy_(t)
    for buf, new in zip(s.states, states):
        for name, t in buf.items():
            t.copy_(new[name])
    for enc, new_enc in zip(s.encs, encs):
        enc.states.copy_(new_enc.states)
        enc.mask.copy_(new_enc.mask)
        for name, t in new_enc.extra.items():
            enc.extra[name].copy_(t)
    for m, name in s.derived:
        del s.encs[m].extra[name]  # step 0 makes them again, from the new encoder outputs


def _keep_derived(s: _State, before: set[tuple[int, str]]) -> None:
    """After step 0: the encoder extras it made (``before`` names those that were there) stay
    at the addresses the graph reads."""
    made = {(m, name): t for m, e in enumerate(s.encs) for name, t in e.extra.items() if (m, name) not in before}
    if not s.derived:
        s.derived = made
        return
    for (m, name), t in made.items():
        kept = s.derived[(m, name)]
        kept.copy_(t)
        s.encs[m].extra[name] = kept


def _hypotheses(s: _State, n_real: int, k: int, o: SearchOptions, src_lens: list[int],
                attention: bool) -> list[list[Hypothesis]]:
    count = s.fin_count[:n_real].tolist()
    rows = n_real * (k + 1)
    tokens, pos, val, length = (t[:rows].cpu() for t in (s.fin_tokens, s.fin_pos, s.fin_val, s.fin_len))
    att = s.fin_att[:rows].cpu() if attention and s.fin_att is not None else None
    out: list[list[Hypothesis]] = []
    for i in range(n_real):
        hyps = []
        for j in range(count[i]):
            row = i * (k + 1) + j
            n_steps = int(length[row])
            hyps.append(rules.finished(tokens[row, 1:n_steps].tolist(), float(val[row]), n_steps, pos[row, :n_steps],
                                       None if att is None else att[row, :n_steps, : src_lens[i]], o))
        out.append(rules.best(hyps, o.nbest))
    return out
