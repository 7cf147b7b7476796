"""Dictionaries, tokenization and BPE, the binarized format and batching."""
