"""Markdown tables and ratio cells of the bench reports: the run logs the scripts write and the
"At a glance" block of RESULTS.md (bench/glance.py).  A leaf: it imports nothing of bench/, so the
record layer and the report can both use it (benchlib hands the two names on as ``bl.md_table``
and ``bl.ratio``)."""
from __future__ import annotations


def md_table(header: list[str], rows: list[list[object]]) -> str:
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"
