"""GPU code paths: the same results on CUDA as on the CPU, mixed precision that trains, and
the CLI choosing the GPU by itself.  Skipped where no CUDA device is present (CI); run them on
a GPU machine with ``python -m pytest tests/project/test_gpu.py``."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from tests.helpers import make_checkpoint, search_options

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

ARCHS = [
    ("luong_tiny", {}),
    ("luong_tiny", {"attention": "local-p", "encoder_bidirectional": True}),
    ("rnnsearch_tiny", {}),
    ("rnnencdec_tiny", {}),
]


def _batch(vocab: int, bsz: int = 6, src_len: int = 9, tgt_len: int = 7, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab, (bsz, src_len), generator=g)
    lengths = torch.randint(3, src_len + 1, (bsz,), generator=g)
    lengths[0] = src_len
    for b in range(bsz):
        src[b, lengths[b] - 1] = 2  # </s>
        src[b, lengths[b]:] = 0  # <pad>
    prev = torch.randint(4, vocab, (bsz, tgt_len), generator=g)
    prev[:, 0] = 1  # <s>
    return src, lengths, prev


@pytest.mark.parametrize("arch,overrides", ARCHS)
def test_forward_and_gradients_match_the_cpu(tmp_path: Path, arch: str, overrides: dict) -> None:
    from nmtkit.checkpoint import load_model

    # dropout 0 so that training mode (which cuDNN's RNN backward needs) is deterministic
    path = make_checkpoint(tmp_path / "m.pt", arch=arch, dropout=0.0, **overrides)
    cpu_model, _ = load_model(path)
    gpu_model, _ = load_model(path, torch.device("cuda"))
    src, lengths, prev = _batch(len(cpu_model.tgt_dict))
    outs = []
    for model, dev in ((cpu_model, "cpu"), (gpu_model, "cuda")):
        model.train(True)
        logits, _ = model(src.to(dev), lengths.to(dev), prev.to(dev))
        logits.float().logsumexp(-1).sum().backward()
        grads = {k: p.grad.detach().cpu() for k, p in model.named_parameters() if p.grad is not None}
        outs.append((logits.detach().cpu(), grads))
    (lc, gc), (lg, gg) = outs
    torch.testing.assert_close(lg, lc, atol=1e-4, rtol=1e-4)
    assert gc.keys() == gg.keys()
    for k in gc:
        torch.testing.assert_close(gg[k], gc[k], atol=1e-4, rtol=1e-3, msg=k)


def test_beam_search_on_the_gpu_equals_the_cpu(tmp_path: Path) -> None:
    from nmtkit.generate.search import beam_search
    from nmtkit.generate.ensemble import EnsembleModel
    from nmtkit.checkpoint import load_model

    path = make_checkpoint(tmp_path / "m.pt", arch="rnnsearch_tiny")
    src, lengths, _ = _batch(20)
    results = []
    for dev in ("cpu", "cuda"):
        model, _ = load_model(path, torch.device(dev))
        with torch.inference_mode():
            hyps = beam_search(EnsembleModel([model]), src.to(dev), lengths.to(dev), search_options(beam=4, nbest=2, max_len_b=12))
        results.append([[h.tokens for h in nbest] for nbest in hyps])
    assert results[0] == results[1]


def test_train_on_gpu_with_bf16_autocast_lowers_the_loss(tmp_path: Path, tiny_parallel: Path) -> None:
    import json

    from nmtkit.cli.preprocess import command as preprocess
    from nmtkit.cli.train import command as train

    dest = tmp_path / "bin"
    r = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(tiny_parallel / "train"),
                                        "--validpref", str(tiny_parallel / "valid"), "--destdir", str(dest)])
    assert r.exit_code == 0, r.output
    save = tmp_path / "ck"
    r = CliRunner().invoke(train, [str(dest), "--arch", "luong_tiny", "--save-dir", str(save), "--batch-size", "3",
                                   "--max-epoch", "15", "--amp", "bf16", "--no-progress", "--lr", "0.01"])
    assert r.exit_code == 0, r.output
    assert "on cuda" in r.output
    valid = [json.loads(l) for l in (save / "train_log.jsonl").read_text().splitlines() if '"valid"' in l]
    assert valid[-1]["valid_loss"] < valid[0]["valid_loss"] - 0.5


def test_translate_cli_uses_the_gpu_and_matches_the_cpu(tmp_path: Path) -> None:
    from nmtkit.cli.translate import command as translate

    path = make_checkpoint(tmp_path / "m.pt", arch="luong_tiny")
    text = "the cat sits .\nthe dog sees a cat .\n"
    outs = []
    for device in ("cpu", "cuda"):
        r = CliRunner().invoke(translate, ["--path", str(path), "--device", device, "--amp", "none", "--beam", "3"], input=text)
        assert r.exit_code == 0, r.output
        outs.append(r.stdout if hasattr(r, "stdout") else r.output)
    assert outs[0] == outs[1]
