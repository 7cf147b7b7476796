"""``--amp bf16`` on a CPU with native bf16: training, translation, scoring and alignment run under
autocast, stay close to float32, and write float32 checkpoints in the same format.

Tolerances: bf16 keeps 8 bits of mantissa (relative error ~0.4% per product); over 30 updates of the
tiny models the logged training losses agreed with float32 to within 0.1% on this corpus, so 2% leaves
room for other CPUs without letting a wrong computation (a loss off by a factor) through.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from nmtkit.utils.amp import cpu_has_native_bf16

pytestmark = pytest.mark.skipif(not cpu_has_native_bf16(), reason="this CPU has no native bf16")


def _train(data_dir: Path, save: Path, arch: str, amp: str) -> list[dict]:
    from nmtkit.cli.train import command as train

    res = CliRunner().invoke(train, [str(data_dir), "--arch", arch, "--save-dir", str(save), "--batch-size", "2",
                                     "--lr", "0.0005", "--max-update", "30", "--max-epoch", "0", "--log-interval", "10",
                                     "--seed", "1", "--threads", "1", "--device", "cpu", "--no-progress", "--amp", amp])
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in (save / "train_log.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["luong_tiny", "rnnsearch_tiny", "rnnencdec_tiny"])
def test_bf16_training_tracks_float32_and_saves_float32(data_dir: Path, tmp_path: Path, arch: str) -> None:
    logs = {amp: _train(data_dir, tmp_path / amp, arch, amp) for amp in ("none", "bf16")}
    losses = {amp: [r["loss"] for r in log if r["event"] == "train"] for amp, log in logs.items()}
    assert len(losses["none"]) == len(losses["bf16"]) == 3
    for a, b in zip(losses["none"], losses["bf16"]):
        assert math.isfinite(b) and abs(a - b) <= 0.02 * abs(a), (losses, arch)
    assert losses["bf16"] != losses["none"]  # autocast really ran (bf16 changes the numbers)
    ck32 = torch.load(tmp_path / "none" / "checkpoint_last.pt", weights_only=True)
    ck16 = torch.load(tmp_path / "bf16" / "checkpoint_last.pt", weights_only=True)
    assert set(ck16) == set(ck32) and set(ck16["model"]) == set(ck32["model"])
    assert all(v.dtype == ck32["model"][k].dtype for k, v in ck16["model"].items())
    assert {v.dtype for v in ck16["model"].values() if v.is_floating_point()} == {torch.float32}


def test_bf16_translation_keeps_every_line(random_ckpt: Path, tmp_path: Path) -> None:
    from nmtkit.cli.translate import command as translate

    lines = ["the cat sits .", "", "a dog sees the man .", "Anna sleeps ."] * 3
    outs = {}
    for amp in ("none", "bf16"):
        res = CliRunner().invoke(translate, ["--path", str(random_ckpt), "--device", "cpu", "--amp", amp, "--beam", "3",
                                             "--quiet"], input="\n".join(lines) + "\n")
        assert res.exit_code == 0, res.output
        outs[amp] = res.stdout.splitlines()
    assert len(outs["bf16"]) == len(outs["none"]) == len(lines)
    assert outs["bf16"][1] == "" and outs["bf16"][0] == outs["bf16"][4]  # same input, same output, in order


def test_bf16_with_int8_is_refused(random_ckpt: Path) -> None:
    from nmtkit.cli.translate import command as translate

    res = CliRunner().invoke(translate, ["--path", str(random_ckpt), "--device", "cpu", "--amp", "bf16",
                                         "--quantize", "int8"], input="the cat .\n")
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == ["nmtkit-translate: error: --quantize int8 runs its own int8 arithmetic: "
                                               "not with --amp bf16 (use --amp none)"]


def test_bf16_model_scoring_is_close_to_float32(random_ckpt: Path, tiny_parallel: Path) -> None:
    from nmtkit.generate.scorer import score_model

    ppl = {amp: score_model(str(random_ckpt), source=str(tiny_parallel / "test.en"), target=str(tiny_parallel / "test.de"),
                            device="cpu", amp=amp).perplexity for amp in ("none", "bf16")}
    assert ppl["none"] != ppl["bf16"] and abs(ppl["bf16"] - ppl["none"]) <= 0.02 * ppl["none"], ppl


def test_bf16_alignment_runs_under_autocast(random_ckpt: Path, tiny_parallel: Path, monkeypatch) -> None:
    from nmtkit import Aligner

    seen = []
    real = torch.autocast

    def spy(*args, **kwargs):
        seen.append(kwargs.get("dtype"))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "autocast", spy)
    aligner = Aligner.from_checkpoint(random_ckpt, device="cpu", amp="bf16")
    src = (tiny_parallel / "test.en").read_text(encoding="utf-8").splitlines()
    tgt = (tiny_parallel / "test.de").read_text(encoding="utf-8").splitlines()
    pairs = aligner.align(src, tgt)
    assert len(pairs) == len(src) and seen == [torch.bfloat16]


def test_cli_bf16_refusal_without_native_bf16_is_one_line(random_ckpt: Path, monkeypatch) -> None:
    from nmtkit.cli.translate import command as translate
    from nmtkit.utils import amp as amp_mod

    monkeypatch.setattr(amp_mod, "cpu_has_native_bf16", lambda: False)
    res = CliRunner().invoke(translate, ["--path", str(random_ckpt), "--device", "cpu", "--amp", "bf16"], input="a\n")
    assert res.exit_code == 1 and len(res.output.strip().splitlines()) == 1
    assert "needs native bf16 arithmetic" in res.output
