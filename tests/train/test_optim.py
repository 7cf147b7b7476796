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


def test_anneal_holds_then_falls_linearly_to_min_lr():
    sched = LRSchedule("anneal", anneal_fraction=0.25, min_lr=0.1, base_lr=2.0)
    opt = build_optimizer("adam", [torch.nn.Parameter(torch.zeros(1))], 2.0)
    got = []
    for progress in (0.0, 0.5, 0.75, 0.875, 1.0, 1.5):
        sched.before_update(opt, progress)
        got.append(opt.param_groups[0]["lr"])
    assert got == pytest.approx([2.0, 2.0, 2.0, 1.05, 0.1, 0.1])
    assert sched.end_of_epoch(opt, 1, 5.0) == pytest.approx(0.1)  # epochs leave it alone
    for bad in (0.0, 1.5):
        with pytest.raises(NmtkitError, match="--anneal-fraction"):
            LRSchedule("anneal", anneal_fraction=bad)


def test_anneal_follows_the_update_budget_in_a_real_run(data_dir, tmp_path):
    res = CliRunner().invoke(train, [str(data_dir), "--arch", "rnnencdec_tiny", "--save-dir", str(tmp_path / "c"),
                                     "--batch-size", "3", "--lr", "0.01", "--lr-schedule", "anneal", "--anneal-fraction", "0.5",
                                     "--max-update", "8", "--max-epoch", "0", "--log-interval", "1", "--no-progress"])
    assert res.exit_code == 0, res.output
    events = [json.loads(l) for l in (tmp_path / "c" / "train_log.jsonl").read_text().splitlines()]
    got = [e["lr"] for e in events if e["event"] == "train"]
    # update u (1-based) runs at the share (u-1)/8 of the budget: held for the first half, then linear to 0
    assert got == pytest.approx([0.01, 0.01, 0.01, 0.01, 0.01, 0.0075, 0.005, 0.0025])


def test_anneal_without_a_budget_is_a_one_line_error(data_dir, tmp_path):
    res = CliRunner().invoke(train, [str(data_dir), "--arch", "rnnencdec_tiny", "--save-dir", str(tmp_path / "c"),
                                     "--lr-schedule", "anneal", "--max-epoch", "0", "--no-progress"])
    assert res.exit_code != 0 and "give --max-epoch, --max-update or --stop-time-hours" in res.output


@pytest.mark.parametrize("extra", [["--min-lr", "0.01"], ["--min-lr", "0.5"], ["--anneal-fraction", "0"]])
def test_anneal_with_min_lr_not_below_lr_is_a_one_line_error(data_dir, tmp_path, extra):
    res = CliRunner().invoke(train, [str(data_dir), "--arch", "rnnencdec_tiny", "--save-dir", str(tmp_path / "c"),
                                     "--lr", "0.01", "--lr-schedule", "anneal", *extra, "--no-progress"])
    assert res.exit_code != 0
    assert ("give a --min-lr below --lr" if extra[0] == "--min-lr" else "--anneal-fraction") in res.output


def test_optimizer_defaults_follow_the_papers():
    p = [torch.nn.Parameter(torch.zeros(1))]
    ada = build_optimizer("adadelta", p, None)
    assert ada.defaults["rho"] == 0.95 and ada.defaults["eps"] == 1e-6 and ada.defaults["lr"] == 1.0
    assert build_optimizer("sgd", p, None).defaults["lr"] == 1.0
    with pytest.raises(NmtkitError):
        LRSchedule("cosine")


def test_inverse_sqrt_rises_linearly_then_falls_as_the_papers_formula():
    """Vaswani et al. (5.3): lr = d^-0.5 min(step^-0.5, step warmup^-1.5), here scaled so that its
    peak, at step = warmup, is --lr (fairseq's form); the update count is the one already done."""
    base, warmup = 1e-3, 4
    schedule = LRSchedule("inverse_sqrt", base_lr=base, warmup_updates=warmup)
    opt = build_optimizer("adam", [torch.nn.Parameter(torch.zeros(1))], base)
    got = []
    for update in range(12):
        schedule.before_update(opt, 0.0, update)
        got.append(opt.param_groups[0]["lr"])
    d = 512
    paper = [d ** -0.5 * min(step ** -0.5, step * warmup ** -1.5) for step in range(1, 13)]
    assert got == pytest.approx([base * x / max(paper) for x in paper], rel=1e-12)
    assert got[:4] == pytest.approx([0.25e-3, 0.5e-3, 0.75e-3, 1e-3]) and max(got) == got[warmup - 1]


@pytest.mark.parametrize("arch, lr, warmup", [("transformer_base", 7e-4, 4000), ("transformer_tiny", 0.005, 2000)])
def test_transformer_presets_train_with_adam_098_and_the_inverse_sqrt_warm_up(arch, lr, warmup):
    from nmtkit.train.options import resolve_train_options

    opt = resolve_train_options("data", {"arch": arch})
    assert (opt.optimizer, tuple(opt.adam_betas), opt.lr_schedule) == ("adam", (0.9, 0.98), "inverse_sqrt")
    assert (opt.lr, opt.warmup_updates) == (lr, warmup)
    adam = build_optimizer(opt.optimizer, [torch.nn.Parameter(torch.zeros(1))], opt.lr, opt.adam_betas)
    assert adam.defaults["betas"] == (0.9, 0.98)
    own = resolve_train_options("data", {"arch": arch, "adam_betas": (0.9, 0.999), "warmup_updates": 10})
    assert tuple(own.adam_betas) == (0.9, 0.999) and own.warmup_updates == 10  # the command line wins


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


def test_adam_is_torch_adam_fused_with_the_same_updates():
    gen = torch.Generator().manual_seed(0)
    start = [torch.randn(5, 3, generator=gen), torch.randn(3, generator=gen)]
    grads = [[torch.randn(t.shape, generator=gen) for t in start] for _ in range(4)]
    results = []
    for make in (lambda ps: build_optimizer("adam", ps, 2e-3), lambda ps: torch.optim.Adam(ps, lr=2e-3, fused=False)):
        params = [torch.nn.Parameter(t.clone()) for t in start]
        opt = make(params)
        for step in grads:
            for p, g in zip(params, step):
                p.grad = g.clone()
            opt.step()
        results.append([p.detach() for p in params])
    assert build_optimizer("adam", [torch.nn.Parameter(torch.zeros(1))], None).param_groups[0]["fused"]
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("max_norm", [0.5, 1e9, float("inf")])
def test_normalize_and_clip_is_divide_then_clip_grad_norm(max_norm):
    from nmtkit.train.optim import normalize_and_clip

    gen = torch.Generator().manual_seed(1)
    grads = [torch.randn(4, 3, generator=gen) * 3, torch.randn(7, generator=gen), None]
    ours = [torch.nn.Parameter(torch.zeros(g.shape if g is not None else (2,))) for g in grads]
    ref = [torch.nn.Parameter(torch.zeros(p.shape)) for p in ours]
    for a, b, g in zip(ours, ref, grads):
        a.grad, b.grad = (None, None) if g is None else (g.clone(), g.clone())
    norm = normalize_and_clip(ours, 6.0, max_norm)
    for b in ref:
        if b.grad is not None:
            b.grad.div_(6.0)
    want = float(torch.nn.utils.clip_grad_norm_(ref, max_norm))
    assert norm == pytest.approx(want, rel=1e-6)
    for a, b in zip(ours, ref):
        assert (a.grad is None) == (b.grad is None)
        if a.grad is not None:
            torch.testing.assert_close(a.grad, b.grad, atol=1e-7, rtol=1e-6)
