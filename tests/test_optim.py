"""Learning-rate schedules of the papers, early stopping, and --list-archs."""
from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

from nmtkit.cli.train import command as train
from nmtkit.errors import NmtkitError
from nmtkit.train.optim import LRSchedule, build_optimizer


def lrs(schedule: LRSchedule, losses: list[float | None], lr: float = 1.0) -> list[float]:
    opt = build_optimizer("sgd", [torch.nn.Parameter(torch.zeros(1))], lr)
    return [schedule.end_of_epoch(opt, epoch, loss) for epoch, loss in enumerate(losses, start=1)]


def test_luong_halving_after_epoch_k():
    # Luong et al.: lr 1.0, halved after every epoch once epoch K (here 5) is done
    assert lrs(LRSchedule("halving", halve_after=5), [None] * 8) == [1.0, 1.0, 1.0, 1.0, 0.5, 0.25, 0.125, 0.0625]


def test_plateau_shrinks_only_when_validation_stalls():
    got = lrs(LRSchedule("plateau", shrink=0.5, plateau_patience=1), [5.0, 4.0, 4.5, 4.6, 3.0, 3.5, 3.5])
    assert got == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25]


def test_optimizer_defaults_follow_the_papers():
    p = [torch.nn.Parameter(torch.zeros(1))]
    ada = build_optimizer("adadelta", p, None)
    assert ada.defaults["rho"] == 0.95 and ada.defaults["eps"] == 1e-6 and ada.defaults["lr"] == 1.0
    assert build_optimizer("sgd", p, None).defaults["lr"] == 1.0
    with pytest.raises(NmtkitError):
        LRSchedule("cosine")


def test_early_stopping(tiny_parallel, tmp_path):
    from nmtkit.cli.preprocess import command as preprocess

    CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(tiny_parallel / "train"),
                                    "--validpref", str(tiny_parallel / "valid"), "--destdir", str(tmp_path / "bin")])
    # an lr of 1e-30 (--lr must be > 0) leaves float32 weights unchanged, so the validation loss never
    # improves after the first epoch: patience 2 stops after epoch 3
    res = CliRunner().invoke(train, [str(tmp_path / "bin"), "--arch", "rnnencdec_tiny", "--save-dir", str(tmp_path / "c"),
                                     "--batch-size", "3", "--optimizer", "sgd", "--lr", "1e-30", "--patience", "2",
                                     "--max-epoch", "20", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "early stopping" in res.output
    events = [json.loads(l) for l in (tmp_path / "c" / "train_log.jsonl").read_text().splitlines()]
    assert [e["epoch"] for e in events if e["event"] == "valid"] == [1, 2, 3]


def test_list_archs_prints_one_line_per_preset():
    from nmtkit.models import registry

    res = CliRunner().invoke(train, ["--list-archs"])
    assert res.exit_code == 0
    lines = res.output.splitlines()
    archs = registry.list_archs()
    assert [line.split()[0] for line in lines] == list(archs)  # every preset once, in order, one line each
    for line in lines:
        name, model = line.split()[:2]
        assert model == archs[name][0] and len(line) <= 160
    assert "Luong et al. 2015 Table 4" in next(l for l in lines if l.startswith("luong_t4_global_dot "))


def test_list_archs_name_prints_every_setting():
    from nmtkit.models import registry

    res = CliRunner().invoke(train, ["--list-archs", "luong_wmt_en_de"])
    assert res.exit_code == 0
    model, opts = registry.list_archs()["luong_wmt_en_de"]
    assert res.output.splitlines()[0] == f"luong_wmt_en_de  (model {model})"
    for key, value in opts.items():
        assert f"  {key} = {value}" in res.output.splitlines()
    assert "  hidden_size = 1000" in res.output and "  training: --" in res.output


def test_list_archs_unknown_name_is_one_line_with_suggestions():
    res = CliRunner().invoke(train, ["--list-archs", "luong_smal"])
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("nmtkit-train: error: --list-archs: no preset named 'luong_smal' (did you mean luong_small")
