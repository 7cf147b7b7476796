"""Divergence is detected, not carried on (issue 20, kind 5): a run of non-finite updates stops
training with one error line (exit 1), no checkpoint of a diverged state is written, and
train_log.jsonl stays strict JSON."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from nmtkit.checkpoint import load_checkpoint
from nmtkit.cli.train import command as train
from nmtkit.train.divergence import DivergenceGuard, nonfinite_update, weights_problem

NAN, INF = float("nan"), float("inf")


def train_args(data: Path, save: Path, *extra: str) -> list[str]:
    return [str(data), "--arch", "luong_tiny", "--save-dir", str(save), "--batch-size", "2", "--seed", "3",
            "--no-progress", "--threads", "1", "--device", "cpu", "--log-interval", "1", *extra]


def error_line(output: str) -> str:
    """The one error line, last (the console's progress lines share the stream)."""
    assert "Traceback" not in output, output
    lines = output.strip().splitlines()
    assert [line for line in lines if ": error: " in line] == lines[-1:], output
    return lines[-1]


def log_records(save: Path) -> list[dict]:
    """Every line of train_log.jsonl, parsed strictly (bare NaN/Infinity refused)."""
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    return [json.loads(line, parse_constant=refuse) for line in (save / "train_log.jsonl").read_text().splitlines()]


# sgd with lr 1e38 on the tiny corpus (3 updates an epoch): update 1 has a finite loss and blows the
# weights up; every update from the first non-finite one on has a NaN loss.  Which update that is
# depends on the BLAS's rounding of the blown-up products (3 on the AMD hosts with oneDNN, 2 with
# MKL on an Intel Xeon), so the tests read it from the run's log.
DIVERGING = ("--optimizer", "sgd", "--lr", "1e38", "--max-update", "40")


def first_nonfinite(records: list[dict]) -> int:
    """The first update whose loss was not finite (logged as null); update 1's is always finite."""
    first = min(r["update"] for r in records if r["event"] == "train" and r["loss"] is None)
    assert first >= 2, records
    return first


@pytest.mark.parametrize("allowed", [0, 2, 10])
def test_a_diverging_run_stops_after_the_allowed_nonfinite_updates(data_dir, tmp_path, allowed):
    save = tmp_path / "c"
    res = CliRunner().invoke(train, train_args(data_dir, save, *DIVERGING, "--max-nonfinite-updates", str(allowed)))
    assert res.exit_code == 1, res.output
    records = log_records(save)
    first = first_nonfinite(records)
    assert first <= 3, records  # so the first epoch's end (update 3) falls inside the non-finite run
    stop = first + allowed
    line = error_line(res.output)
    assert line.startswith("nmtkit-train: error: training diverged: "), line
    assert f"--max-nonfinite-updates {allowed}" in line and "no checkpoint was written" in line, line
    assert records[-1]["event"] == "diverged" and records[-1]["update"] == stop
    train_updates = [r["update"] for r in records if r["event"] == "train"]
    assert train_updates == list(range(1, stop + 1))  # stopped there, not at --max-update 40
    assert all(r["loss"] is None for r in records if r["event"] == "train" and r["update"] >= first)
    assert all(r["loss"] is not None for r in records if r["event"] == "train" and r["update"] < first)
    # the epoch ends (updates 3, 6, 9) fell inside the non-finite run: no checkpoint of that state
    assert not list(save.glob("*.pt")) and not list(save.glob("*.tmp"))


def test_divergence_keeps_the_last_good_checkpoint_byte_identical(data_dir, tmp_path):
    save = tmp_path / "c"
    res = CliRunner().invoke(train, train_args(data_dir, save, "--max-epoch", "1"))
    assert res.exit_code == 0, res.output
    before = {p.name: p.read_bytes() for p in save.glob("*.pt")}
    # the resumed run may change --lr: one that blows the weights up
    res = CliRunner().invoke(train, train_args(data_dir, save, "--max-epoch", "5", "--lr", "1e38"))
    assert res.exit_code == 1, res.output
    line = error_line(res.output)
    assert line.startswith("nmtkit-train: error: training diverged: ")
    assert line.endswith(f"{save / 'checkpoint_last.pt'} (update 3) is kept; try a lower --lr or --clip-norm"), line
    assert {p.name: p.read_bytes() for p in save.glob("*.pt")} == before
    assert not list(save.glob("*.tmp"))
    weights = load_checkpoint(save / "checkpoint_last.pt")["model"]
    assert all(bool(torch.isfinite(t).all()) for t in weights.values())
    assert log_records(save)[-1]["event"] == "diverged"


def test_a_run_ending_inside_a_nonfinite_run_is_an_error_too(data_dir, tmp_path):
    save = tmp_path / "c"
    res = CliRunner().invoke(train, train_args(data_dir, save, "--optimizer", "sgd", "--lr", "1e38", "--max-update", "4"))
    assert res.exit_code == 1, res.output
    line = error_line(res.output)
    first = first_nonfinite(log_records(save))
    assert f"{4 - first + 1} consecutive updates ({first}-4) with a non-finite loss" in line, line
    assert "at the end of the run" in line, line
    assert "reached --max-update" not in res.output and not list(save.glob("*.pt"))


def test_weights_that_are_not_finite_are_never_written(data_dir, tmp_path, monkeypatch):
    from nmtkit.train.trainer import Trainer

    real_step = Trainer.train_step

    def step_leaving_inf(self, group):  # noqa: ANN001, ANN202
        out = real_step(self, group)
        if self.state.update == 1:  # this is update 2: a finite update that leaves an infinite weight
            with torch.no_grad():
                next(self.model.parameters()).view(-1)[0] = INF
        return out

    monkeypatch.setattr(Trainer, "train_step", step_leaving_inf)
    save = tmp_path / "c"
    res = CliRunner().invoke(train, train_args(data_dir, save, "--max-epoch", "1", "--save-interval-updates", "1"))
    assert res.exit_code == 1, res.output
    line = error_line(res.output)
    assert "training diverged: weights not finite (" in line and "after update 2" in line, line
    assert f"{save / 'checkpoint_last.pt'} (update 1) is kept" in line
    weights = load_checkpoint(save / "checkpoint_last.pt")["model"]
    assert all(bool(torch.isfinite(t).all()) for t in weights.values())


def test_the_guard_counts_consecutive_nonfinite_updates_only():
    guard = DivergenceGuard(limit=2)
    updates = [(1.0, 1.0), (NAN, NAN), (NAN, NAN), (2.0, 1.0), (INF, NAN), (1.0, INF)]
    assert [guard.after_update(u, loss, g) for u, (loss, g) in enumerate(updates, 1)] == [None] * 6
    assert guard.streak == 2
    reason = guard.after_update(7, NAN, NAN)
    assert reason is not None and reason.startswith("3 consecutive updates (5-7) with a non-finite loss")
    assert DivergenceGuard(limit=0).after_update(1, NAN, 1.0) is not None  # 0: stop at the first


def test_fp16_loss_scale_overflows_are_not_divergence():
    assert not nonfinite_update(2.5, INF, loss_scale=65536.0)  # GradScaler halves the scale and retries
    assert nonfinite_update(2.5, INF, loss_scale=1.0)  # the scale cannot be what overflows
    assert nonfinite_update(NAN, 1.0, loss_scale=65536.0)  # the loss itself is float32
    assert nonfinite_update(2.5, NAN, loss_scale=None)  # float32/bf16: any non-finite gradient
    assert not nonfinite_update(2.5, 3.0)


def test_weights_problem_names_the_tensors():
    ok = {"a": torch.zeros(2), "steps": torch.tensor([3])}
    assert weights_problem(ok.items()) is None
    bad = {"a": torch.tensor([1.0, math.nan]), "b": torch.tensor([INF]), "c": torch.ones(1)}
    assert weights_problem(bad.items()) == "weights not finite (a, b)"
