"""``nmtkit-train --tensorboard-logdir``: the curves of train_log.jsonl as TensorBoard scalars."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from nmtkit.cli.train import command as train


def test_tensorboard_gets_the_records_of_train_log(data_dir, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    save, logdir = tmp_path / "ck", tmp_path / "tb"
    res = CliRunner().invoke(train, [str(data_dir), "--arch", "luong_tiny", "--save-dir", str(save), "--batch-size", "2",
                                     "--max-epoch", "2", "--log-interval", "1", "--eval-bleu", "--no-progress",
                                     "--threads", "1", "--device", "cpu", "--tensorboard-logdir", str(logdir)])
    assert res.exit_code == 0, res.output
    events = EventAccumulator(str(logdir))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/ppl", "train/lr", "train/gnorm", "train/tokens_per_s", "valid/loss", "valid/ppl",
            "valid/bleu"} <= tags
    log = [json.loads(line) for line in (save / "train_log.jsonl").read_text(encoding="utf-8").splitlines()]
    train_records = [r for r in log if r["event"] == "train"]
    assert [(e.step, round(e.value, 5)) for e in events.Scalars("train/loss")] == [
        (r["update"], round(r["loss"], 5)) for r in train_records]
    valid = [r for r in log if r["event"] == "valid"]
    assert [e.step for e in events.Scalars("valid/bleu")] == [r["update"] for r in valid] == [3, 6]


def test_without_tensorboard_installed_the_option_is_one_line(data_dir, tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if name.startswith("torch.utils.tensorboard"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    res = CliRunner().invoke(train, [str(data_dir), "--arch", "luong_tiny", "--save-dir", str(tmp_path / "ck"),
                                     "--tensorboard-logdir", str(tmp_path / "tb")])
    assert res.exit_code == 1
    assert res.output.strip() == "nmtkit-train: error: --tensorboard-logdir needs the tensorboard package: pip install 'nmtkit[tensorboard]'"
