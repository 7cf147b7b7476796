"""nmtkit-train: exact resume, refusals, signals, logs, and DDP equivalence."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from click.testing import CliRunner

from tests.helpers import params, run_train

from nmtkit.cli.train import command as train
from nmtkit.checkpoint import load_checkpoint




def test_interrupted_then_resumed_equals_uninterrupted_bit_for_bit(data_dir, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert run_train(data_dir, a, "--max-epoch", "3").exit_code == 0
    # b stops mid-epoch 2 (3 batches per epoch), then the same command resumes it
    r1 = run_train(data_dir, b, "--max-epoch", "3", "--max-update", "4")
    assert r1.exit_code == 0, r1.output
    r2 = run_train(data_dir, b, "--max-epoch", "3")
    assert r2.exit_code == 0, r2.output
    assert "resuming from" in r2.output and "update 4" in r2.output and "lr 0.001" in r2.output
    pa, pb = params(a / "checkpoint_last.pt"), params(b / "checkpoint_last.pt")
    assert pa.keys() == pb.keys()
    for k in pa:
        assert torch.equal(pa[k], pb[k]), k
    for name in ("checkpoint_best.pt", "checkpoint1.pt", "checkpoint3.pt", "learning_curve.png"):
        assert (b / name).exists()
    # the log was appended to by both runs, never truncated
    records = [json.loads(l) for l in (b / "train_log.jsonl").read_text().splitlines()]
    events = [r["event"] for r in records]
    inside = [r["update"] for r in records if r["event"] == "valid" and r.get("inside_epoch")]
    assert events.count("start") == 2 and events.count("valid") == 3 + 1 and inside == [4]


def test_max_update_inside_an_epoch_validates_the_last_weights(data_dir, tmp_path):
    """The updates after the last epoch's end are validated and can be checkpoint_best.pt."""
    save = tmp_path / "m"
    res = run_train(data_dir, save, "--max-epoch", "3", "--max-update", "5")  # 3 batches per epoch
    assert res.exit_code == 0, res.output
    valid = [json.loads(l) for l in (save / "train_log.jsonl").read_text().splitlines()]
    valid = [r for r in valid if r["event"] == "valid"]
    assert [(r["update"], r.get("inside_epoch", False)) for r in valid] == [(3, False), (5, True)]
    assert "update 5: valid loss" in res.output
    best = params(save / "checkpoint_best.pt")
    expected = "checkpoint_last.pt" if valid[1]["valid_loss"] < valid[0]["valid_loss"] else "checkpoint1.pt"
    assert all(torch.equal(t, params(save / expected)[k]) for k, t in best.items())
    state = load_checkpoint(save / "checkpoint_last.pt")["train_state"]["state"]
    assert state["best_valid_loss"] == min(r["valid_loss"] for r in valid)


def test_max_epoch_reached_says_so(data_dir, tmp_path):
    assert run_train(data_dir, tmp_path / "c", "--max-epoch", "1").exit_code == 0
    res = run_train(data_dir, tmp_path / "c", "--max-epoch", "1")
    assert res.exit_code == 0 and "already reached --max-epoch 1" in res.output


def test_resume_refuses_other_model_options(data_dir, tmp_path):
    assert run_train(data_dir, tmp_path / "c", "--max-epoch", "1").exit_code == 0
    res = run_train(data_dir, tmp_path / "c", "--max-epoch", "2", "--hidden-size", "32")
    assert res.exit_code == 1
    assert "hidden_size: checkpoint 96, now 32" in res.output


def test_resume_accepts_checkpoint_written_before_an_option_existed(data_dir, tmp_path):
    """A checkpoint lacks options added to the model later (e.g. rnnsearch's alignment_head);
    the same command must resume it, the missing options taking their defaults."""
    import dataclasses

    from nmtkit.models import registry

    save = tmp_path / "c"
    assert run_train(data_dir, save, "--max-epoch", "1").exit_code == 0
    last = save / "checkpoint_last.pt"
    ckpt = torch.load(last, map_location="cpu", weights_only=False)
    defaults = {f.name: f.default for f in dataclasses.fields(registry.get_model_class(ckpt["model_name"]).Config)
                if f.default is not dataclasses.MISSING}
    dropped = next(k for k, v in ckpt["model_config"].items() if defaults.get(k, object()) == v)
    del ckpt["model_config"][dropped]
    torch.save(ckpt, last)
    res = run_train(data_dir, save, "--max-epoch", "2")
    assert res.exit_code == 0, res.output
    assert "resuming from" in res.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--arch", "no_such_arch"], "unknown arch 'no_such_arch'; known archs: "),
        (["--model-opt", "colour=blue"], "unknown option colour"),
        (["--attention", "sideways"], "attention"),
    ],
)
def test_bad_options_are_one_line_errors(data_dir, tmp_path, args, message):
    res = CliRunner().invoke(train, [str(data_dir), "--arch", "luong_tiny", "--save-dir", str(tmp_path / "x"), "--no-progress", *args])
    assert res.exit_code == 1
    assert res.output.startswith("nmtkit-train: error:") and message in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_not_a_data_dir(tmp_path):
    res = CliRunner().invoke(train, [str(tmp_path), "--arch", "luong_tiny", "--save-dir", str(tmp_path / "x")])
    assert res.exit_code == 1 and "not an nmtkit data directory" in res.output


def test_truncated_checkpoint_is_refused(data_dir, tmp_path):
    save = tmp_path / "c"
    assert run_train(data_dir, save, "--max-epoch", "1").exit_code == 0
    last = save / "checkpoint_last.pt"
    last.write_bytes(last.read_bytes()[:1000])
    res = run_train(data_dir, save, "--max-epoch", "2")
    assert res.exit_code == 1 and "checkpoint_last.pt: not a readable nmtkit checkpoint" in res.output


@pytest.mark.slow
def test_sigint_writes_checkpoint_then_resumes(data_dir, tmp_path):
    save = tmp_path / "sig"
    cmd = [sys.executable, "-m", "nmtkit.cli.train", str(data_dir), "--arch", "luong_tiny", "--save-dir", str(save),
           "--batch-size", "1", "--max-epoch", "100000", "--log-interval", "1", "--no-progress", "--threads", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = save / "train_log.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and not (log.exists() and '"train"' in log.read_text()):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "SIGINT: wrote" in err
    ckpt = load_checkpoint(save / "checkpoint_last.pt")
    assert ckpt["train_state"]["state"]["update"] >= 1


@pytest.mark.parametrize("env, message", [
    ({"WORLD_SIZE": "abc"}, "WORLD_SIZE must be an integer of at least 1 (as torchrun sets it), got 'abc'"),
    ({"WORLD_SIZE": "0"}, "WORLD_SIZE must be an integer of at least 1"),
    ({"WORLD_SIZE": "2"}, "RANK is not set: WORLD_SIZE above 1 means a distributed run"),
    ({"WORLD_SIZE": "2", "RANK": "5", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511"}, "RANK 5 is not below WORLD_SIZE 2"),
    ({"WORLD_SIZE": "2", "RANK": "-1"}, "RANK must be an integer of at least 0"),
    ({"WORLD_SIZE": "2", "RANK": "0"}, "MASTER_ADDR is not set"),
    ({"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "99999"}, "MASTER_PORT must be a port number"),
])
def test_a_bad_launcher_environment_is_one_line(data_dir, tmp_path, monkeypatch, env, message):
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    res = run_train(data_dir, tmp_path / "c", "--max-update", "1")
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1 and len(lines) == 1 and lines[0].startswith(f"nmtkit-train: error: {message}"), res.output
    assert not (tmp_path / "c").exists()


def test_sigterm_ends_a_rank_waiting_for_its_peers(data_dir, tmp_path):
    """The join is in C++, where the command's Python SIGTERM handler never runs: it must not
    leave a process that only SIGKILL ends."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "nmtkit.cli.train", str(data_dir), "--arch", "luong_tiny", "--save-dir", str(tmp_path / "c"),
           "--max-update", "1", "--no-progress", "--threads", "1", "--device", "cpu"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    time.sleep(8)  # imports done, waiting for rank 0 (which never comes)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode in (-signal.SIGTERM, 128 + signal.SIGTERM, 130)
    assert not (tmp_path / "c").exists()


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["luong_tiny", "transformer_test"])
def test_ddp_two_gloo_processes_equal_one_process(data_dir, tmp_path, arch):
    """Two CPU processes, each half of every batch, end with the single process's parameters."""
    common = [str(data_dir), "--arch", arch, "--batch-size", "4", "--max-update", "3", "--dropout", "0",
              "--no-progress", "--threads", "1", "--max-epoch", "0", "--seed", "3", "--optimizer", "sgd", "--lr", "0.5",
              "--amp", "none"]  # float32: the sums of two processes and of one then agree to rounding
    single = tmp_path / "single"
    assert CliRunner().invoke(train, [*common, "--save-dir", str(single)]).exit_code == 0
    ddp = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", "29517", "-m", "nmtkit.cli.train", *common, "--save-dir", str(ddp)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    ps, pd = params(single / "checkpoint_last.pt"), params(ddp / "checkpoint_last.pt")
    assert load_checkpoint(ddp / "checkpoint_last.pt")["train_state"]["state"]["update"] == 3
    for k in ps:  # same sentences, same gradients: only float summation order differs
        torch.testing.assert_close(pd[k], ps[k], rtol=1e-5, atol=1e-6)


def test_stop_time_budget_goes_on_after_an_interruption_and_is_the_total(data_dir, tmp_path):
    save = tmp_path / "t"
    res = run_train(data_dir, save, "--max-epoch", "1", "--stop-time-hours", "1")
    assert res.exit_code == 0 and "reached --stop-time-hours" not in res.output
    last = save / "checkpoint_last.pt"
    spent = load_checkpoint(last)["train_state"]["state"]["budget_wall_s"]
    assert 0 < spent < 3600

    def set_spent(seconds: float) -> None:  # as if earlier runs had used this much of the hour
        ckpt = torch.load(last, weights_only=False)
        ckpt["train_state"]["state"]["budget_wall_s"] = seconds
        torch.save(ckpt, last)

    set_spent(3600 - 1e-6)  # interrupted just before the hour: the rest is one update
    res = run_train(data_dir, save, "--max-epoch", "3", "--stop-time-hours", "1")
    assert res.exit_code == 0 and "reached --stop-time-hours" in res.output, res.output
    state = load_checkpoint(last)["train_state"]["state"]
    assert state["epoch"] == 2 and state["batches_done"] == 1
    set_spent(3600.0)  # the hour was used up: rerunning the command trains nothing; a raised budget goes on
    res = run_train(data_dir, save, "--max-epoch", "3", "--stop-time-hours", "1")
    assert res.exit_code == 0 and "already reached --stop-time-hours 1" in res.output, res.output
    res = run_train(data_dir, save, "--max-epoch", "3", "--stop-time-hours", "2")
    assert res.exit_code == 0 and "reached --stop-time-hours" not in res.output, res.output
    assert load_checkpoint(last)["train_state"]["state"]["epoch"] == 4


def test_stop_time_writes_checkpoint_and_resumes(data_dir, tmp_path):
    save = tmp_path / "t"
    res = run_train(data_dir, save, "--max-epoch", "50", "--stop-time-hours", "0.0000001")
    assert res.exit_code == 0 and "reached --stop-time-hours" in res.output
    assert load_checkpoint(save / "checkpoint_last.pt")["train_state"]["state"]["update"] == 1
    res = run_train(data_dir, save, "--max-epoch", "1")
    assert res.exit_code == 0 and "resuming from" in res.output and "update 1" in res.output


def test_a_best_valid_loss_too_large_for_exp_ends_with_ppl_inf_not_a_traceback(data_dir, tmp_path, monkeypatch):
    from nmtkit.train.trainer import Trainer

    real_train = Trainer.train

    def diverging_train(self):  # noqa: ANN001, ANN202
        state = real_train(self)
        state.best_valid_loss = 1000.0  # exp(1000) overflows a float (e.g. --optimizer sgd --lr 100)
        return state

    monkeypatch.setattr(Trainer, "train", diverging_train)
    res = run_train(data_dir, tmp_path / "c", "--max-update", "1")
    assert res.exit_code == 0, res.output
    assert "best valid loss 1000.000 (ppl inf)" in res.output


def test_forced_perplexity_overflows_to_inf():
    from nmtkit.generate.forced import ForcedResult

    r = ForcedResult(tokens=[5], positional_scores=torch.tensor([-800.0, -800.0]), log_prob=-1600.0, num_tokens=2, attention=None)
    assert r.perplexity == float("inf")


def test_arch_is_required_not_a_silent_toy_model(data_dir, tmp_path):
    res = CliRunner().invoke(train, [str(data_dir), "--save-dir", str(tmp_path / "x")])
    assert res.exit_code == 2 and "Missing option '--arch'" in res.output and not (tmp_path / "x").exists()
    shown = " ".join(CliRunner().invoke(train, ["--help"]).output.replace("│", " ").split())  # rich-click wraps in a box
    assert "the *_tiny presets are for tests" in shown
