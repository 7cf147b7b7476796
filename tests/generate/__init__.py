"""Tests of nmtkit.generate: search, ensembles, forced decoding, quantisation, shortlists, alignments."""
