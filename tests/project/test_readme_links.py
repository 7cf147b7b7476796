"""The README's and the changelog's relative links lead to files that exist (docs/ itself is
checked by `mkdocs build --strict` in bin/test)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["README.md", "CHANGELOG.md"])
def test_relative_links_resolve(name):
    text = (ROOT / name).read_text(encoding="utf-8")
    targets = [t for t in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", text) if "://" not in t]
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"{name}: links to missing files: {missing}"
