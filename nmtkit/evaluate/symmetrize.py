"""Combine two directional alignments into one (Koehn et al. 2003 heuristics).

Why: attention (like IBM models) aligns in one direction only; a source-to-target and a
target-to-source model disagree, and the standard heuristics trade precision
(``intersect``) against recall (``union``), with ``grow-diag-final(-and)`` in between.

Both inputs are sets of ``(i, j)`` links with ``i`` the source and ``j`` the target word
index, whichever direction produced them (turn a reversed model's ``(j, i)`` around
first).  The grid is swept source-major (``i`` outer, ``j`` inner) and a point added
during a sweep counts as aligned for the rest of it, as in Koehn's pseudo-code.  The
final step looks at ``s2t``'s links before ``t2s``'s.
"""
from __future__ import annotations

from typing import Callable, Iterable

from nmtkit.errors import NmtkitError

Link = tuple[int, int]

#: Horizontal/vertical neighbours first, then diagonals (Koehn's order).
_NEIGHBOURS: tuple[Link, ...] = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def intersect(s2t: Iterable[Link], t2s: Iterable[Link]) -> set[Link]:
    """Links both directions agree on (high precision)."""
    return set(s2t) & set(t2s)


def union(s2t: Iterable[Link], t2s: Iterable[Link]) -> set[Link]:
    """Links either direction proposes (high recall)."""
    return set(s2t) | set(t2s)


class _Grid:
    """The growing alignment plus which source and target words it covers."""

    def __init__(self, start: set[Link]) -> None:
        self.links = set(start)
        self.src = {i for i, _ in start}
        self.tgt = {j for _, j in start}

    def add(self, link: Link) -> None:
        self.links.add(link)
        self.src.add(link[0])
        self.tgt.add(link[1])


def _grow_diag(grid: _Grid, candidates: set[Link], n_src: int, n_tgt: int) -> None:
    """Repeatedly add candidate neighbours (incl. diagonal) of links that cover a new word."""
    added = True
    while added:
        added = False
        for i in range(n_src):
            for j in range(n_tgt):
                if (i, j) not in grid.links:
                    continue
                for di, dj in _NEIGHBOURS:
                    nb = (i + di, j + dj)
                    if nb in candidates and nb not in grid.links and (
                        nb[0] not in grid.src or nb[1] not in grid.tgt
                    ):
                        grid.add(nb)
                        added = True


def _final(grid: _Grid, direction: set[Link], n_src: int, n_tgt: int, both_unaligned: bool) -> None:
    """Add a direction's remaining links that align a still-unaligned word (or two, for -and)."""
    for i in range(n_src):
        for j in range(n_tgt):
            if (i, j) not in direction or (i, j) in grid.links:
                continue
            new_src, new_tgt = i not in grid.src, j not in grid.tgt
            if (new_src and new_tgt) if both_unaligned else (new_src or new_tgt):
                grid.add((i, j))


def grow_diag_final(s2t: Iterable[Link], t2s: Iterable[Link], *, final_and: bool = False) -> set[Link]:
    """Koehn's grow-diag-final: intersection, grown into the union, then the final step.

    With ``final_and`` (grow-diag-final-and) the final step only adds a link whose source
    and target words are both still unaligned.
    """
    a, b = set(s2t), set(t2s)
    cand = a | b
    if not cand:
        return set()
    n_src = max(i for i, _ in cand) + 1
    n_tgt = max(j for _, j in cand) + 1
    grid = _Grid(a & b)
    _grow_diag(grid, cand, n_src, n_tgt)
    _final(grid, a, n_src, n_tgt, final_and)
    _final(grid, b, n_src, n_tgt, final_and)
    return grid.links


def grow_diag_final_and(s2t: Iterable[Link], t2s: Iterable[Link]) -> set[Link]:
    """Koehn's grow-diag-final-and (the Moses default)."""
    return grow_diag_final(s2t, t2s, final_and=True)


#: Heuristic name (as on the command line) -> function.
METHODS: dict[str, Callable[[Iterable[Link], Iterable[Link]], set[Link]]] = {
    "intersect": intersect,
    "union": union,
    "grow-diag-final": grow_diag_final,
    "grow-diag-final-and": grow_diag_final_and,
}


#: Symmetrizations that combine the two directions' soft attention, not their links (need the
#: word-level attention matrices: :func:`nmtkit.generate.word_alignment.soft_symmetrize`).
SOFT_METHODS = ("soft-grow-diag-final-and",)
#: Every name ``--symmetrize`` accepts.
ALL_METHODS = (*METHODS, *SOFT_METHODS)


def symmetrize(s2t: Iterable[Link], t2s: Iterable[Link], method: str = "grow-diag-final-and") -> set[Link]:
    """Combine two directional alignments of one sentence pair with the named heuristic."""
    try:
        fn = METHODS[method]
    except KeyError:
        raise NmtkitError(f"unknown symmetrization {method!r} (choose from {', '.join(METHODS)})") from None
    return fn(s2t, t2s)


def check_symmetrize_options(method: str | None, has_reverse: bool) -> None:
    """A symmetrization needs a reverse (target->source) model and a known method; a light
    check, so the CLI can run it before loading any checkpoint."""
    if method is not None and not has_reverse:
        raise NmtkitError("--symmetrize needs --reverse-path (a target->source model)")
    if method is not None and method not in ALL_METHODS:
        raise NmtkitError(f"symmetrize must be one of {', '.join(ALL_METHODS)}, got {method!r}")
