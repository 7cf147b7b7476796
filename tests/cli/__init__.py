"""Tests of nmtkit.cli: the commands' options, outputs and errors."""
