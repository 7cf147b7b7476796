"""Tests of nmtkit.data: dictionaries, the binarized format, preprocessing, subwords."""
