"""Tests of nmtkit.models: attention, the model contract, exactness, the registry."""
