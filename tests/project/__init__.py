"""Repository-wide checks: layering, size budgets, links, benchmark records, the library API, signals
and leftover temporaries across commands, GPU paths."""
