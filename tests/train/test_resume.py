"""nmtkit-train resume policy (changed options, --reset-*), the save-dir lock, signals in every
phase, and what a killed run leaves behind (temporary files, log records of redone updates)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from nmtkit.cli.preprocess import command as preprocess
from nmtkit.cli.train import command as train
from nmtkit.checkpoint import load_checkpoint, save_checkpoint
from nmtkit.train.lock import LOCK_NAME

from tests.helpers import dead_pid, params, run_train


def state_of(save: Path) -> dict:
    return load_checkpoint(save / "checkpoint_last.pt")["train_state"]["state"]


def train_records(save: Path) -> list[int]:
    recs = [json.loads(l) for l in (save / "train_log.jsonl").read_text().splitlines()]
    return [r["update"] for r in recs if r["event"] == "train" and not r.get("superseded")]


# -- item 1: changed options on resume ----------------------------------------------------------
def test_new_lr_and_limits_are_applied_and_announced(data_dir, tmp_path):
    save = tmp_path / "c"
    assert run_train(data_dir, save, "--max-update", "2").exit_code == 0  # mid-epoch 1 (3 batches)
    res = run_train(data_dir, save, "--lr", "0.0005", "--max-epoch", "2", "--log-interval", "7")
    assert res.exit_code == 0, res.output
    assert "lr 0.001 -> 0.0005 (from --lr)" in res.output
    assert "max_epoch 0 -> 2 (from --max-epoch)" in res.output  # --max-update alone left epochs unlimited
    assert "log_interval 50 -> 7 (from --log-interval)" in res.output
    ckpt = load_checkpoint(save / "checkpoint_last.pt")
    assert ckpt["train_state"]["optimizer"]["param_groups"][0]["lr"] == 0.0005
    assert ckpt["train_options"]["lr"] == 0.0005 and ckpt["train_state"]["state"]["update"] == 6
    assert not (save / LOCK_NAME).exists()


def test_unchangeable_options_are_refused_with_every_difference(data_dir, tmp_path):
    save = tmp_path / "c"
    assert run_train(data_dir, save, "--max-update", "2").exit_code == 0
    before = (save / "checkpoint_last.pt").read_bytes()
    res = run_train(data_dir, save, "--optimizer", "sgd", "--batch-size", "3", "--seed", "8", "--lr-schedule", "halving")
    assert res.exit_code == 1
    out = res.output.strip()
    assert out.startswith("nmtkit-train: error:") and len(out.splitlines()) == 1 and "Traceback" not in out
    for part in ("optimizer adam -> sgd (needs --reset-optimizer)", "lr_schedule fixed -> halving (needs --reset-lr-scheduler)",
                 "seed 7 -> 8 (needs --reset-dataloader)", "batch_size 2 -> 3 in the middle of epoch 1 (2 batches done"):
        assert part in out, part
    assert (save / "checkpoint_last.pt").read_bytes() == before
    assert not (save / LOCK_NAME).exists()  # released after the error


def test_batching_may_change_at_an_epoch_boundary(data_dir, tmp_path):
    save = tmp_path / "c"
    assert run_train(data_dir, save, "--max-epoch", "1").exit_code == 0
    res = run_train(data_dir, save, "--max-epoch", "2", "--batch-size", "3")
    assert res.exit_code == 0, res.output
    assert "batch_size 2 -> 3 (from --batch-size)" in res.output
    assert state_of(save)["update"] == 3 + 2  # epoch 2 in batches of 3 sentences


def test_reset_optimizer_allows_another_optimizer(data_dir, tmp_path):
    save = tmp_path / "c"
    assert run_train(data_dir, save, "--max-update", "2").exit_code == 0
    res = run_train(data_dir, save, "--optimizer", "sgd", "--lr", "0.1", "--reset-optimizer", "--max-update", "3")
    assert res.exit_code == 0, res.output
    assert "optimizer adam -> sgd (--reset-optimizer)" in res.output and "lr 0.001 -> 0.1 (from --lr)" in res.output
    group = load_checkpoint(save / "checkpoint_last.pt")["train_state"]["optimizer"]["param_groups"][0]
    assert "momentum" in group and "betas" not in group and group["lr"] == 0.1
    assert state_of(save)["update"] == 3


def test_reset_dataloader_restarts_the_epoch_with_new_batching(data_dir, tmp_path):
    save = tmp_path / "c"
    assert run_train(data_dir, save, "--max-update", "2").exit_code == 0
    res = run_train(data_dir, save, "--batch-size", "3", "--reset-dataloader", "--max-update", "3")
    assert res.exit_code == 0, res.output
    assert "epoch 1 starts again from its first batch (2 were done; --reset-dataloader)" in res.output
    st = state_of(save)
    assert (st["epoch"], st["batches_done"], st["update"]) == (1, 1, 3)


def test_reset_lr_scheduler_restarts_the_decayed_lr(data_dir, tmp_path):
    save = tmp_path / "c"
    halving = ("--lr-schedule", "halving", "--halve-after", "1")
    assert run_train(data_dir, save, "--max-epoch", "2", *halving).exit_code == 0  # 0.001 -> 0.0005 -> 0.00025
    res = run_train(data_dir, save, "--max-epoch", "3", *halving, "--lr", "0.002")
    assert res.exit_code == 0, res.output
    assert "lr 0.001 -> 0.002 (from --lr; the schedule had brought it to 0.00025)" in res.output
    res = run_train(data_dir, save, "--max-epoch", "4", "--lr-schedule", "fixed", "--lr", "0.002", "--reset-lr-scheduler")
    assert res.exit_code == 0, res.output
    assert "lr 0.001 -> 0.002" in res.output  # back at --lr: the halvings are forgotten
    assert "lr_schedule halving -> fixed (--reset-lr-scheduler)" in res.output
    assert load_checkpoint(save / "checkpoint_last.pt")["train_state"]["optimizer"]["param_groups"][0]["lr"] == 0.002


def test_options_missing_from_an_older_checkpoint_count_as_defaults(data_dir, tmp_path):
    save = tmp_path / "c"
    assert run_train(data_dir, save, "--max-update", "2").exit_code == 0
    path = save / "checkpoint_last.pt"
    ckpt = load_checkpoint(path)
    for key in ("lr", "update_freq", "keep_last", "clip_norm"):
        ckpt["train_options"].pop(key, None)
    ckpt.pop("train_data")
    ckpt["train_state"].pop("log_records")
    save_checkpoint(path, {k: v for k, v in ckpt.items() if k not in ("format", "version", "nmtkit_version")})
    res = run_train(data_dir, save, "--max-update", "3")
    assert res.exit_code == 0, res.output
    changes = [l for l in res.output.splitlines() if "->" in l]
    assert changes == ["  max_update 2 -> 3 (from --max-update)"]  # and nothing about the missing options


def test_other_training_data_is_refused_mid_epoch(data_dir, tiny_parallel, tmp_path):
    save = tmp_path / "c"
    assert run_train(data_dir, save, "--max-update", "2").exit_code == 0
    small = tmp_path / "raw2"
    small.mkdir()
    for lang in ("en", "de"):
        lines = (tiny_parallel / f"train.{lang}").read_text().splitlines()[:4]
        (small / f"train.{lang}").write_text("\n".join(lines) + "\n")
    other = tmp_path / "bin2"
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(small / "train"), "--validpref",
                                          str(tiny_parallel / "valid"), "--destdir", str(other),
                                          "--srcdict", str(data_dir / "dict.en.txt"), "--tgtdict", str(data_dir / "dict.de.txt")])
    assert res.exit_code == 0, res.output
    res = run_train(other, save, "--max-update", "3")
    assert res.exit_code == 1 and "training data 6 sentences" in res.output and "(needs --reset-dataloader)" in res.output
    res = run_train(other, save, "--max-update", "3", "--reset-dataloader")
    assert res.exit_code == 0, res.output


# -- item 2: one trainer per save dir; signals in every phase -------------------------------------
def test_live_lock_is_refused_naming_the_pid(data_dir, tmp_path):
    save = tmp_path / "c"
    save.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (save / LOCK_NAME).write_text(f"{holder.pid}\n")
        res = run_train(data_dir, save, "--max-update", "1")
        assert res.exit_code == 1 and f"in use by another nmtkit-train (pid {holder.pid})" in res.output
        assert not (save / "checkpoint_last.pt").exists() and (save / LOCK_NAME).exists()
    finally:
        holder.kill()
        holder.wait()


def test_stale_lock_is_taken_over_with_a_warning(data_dir, tmp_path):
    save = tmp_path / "c"
    save.mkdir()
    pid = dead_pid()
    (save / LOCK_NAME).write_text(f"{pid}\n")
    res = run_train(data_dir, save, "--max-update", "1")
    assert res.exit_code == 0, res.output
    assert f"stale lock of pid {pid}" in res.output
    assert not (save / LOCK_NAME).exists() and state_of(save)["update"] == 1


def _send_sigterm_here() -> None:
    """Deliver SIGTERM through the installed Python handler, as the interpreter would."""
    handler = signal.getsignal(signal.SIGTERM)
    assert callable(handler), "the trainer installed no SIGTERM handler"
    handler(signal.SIGTERM, None)


def test_sigterm_during_validation_stops_at_once_and_resumes_exactly(data_dir, tmp_path, monkeypatch):
    import nmtkit.train.validation as validation_mod

    ref = tmp_path / "ref"
    assert run_train(data_dir, ref, "--max-epoch", "2").exit_code == 0
    real = validation_mod.make_batches
    seen = []

    def batches(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        out = real(*args, **kwargs)
        if kwargs.get("shuffle", True):
            return out

        def gen():  # noqa: ANN202
            for k, b in enumerate(out):
                seen.append(k)
                if k == 1:
                    _send_sigterm_here()  # arrives in the middle of the valid set
                yield b

        return gen()

    save = tmp_path / "c"
    monkeypatch.setattr(validation_mod, "make_batches", batches)
    res = run_train(data_dir, save, "--max-epoch", "2")
    monkeypatch.setattr(validation_mod, "make_batches", real)
    assert res.exit_code == 130, res.output
    assert seen == [0, 1]  # validation did not go on after the signal
    assert "SIGTERM: wrote" in res.output
    st = state_of(save)
    assert (st["epoch"], st["batches_done"], st["update"]) == (1, 3, 3)  # epoch 1 trained, not yet validated
    assert not (save / LOCK_NAME).exists()
    res = run_train(data_dir, save, "--max-epoch", "2")
    assert res.exit_code == 0, res.output
    pa, pb = params(ref / "checkpoint_last.pt"), params(save / "checkpoint_last.pt")
    assert all(torch.equal(pa[k], pb[k]) for k in pa)


def test_sigterm_during_a_checkpoint_write_finishes_it_then_stops(data_dir, tmp_path, monkeypatch):
    import nmtkit.train.checkpoints as checkpoints_mod

    ref = tmp_path / "ref"
    assert run_train(data_dir, ref, "--max-epoch", "2").exit_code == 0
    real = checkpoints_mod.save_checkpoint
    calls = []

    def save(path, payload):  # noqa: ANN001, ANN202
        calls.append(Path(path).name)
        if len(calls) == 1:
            _send_sigterm_here()  # while the end-of-epoch checkpoints are being written
        real(path, payload)

    save_dir = tmp_path / "c"
    monkeypatch.setattr(checkpoints_mod, "save_checkpoint", save)
    res = run_train(data_dir, save_dir, "--max-epoch", "2")
    monkeypatch.setattr(checkpoints_mod, "save_checkpoint", real)
    assert res.exit_code == 130, res.output
    assert calls == ["checkpoint_last.pt", "checkpoint1.pt", "checkpoint_best.pt"]  # the write completed, nothing more
    st = state_of(save_dir)
    assert (st["epoch"], st["batches_done"], st["update"]) == (2, 0, 3)
    assert not list(save_dir.glob(".*.tmp"))
    res = run_train(data_dir, save_dir, "--max-epoch", "2")
    assert res.exit_code == 0, res.output
    pa, pb = params(ref / "checkpoint_last.pt"), params(save_dir / "checkpoint_last.pt")
    assert all(torch.equal(pa[k], pb[k]) for k in pa)


def _slow_args(data: Path, save: Path, *extra: str) -> list[str]:
    """A run that goes on until stopped, one sentence per update."""
    return [str(data), "--arch", "luong_tiny", "--save-dir", str(save), "--batch-size", "1", "--max-epoch", "100000",
            "--log-interval", "1", "--no-progress", "--threads", "1", *extra]


def _trainer_process(data: Path, save: Path, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "nmtkit.cli.train", *_slow_args(data, save, *extra)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_update(save: Path, update: int, proc: subprocess.Popen) -> None:
    log = save / "train_log.jsonl"
    deadline = time.time() + 90
    while time.time() < deadline and proc.poll() is None:
        if log.exists() and any(u >= update for u in train_records_safe(save)):
            return
        time.sleep(0.1)
    raise AssertionError(f"trainer did not reach update {update}: {proc.poll()}")


def train_records_safe(save: Path) -> list[int]:
    out = []
    for line in (save / "train_log.jsonl").read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("event") == "train":
            out.append(rec["update"])
    return out


def test_second_trainer_is_refused_and_sigterm_stops_the_first(data_dir, tmp_path):
    save = tmp_path / "c"
    proc = _trainer_process(data_dir, save)
    try:
        _wait_for_update(save, 1, proc)
        res = run_train(data_dir, save, "--max-update", "1")
        assert res.exit_code == 1 and f"(pid {proc.pid})" in res.output
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "SIGTERM: wrote" in err and "Traceback" not in err
    assert not (save / LOCK_NAME).exists()
    assert state_of(save)["update"] >= 1


# -- item 8: leftovers of kill -9 --------------------------------------------------------------
@pytest.mark.slow
def test_kill_9_then_resume_leaves_no_duplicate_log_records_or_temp_files(data_dir, tmp_path):
    save = tmp_path / "c"
    proc = _trainer_process(data_dir, save, "--save-interval-updates", "4")
    try:
        _wait_for_update(save, 7, proc)
    finally:
        proc.kill()  # SIGKILL: no cleanup at all
        proc.wait()
    assert (save / LOCK_NAME).exists()
    killed_at = max(train_records_safe(save))
    with open(save / "train_log.jsonl", "a") as fh:
        fh.write('{"time": 1, "event": "train", "upd')  # a record torn by the kill
    leftover = save / f".checkpoint_last.pt.{dead_pid()}.abcd1234.tmp"
    leftover.write_bytes(b"partial")
    stop = killed_at + 3
    res = CliRunner().invoke(train, _slow_args(data_dir, save, "--save-interval-updates", "4", "--max-update", str(stop)))
    assert res.exit_code == 0, res.output
    updates = train_records(save)
    assert updates == list(range(1, stop + 1)), updates  # each update once, in order
    assert not leftover.exists() and "stale lock" in res.output
    events = [json.loads(l)["event"] for l in (save / "train_log.jsonl").read_text().splitlines()]
    assert events.count("start") == 2  # the killed run's start is history and stays


def _resume_after_editing_the_checkpoint(data_dir, tmp_path, edit):  # noqa: ANN001, ANN202
    """Train 1 update, apply ``edit`` to checkpoint_last.pt (saved again), then ask for a 2nd update."""
    from click.testing import CliRunner

    from nmtkit.cli.train import command as train

    save = tmp_path / "s"
    args = [str(data_dir), "--arch", "luong_tiny", "--save-dir", str(save), "--batch-size", "2", "--max-epoch", "0",
            "--no-progress", "--threads", "1"]
    assert CliRunner().invoke(train, [*args, "--max-update", "1"]).exit_code == 0
    ckpt = load_checkpoint(save / "checkpoint_last.pt")
    edit(ckpt)
    save_checkpoint(save / "checkpoint_last.pt", {k: v for k, v in ckpt.items() if k not in ("format", "version", "nmtkit_version")})
    return CliRunner().invoke(train, [*args, "--max-update", "2"])


def test_a_malformed_training_state_is_one_line(data_dir, tmp_path):
    """A checkpoint_last.pt whose training state is missing (another tool, a damaged edit) is refused
    by name, not with a KeyError traceback."""
    res = _resume_after_editing_the_checkpoint(data_dir, tmp_path, lambda ckpt: ckpt["train_state"].pop("state"))
    assert res.exit_code == 1
    lines = [l for l in res.output.strip().splitlines() if "error" in l]
    assert len(lines) == 1 and "not a resumable training checkpoint" in lines[0] and "checkpoint_last.pt" in lines[0]


def test_weights_of_another_version_of_the_model_are_one_line_naming_them(data_dir, tmp_path):
    """A checkpoint_last.pt whose weights do not fit the model its options build (written before an
    option gained weights, or edited) is refused naming the file and the weights, not with a
    load_state_dict traceback."""
    res = _resume_after_editing_the_checkpoint(data_dir, tmp_path, lambda ckpt: ckpt["model"].pop("encoder.embed.weight"))
    assert res.exit_code == 1 and "Traceback" not in res.output
    lines = [l for l in res.output.strip().splitlines() if "error" in l]
    assert len(lines) == 1 and "checkpoint_last.pt" in lines[0] and "missing encoder.embed.weight" in lines[0], lines


def test_a_dangling_checkpoint_last_link_is_named_as_one(data_dir, tmp_path):
    """A checkpoint_last.pt that is a link to a removed file was listed among the checkpoints the
    directory "holds", and then said to be missing."""
    save = tmp_path / "c"
    save.mkdir()
    (save / "checkpoint_last.pt").symlink_to(tmp_path / "gone.pt")
    res = run_train(data_dir, save, "--max-update", "1")
    assert res.exit_code == 1
    assert res.output.strip() == (f"nmtkit-train: error: {save / 'checkpoint_last.pt'}: is a symbolic link to "
                                  f"{tmp_path / 'gone.pt'}, which does not exist: nmtkit replaces this file as one of "
                                  "its own and would write over the link's target; remove the link (or put the file "
                                  "itself there) or use another directory")
    assert (save / "checkpoint_last.pt").is_symlink() and not (save / LOCK_NAME).exists()


def test_a_save_dir_with_checkpoints_but_no_last_one_is_refused_not_overwritten(data_dir, tmp_path):
    save = tmp_path / "c"
    assert run_train(data_dir, save, "--max-epoch", "1").exit_code == 0
    (save / "checkpoint_last.pt").unlink()
    kept = {p.name: p.read_bytes() for p in save.glob("checkpoint*.pt")}
    log = (save / "train_log.jsonl").read_text()
    res = run_train(data_dir, save, "--max-update", "1")
    assert res.exit_code == 1
    line = res.output.strip()
    assert "\n" not in line and "Traceback" not in line and "no checkpoint_last.pt" in line and "checkpoint_best.pt" in line
    assert {p.name: p.read_bytes() for p in save.glob("checkpoint*.pt")} == kept
    assert (save / "train_log.jsonl").read_text() == log and not (save / LOCK_NAME).exists()


def test_a_line_edited_into_the_log_is_refused_not_dropped(data_dir, tmp_path):
    """The line was deleted and reported as a record written after the checkpoint (issue 39)."""
    save = tmp_path / "c"
    assert run_train(data_dir, save, "--max-epoch", "2").exit_code == 0
    log = save / "train_log.jsonl"
    good = log.read_text().splitlines()
    log.write_text("\n".join([*good[:2], "{garbage", *good[2:]]) + "\n")
    edited, ckpt = log.read_bytes(), (save / "checkpoint_last.pt").read_bytes()
    res = run_train(data_dir, save, "--max-epoch", "3")
    assert res.exit_code == 1
    assert res.output.strip().startswith(f"nmtkit-train: error: {log}:3: not a record of nmtkit's training log")
    assert log.read_bytes() == edited and (save / "checkpoint_last.pt").read_bytes() == ckpt  # nothing trained


def test_flipped_bits_in_the_optimizer_state_stop_a_resume_but_not_a_translation(data_dir, tmp_path):
    import struct
    import zipfile
    import zlib

    save = tmp_path / "c"
    assert run_train(data_dir, save, "--max-update", "2").exit_code == 0
    last = save / "checkpoint_last.pt"
    model_crcs = {zlib.crc32(t.contiguous().view(-1).view(torch.uint8).numpy()) for t in load_checkpoint(last)["model"].values()}
    raw = bytearray(last.read_bytes())
    with zipfile.ZipFile(last) as archive:  # the largest tensor that is not the model's: optimizer state
        entry = max((i for i in archive.infolist() if "/data/" in i.filename and i.CRC not in model_crcs),
                    key=lambda i: i.file_size)
    name_len, extra_len = struct.unpack("<HH", raw[entry.header_offset + 26 : entry.header_offset + 30])
    start = entry.header_offset + 30 + name_len + extra_len
    for k in range(start, start + min(64, entry.file_size)):
        raw[k] ^= 0x10
    last.write_bytes(bytes(raw))
    load_checkpoint(last)  # translate, score, align read only the model: still fine
    res = run_train(data_dir, save, "--max-update", "4")
    assert res.exit_code == 1 and "corrupt checkpoint" in res.output and len(res.output.strip().splitlines()) == 1


# -- found by review: resume edge cases ------------------------------------------------------------
def test_other_batching_is_refused_when_an_epochs_batches_are_all_done_but_it_is_not_closed(data_dir, tmp_path):
    """--max-update at an epoch's last batch stops before the epoch is closed: another batching
    would train part of that epoch a second time."""
    save = tmp_path / "c"
    assert run_train(data_dir, save, "--max-update", "3").exit_code == 0  # epoch 1 has 3 batches of 2
    st = state_of(save)
    assert (st["epoch"], st["batches_done"]) == (1, 3)
    res = run_train(data_dir, save, "--max-epoch", "2", "--batch-size", "3")
    assert res.exit_code == 1 and "in the middle of epoch 1 (3 batches done" in res.output


def test_resuming_inside_an_epoch_beyond_max_epoch_says_there_is_nothing_left(data_dir, tmp_path):
    save = tmp_path / "c"
    assert run_train(data_dir, save, "--max-update", "4").exit_code == 0  # epoch 2, one batch done
    before = (save / "checkpoint_last.pt").read_bytes()
    res = run_train(data_dir, save, "--max-epoch", "1")
    assert res.exit_code == 0, res.output
    assert "already reached --max-epoch 1" in res.output and "inside epoch 2" in res.output
    assert (save / "checkpoint_last.pt").read_bytes() == before


def test_a_resume_without_validation_keeps_the_validated_best(data_dir, tmp_path):
    save = tmp_path / "c"
    assert run_train(data_dir, save, "--max-epoch", "1").exit_code == 0
    best = (save / "checkpoint_best.pt").read_bytes()
    res = run_train(data_dir, save, "--max-epoch", "2", "--valid-subset", "none")
    assert res.exit_code == 0, res.output
    assert (save / "checkpoint_best.pt").read_bytes() == best


def test_another_validation_split_restarts_the_best_scores(data_dir, tmp_path):
    save = tmp_path / "c"
    assert run_train(data_dir, save, "--max-epoch", "1").exit_code == 0
    assert state_of(save)["best_valid_loss"] is not None
    res = run_train(data_dir, save, "--max-epoch", "2", "--valid-subset", "train")
    assert res.exit_code == 0, res.output
    assert "validation differs from the checkpoint's: the best loss and BLEU and the plateau schedule" in res.output
    hist = load_checkpoint(save / "checkpoint_last.pt")["train_state"]["state"]
    assert hist["best_valid_loss"] == hist["finished_epochs"][-1]["valid_loss"]  # measured on train, nothing older
