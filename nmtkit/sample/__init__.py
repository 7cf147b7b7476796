"""A seeded English->German toy corpus with gold word alignments (``nmtkit sample``).

What it is for: the README demo, the tests and quick experiments need a parallel corpus
that a ~1M-parameter attention LSTM learns in a few CPU minutes, that exercises the
things attention has to get right, and that comes with exact word alignments for
alignment-error-rate checks.  It is *not* a benchmark (Multi30k is): the language is
small and regular by design.

The grammar (a few hundred content words per side plus ~1,700 syllable-built names):

* noun phrases with German gender (der/die/das), case (nominative subject, accusative
  object, dative after mit/zu/von/aus/bei/in/auf/... and for the recipient of geben),
  weak masculine nouns (den Jungen), German plurals and dative plural -n, adjective
  endings (weak after der/dieser/jeder, mixed after ein/kein/possessives, strong without
  article or after numbers), and contractions (in dem -> im, zu der -> zur);
* pronouns in all cases, subject-verb agreement for every person and number;
* present, English simple past (German perfect, or Präteritum for sein/haben/modals),
  perfect (has seen -> hat ... gesehen), future (will -> wird ... sehen) and modals
  (can/must/want to -> kann/muss/will ... sehen), with ``nicht`` placed in the middle
  field and do-support on the English side;
* German word order: verb second (also after a fronted time phrase or clause), verb-final
  subordinate and relative clauses (..., weil der Mann den Hund sieht .), separable verbs
  (ruft ... an / anruft), pronouns before nominal objects, dative before accusative;
* yes/no and wh-questions (wen/wem/was/wo), ``that``-complements (dass), relative clauses.

Each sentence pair comes with sure links in Pharaoh ``i-j`` format (English index first)
made while the words are generated, so they are right by construction: articles to
articles, separable prefixes to their English verb or particle, auxiliaries to
auxiliaries, ``saw`` to both ``hat`` and ``gesehen``, names to names, punctuation to
punctuation; words without a counterpart (English ``to`` in ``wants to``, German commas
before ``dass``) stay unaligned.

The modules, bottom up: :mod:`~nmtkit.sample.lexicon` (the words), :mod:`~nmtkit.sample.tokens`
(output words and links), :mod:`~nmtkit.sample.morphology` (German forms),
:mod:`~nmtkit.sample.phrases` and :mod:`~nmtkit.sample.clauses` (realising phrases and word
order), :mod:`~nmtkit.sample.grammar` (the random choices) and :mod:`~nmtkit.sample.corpus`
(the files).  Only ``nmtkit sample``, ``bin/demo`` and the tests use this package.

Determinism: one ``random.Random`` per split seeded from a string (hashed with SHA-512 by
Python, independent of ``PYTHONHASHSEED``); all lists are tuples in a fixed order.
"""
from __future__ import annotations

from nmtkit.sample.corpus import (
    MAX_LEN, MIN_LEN, NAMES, NEW_NAME_RATE, describe_corpus, format_links, generate_corpus, is_sample_corpus, iter_pairs,
    split_names,
)
from nmtkit.sample.grammar import KINDS
from nmtkit.sample.tokens import Example

__all__ = [
    "KINDS", "MAX_LEN", "MIN_LEN", "NAMES", "NEW_NAME_RATE", "Example", "describe_corpus", "format_links",
    "generate_corpus", "is_sample_corpus", "iter_pairs", "split_names",
]
