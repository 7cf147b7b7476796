"""The one rich console every part of nmtkit prints through (progress, tables, messages).

Why here and not in ``nmtkit.cli``: library code (progress bars, the trainer) needs it too, and a
library must not import its command line.  It writes to stderr so that stdout carries only results.
"""
from __future__ import annotations

from rich.console import Console

#: Progress, tables and messages go to stderr so that stdout carries only results.
console = Console(stderr=True, highlight=False, soft_wrap=True)
