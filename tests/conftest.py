"""Shared fixtures: tiny corpora written on the fly (tests never read ../shared)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def tiny_parallel(tmp_path: Path) -> Path:
    """A 6-pair en-de corpus under tmp_path/raw/{train,valid,test}.{en,de}; returns the raw dir."""
    en = ["the cat sits .", "the dog runs .", "a cat sees the dog .", "the dog sees a cat .", "Anna sees the cat .", "the man sleeps ."]
    de = ["die Katze sitzt .", "der Hund läuft .", "eine Katze sieht den Hund .", "der Hund sieht eine Katze .", "Anna sieht die Katze .", "der Mann schläft ."]
    raw = tmp_path / "raw"
    for split in ("train", "valid", "test"):
        write(raw / f"{split}.en", "\n".join(en) + "\n")
        write(raw / f"{split}.de", "\n".join(de) + "\n")
    return raw
