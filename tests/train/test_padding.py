"""The padding share that nmtkit-train reports when a run ends."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nmtkit.data.dataset import PaddingCounter, make_batches


def test_padding_counter_counts_real_and_padded_positions() -> None:
    c = PaddingCounter(np.array([2, 4, 3]), np.array([5, 5, 1]))
    c.add([0, 1])  # source 2+4 of 2x4, target 10 of 2x5
    c.add([2])  # source 3 of 3, target 1 of 1
    src, tgt = c.fractions()
    assert src == pytest.approx(1 - 9 / 11)
    assert tgt == pytest.approx(0.0)
    assert PaddingCounter(np.array([1]), np.array([1])).fractions() == (0.0, 0.0)


def test_length_grouped_batches_pad_the_target_less_than_random_ones() -> None:
    """Target padding is what costs (the stepped decoder, output layer and softmax run over it;
    the encoder packs its input), so batches are grouped by target length first."""
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(1, 60, 2000), rng.integers(1, 60, 2000)
    grouped = PaddingCounter(src, tgt)
    for b in make_batches(src, tgt, None, 32, seed=1, epoch=1):
        grouped.add(b)
    shuffled = PaddingCounter(src, tgt)
    order = rng.permutation(2000)
    for k in range(0, 2000, 32):
        shuffled.add(order[k : k + 32].tolist())
    assert grouped.fractions()[1] < 0.02 and 0.1 < shuffled.fractions()[1]


def test_train_reports_padding_at_the_end(data_dir: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from nmtkit.cli.train import command as train

    res = CliRunner().invoke(train, [str(data_dir), "--arch", "luong_tiny", "--save-dir", str(tmp_path / "ck"), "--batch-size", "4",
                                     "--max-update", "3", "--max-epoch", "0", "--threads", "1", "--device", "cpu", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "padding: " in res.output and "% of the target positions" in res.output
    events = [json.loads(l) for l in (tmp_path / "ck" / "train_log.jsonl").read_text().splitlines() if l.strip()]
    end = [e for e in events if e["event"] == "end"][-1]
    assert 0.0 <= end["padding_src"] < 1.0 and 0.0 <= end["padding_tgt"] < 1.0
