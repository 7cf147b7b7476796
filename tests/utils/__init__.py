"""Tests of nmtkit.utils: mixed precision, text I/O, the heap, start-up."""
