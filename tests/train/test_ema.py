"""--ema-decay: the weight average, the checkpoints that hold it, and an exact resume."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from torch import nn

from tests import helpers

from nmtkit.checkpoint import load_checkpoint
from nmtkit.cli.train import command as train
import nmtkit.train.ema as ema_module
from nmtkit.train.ema import WeightAverage
from nmtkit.train.stop_signals import StopNow


def test_the_average_follows_the_warmed_up_recurrence_and_swaps_back():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    ema = WeightAverage(model, 0.99)
    expected = {n: p.detach().clone() for n, p in model.named_parameters()}
    for k in range(1, 30):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        d = min(0.99, (1 + k) / (10 + k))
        for n, p in model.named_parameters():
            expected[n] = d * expected[n] + (1 - d) * p.detach()
        ema.update(model)
    raw = {n: p.detach().clone() for n, p in model.named_parameters()}
    for n in expected:
        assert torch.allclose(ema.shadow[n], expected[n], atol=1e-6), n
    with ema.swapped_in(model):
        for n, p in model.named_parameters():
            assert torch.equal(p, ema.shadow[n])
    for n, p in model.named_parameters():
        assert torch.equal(p, raw[n]), n  # bit for bit after the block
    with pytest.raises(ValueError):
        WeightAverage(model, 1.0)


def train_ema(data: Path, save: Path, *extra: str):  # noqa: ANN201
    return helpers.run_train(data, save, "--ema-decay", "0.9", *extra)


def _moved_average(seed: int = 0) -> tuple[nn.Module, WeightAverage, dict[str, torch.Tensor]]:
    torch.manual_seed(seed)
    model = nn.Linear(3, 2)
    ema = WeightAverage(model, 0.9)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    ema.update(model)
    return model, ema, {n: p.detach().clone() for n, p in model.named_parameters()}


def test_a_signal_inside_the_swapped_block_restores_the_raw_weights():
    model, ema, raw = _moved_average()
    with pytest.raises(StopNow):
        with ema.swapped_in(model):
            assert not torch.equal(model.weight, raw["weight"])
            raise StopNow
    for n, p in model.named_parameters():
        assert torch.equal(p, raw[n])


def test_a_second_signal_before_the_restore_still_restores_then_stops(monkeypatch):
    """A second Ctrl-C while validation unwinds must not leave the average in the raw weights,
    which checkpoint_last.pt saves for resuming."""
    model, ema, raw = _moved_average()
    real_copy, calls = ema_module._copy_all, []

    def copy_once_interrupted(targets, sources):  # noqa: ANN001, ANN202
        calls.append(1)
        if len(calls) == 2:  # the first restore attempt: the handler fires before it copies
            raise StopNow
        real_copy(targets, sources)

    monkeypatch.setattr(ema_module, "_copy_all", copy_once_interrupted)
    with pytest.raises(StopNow):
        with ema.swapped_in(model):
            raise StopNow
    assert len(calls) == 3
    for n, p in model.named_parameters():
        assert torch.equal(p, raw[n])


@pytest.mark.parametrize("arch", ["luong_tiny", "transformer_test"])
def test_checkpoints_hold_the_average_and_the_raw_weights_resume_exactly(data_dir, tmp_path, arch):
    a, b = tmp_path / "a", tmp_path / "b"
    assert train_ema(data_dir, a, "--max-epoch", "2", "--arch", arch).exit_code == 0
    r1 = train_ema(data_dir, b, "--max-epoch", "2", "--max-update", "4", "--arch", arch)
    assert r1.exit_code == 0, r1.output
    r2 = train_ema(data_dir, b, "--max-epoch", "2", "--arch", arch)
    assert r2.exit_code == 0, r2.output
    ca, cb = load_checkpoint(a / "checkpoint_last.pt"), load_checkpoint(b / "checkpoint_last.pt")
    for k in ca["model"]:
        assert torch.equal(ca["model"][k], cb["model"][k]), k
        assert torch.equal(ca["train_state"]["ema"]["raw_model"][k], cb["train_state"]["ema"]["raw_model"][k]), k
    assert ca["train_state"]["ema"]["updates"] == cb["train_state"]["ema"]["updates"] > 0
    moved = [k for k in ca["model"] if not torch.equal(ca["model"][k], ca["train_state"]["ema"]["raw_model"][k])]
    assert moved, "the checkpoint's weights should be the average, not the raw weights"


def test_resuming_without_or_with_a_new_average_says_so(data_dir, tmp_path):
    save = tmp_path / "c"
    assert train_ema(data_dir, save, "--max-epoch", "2", "--max-update", "3").exit_code == 0
    raw = load_checkpoint(save / "checkpoint_last.pt")["train_state"]["ema"]["raw_model"]
    args = [str(data_dir), "--arch", "luong_tiny", "--save-dir", str(save), "--batch-size", "2", "--seed", "7",
            "--no-progress", "--dropout", "0.3", "--max-epoch", "2", "--max-update", "3"]
    res = CliRunner().invoke(train, [*args[:-2], "--max-update", "4"])
    assert res.exit_code == 0, res.output
    assert "the weight average ends here" in res.output
    ck = load_checkpoint(save / "checkpoint_last.pt")
    assert ck["train_state"]["ema"] is None and set(ck["model"]) == set(raw)
    res = CliRunner().invoke(train, [*args[:-2], "--max-update", "5", "--ema-decay", "0.5"])
    assert res.exit_code == 0 and "the weight average starts at update 4" in res.output, res.output
