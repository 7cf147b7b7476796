"""What training keeps on disk: checkpoint_last.pt alone holds the optimizer state, the best and
epoch checkpoints the weights only, the last --keep-last (default 5) epochs are kept, and each
epoch says what it wrote."""
from __future__ import annotations

import re

import torch
from click.testing import CliRunner

from nmtkit.checkpoint import load_checkpoint
from nmtkit.cli.average import command as average
from nmtkit.cli.train import command as train
from nmtkit.cli.translate import command as translate


def test_only_the_last_checkpoint_carries_the_training_state(data_dir, tmp_path):
    save = tmp_path / "ck"
    args = [str(data_dir), "--arch", "luong_tiny", "--save-dir", str(save), "--batch-size", "2", "--seed", "3",
            "--no-progress", "--threads", "1", "--device", "cpu"]
    res = CliRunner().invoke(train, [*args, "--max-epoch", "7"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in save.glob("checkpoint[0-9]*.pt")) == [f"checkpoint{n}.pt" for n in range(3, 8)]  # --keep-last 5
    last, best, epoch = (load_checkpoint(save / n, mmap=False) for n in ("checkpoint_last.pt", "checkpoint_best.pt", "checkpoint7.pt"))
    assert last["train_state"]["optimizer"]["state"] and "train_state" not in best and "train_state" not in epoch
    assert all(torch.equal(last["model"][k], epoch["model"][k]) for k in last["model"])
    assert (save / "checkpoint7.pt").stat().st_size < 0.5 * (save / "checkpoint_last.pt").stat().st_size  # Adam: 2 moments
    # each epoch says what it wrote and what the directory holds
    shown = [line for line in res.output.splitlines() if "wrote checkpoint_last.pt" in line]
    assert len(shown) == 7 and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d wrote checkpoint_last\.pt [\d.]+ MB, checkpoint7\.pt [\d.]+ MB(, checkpoint_best\.pt [\d.]+ MB)?; "
                                            + re.escape(str(save)) + r" holds [\d.]+ MB of checkpoints", shown[-1]), shown[-1]
    assert any(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d epoch 7 done: update 21, valid loss .*", line)
               for line in res.output.splitlines())  # log lines carry the time
    # averaging, translating and resuming work as before
    res = CliRunner().invoke(average, ["--last", "3", "--save-dir", str(save), "-o", str(tmp_path / "avg.pt")])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(translate, ["--path", str(save / "checkpoint_best.pt"), "--device", "cpu"], input="the cat sits .\n")
    assert res.exit_code == 0 and res.stdout.strip(), res.output
    res = CliRunner().invoke(train, [*args, "--max-epoch", "8", "--reset-optimizer"])
    assert res.exit_code == 0 and "resuming from" in res.output and "fresh adam state" in res.output, res.output


def test_every_line_of_a_logged_run_carries_the_time(data_dir, tmp_path):
    """Start, resume, stop and summary lines too, not only the trainer's progress lines."""
    args = [str(data_dir), "--arch", "luong_tiny", "--save-dir", str(tmp_path / "ck"), "--batch-size", "2",
            "--no-progress", "--threads", "1", "--device", "cpu"]
    for extra in (["--max-update", "2"], ["--max-update", "4"]):  # a fresh run, then a resumed one
        res = CliRunner().invoke(train, [*args, *extra])
        assert res.exit_code == 0, res.output
        lines = [line for line in res.output.splitlines() if line.strip() and not line.startswith(" ")]
        assert lines and all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", line) for line in lines), res.output
        # a stop inside an epoch says what it wrote, as an epoch's end does
        assert any(re.search(r"reached --max-update \d+; wrote checkpoint_last\.pt [\d.]+ MB", line) for line in lines), res.output
