"""Tests of nmtkit.evaluate: metrics, AER, symmetrization, plots."""
