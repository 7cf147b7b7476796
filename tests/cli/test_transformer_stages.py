"""The Transformer through the stages the recurrent models' own tests cover (issue 36: "wherever a
recurrent model works, it works too"): token batches with validation BLEU and kept epoch
checkpoints, their average, the divergence stop, unknown-word replacement from its attention alone
(not in an ensemble), and attention heatmaps from nmtkit-align."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from click.testing import CliRunner

from nmtkit.checkpoint import load_checkpoint
from nmtkit.cli.align import command as align
from nmtkit.cli.average import command as average
from nmtkit.cli.train import command as train
from tests.conftest import make_checkpoint
from tests.helpers import invoke_translate

ARCH = "transformer_test"


def train_args(data: Path, save: Path, *extra: str) -> list[str]:
    return [str(data), "--arch", ARCH, "--save-dir", str(save), "--seed", "3", "--no-progress", "--threads", "1",
            "--device", "cpu", "--amp", "none", "--log-interval", "1", *extra]


def test_token_batches_validation_bleu_kept_epochs_and_their_average(data_dir, tmp_path):
    save = tmp_path / "c"
    res = CliRunner().invoke(train, train_args(data_dir, save, "--max-tokens", "16", "--max-epoch", "3", "--keep-last", "2",
                                               "--eval-bleu", "--eval-bleu-beam", "2"))
    assert res.exit_code == 0, res.output
    log = [json.loads(line) for line in (save / "train_log.jsonl").read_text().splitlines()]
    valid = [r for r in log if r.get("event") == "valid"]
    assert len(valid) == 3 and all(isinstance(r.get("valid_bleu"), (int, float)) for r in valid), valid
    train_rows = [r for r in log if r.get("event") == "train"]
    assert train_rows and max(r["update"] for r in train_rows) > 3  # token batches: several per epoch
    assert sorted(p.name for p in save.glob("checkpoint[0-9]*.pt")) == ["checkpoint2.pt", "checkpoint3.pt"]
    out = save / "avg.pt"
    res = CliRunner().invoke(average, ["--last", "2", "--save-dir", str(save), "-o", str(out)])
    assert res.exit_code == 0, res.output
    two = [load_checkpoint(save / f"checkpoint{e}.pt")["model"] for e in (2, 3)]
    got = load_checkpoint(out)["model"]
    assert set(got) == set(two[0])
    for name, w in got.items():
        if w.is_floating_point():
            torch.testing.assert_close(w, (two[0][name] + two[1][name]) / 2)
    res = invoke_translate(["--path", str(out), "--beam", "2"], "the cat sits .\n")
    assert res.exit_code == 0 and len(res.stdout.splitlines()) == 1, res.output


def test_a_diverging_transformer_run_stops_with_one_line_and_no_checkpoint(data_dir, tmp_path):
    save = tmp_path / "d"
    res = CliRunner().invoke(train, train_args(data_dir, save, "--batch-size", "2", "--optimizer", "sgd", "--lr", "1e38",
                                               "--max-update", "40", "--max-nonfinite-updates", "0"))
    assert res.exit_code == 1, res.output
    lines = res.output.strip().splitlines()
    assert "Traceback" not in res.output and lines[-1].startswith("nmtkit-train: error: training diverged: "), lines[-1:]
    assert [line for line in lines if ": error: " in line] == lines[-1:]
    assert not list(save.glob("checkpoint_last.pt*"))


def test_replace_unk_copies_source_words_from_a_lone_transformers_attention(tmp_path):
    # --unkpen -1000 makes every step's best word <unk>: each is replaced by the source word its attention weighs most
    ckpt = make_checkpoint(tmp_path / "t.pt", ARCH, seed=2, init="uniform", init_scale=0.5)
    src = "the cat sees the dog .\nAnna sees a man .\n"
    plain = invoke_translate(["--path", str(ckpt), "--unkpen", "-1000", "--max-len-b", "3"], src)
    assert plain.exit_code == 0, plain.output
    assert all(set(line.split()) == {"<unk>"} for line in plain.stdout.splitlines()), plain.stdout
    res = invoke_translate(["--path", str(ckpt), "--unkpen", "-1000", "--max-len-b", "3", "--replace-unk"], src)
    assert res.exit_code == 0, res.output
    for line, source in zip(res.stdout.splitlines(), src.splitlines(), strict=True):
        assert line.split() and set(line.split()) <= set(source.split()), (line, source)


def test_align_draws_a_transformers_attention_heatmaps(tmp_path):
    ckpt = make_checkpoint(tmp_path / "t.pt", ARCH, seed=2, init="uniform", init_scale=0.5)
    (tmp_path / "s.txt").write_text("the cat sees the dog .\nAnna sees a man .\n")
    (tmp_path / "t.txt").write_text("die Katze sieht den Hund .\nAnna sieht einen Mann .\n")
    plots = tmp_path / "plots"
    res = CliRunner().invoke(align, ["--path", str(ckpt), "--source", str(tmp_path / "s.txt"), "--target",
                                     str(tmp_path / "t.txt"), "--device", "cpu", "--threads", "1", "--plot", str(plots)])
    assert res.exit_code == 0, res.output
    pngs = sorted(plots.glob("*.png"))
    assert len(pngs) == 2 and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs), pngs
