"""Tests of nmtkit.sample: the sample corpus generator."""
