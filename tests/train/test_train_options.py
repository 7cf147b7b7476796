"""nmtkit-train's issue-8 options: --update-freq, --loss-norm, --eval-bleu with
--best-checkpoint-metric bleu, --keep-last, the paper presets' training defaults, and the
learning curve with BLEU."""
from __future__ import annotations

import re

import copy
import json
import math
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from rich.console import Console

from nmtkit.cli.train import command as train
from nmtkit.data.dataset import collate
from nmtkit.errors import NmtkitError
from nmtkit.checkpoint import load_checkpoint
from nmtkit.train.distributed import DistInfo
from nmtkit.train.loss import loss_from_features, sequence_loss
from nmtkit.train.options import resolve_train_options
from nmtkit.train.trainer import Trainer
from tests.helpers import params, run_train

torch.set_num_threads(1)


def train_exact(data: Path, save: Path, *extra: str):  # noqa: ANN201
    """``run_train`` in float32 without dropout on one thread: these tests check update arithmetic exactly
    (--amp auto trains in bf16 on a CPU with native bf16); each call sets its own --batch-size."""
    return run_train(data, save, "--threads", "1", "--dropout", "0", "--amp", "none", *extra)


def valid_records(save: Path) -> list[dict]:
    lines = (save / "train_log.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r.get("event") == "valid"]


# -- gradient accumulation and loss normalisation ------------------------------------------------
@pytest.mark.parametrize("arch", ["luong_tiny", "transformer_test"])
def test_update_freq_2_equals_the_double_batch(data_dir, tmp_path, arch):
    """6 training sentences: --batch-size 3 --update-freq 2 accumulates both batches of an
    epoch into one update, exactly what --batch-size 6 does in one batch (padding differs, which
    changes nothing), so after 2 epochs the parameters agree to float rounding; --update-freq 1
    (two updates per epoch) does not."""
    common = ["--max-epoch", "2", "--optimizer", "sgd", "--lr", "0.5", "--clip-norm", "0", "--no-epoch-checkpoints", "--arch", arch]
    assert train_exact(data_dir, tmp_path / "acc", "--batch-size", "3", "--update-freq", "2", *common).exit_code == 0
    assert train_exact(data_dir, tmp_path / "big", "--batch-size", "6", *common).exit_code == 0
    assert train_exact(data_dir, tmp_path / "small", "--batch-size", "3", *common).exit_code == 0
    acc, big, small = (params(tmp_path / n / "checkpoint_last.pt") for n in ("acc", "big", "small"))
    for k in big:
        torch.testing.assert_close(acc[k], big[k], atol=1e-6, rtol=1e-5, msg=lambda m: f"{k}: {m}")
    assert any(not torch.allclose(small[k], big[k], atol=1e-4) for k in big)
    state = load_checkpoint(tmp_path / "acc" / "checkpoint_last.pt")["train_state"]["state"]
    assert state["update"] == 2 and state["epoch"] == 3


def make_trainer(data_dir: Path, save: Path, **options) -> Trainer:
    given = {"arch": "luong_tiny", "save_dir": str(save), "batch_size": 6, "seed": 3, "optimizer": "sgd",
             "lr": 1.0, "clip_norm": 0.0, "no_progress": True, "amp": "none", **options}  # exact float32 arithmetic
    opt = resolve_train_options(str(data_dir), given)
    return Trainer(opt, {"dropout": 0.0, "embed_dim": 16, "hidden_size": 16}, Console(quiet=True), DistInfo())


def manual_gradient(trainer: Trainer, indices: list[int], per: str) -> tuple[dict[str, torch.Tensor], float]:
    """d/dθ of the summed NLL of ``indices`` divided by the number of sentences or of target
    tokens, on a copy of the trainer's model -> (gradients, their norm)."""
    model = copy.deepcopy(trainer.model).train()
    batch = collate([trainer.train_set[i] for i in indices], indices)
    logits, _ = model(batch.src_tokens, batch.src_lengths, batch.prev_output_tokens)
    loss, _ = sequence_loss(logits, batch.target)
    denominator = len(indices) if per == "sentence" else float(batch.ntokens)
    (loss / denominator).backward()
    g = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return g, float(torch.cat([v.flatten() for v in g.values()]).norm())


@pytest.mark.parametrize("loss_norm", ["sentence", "token"])
def test_loss_norm_update_is_the_gradient_of_the_normalised_sum(data_dir, tmp_path, loss_norm):
    """One SGD step (lr 1, no clipping): the parameters move by exactly minus the gradient of
    (per-sentence summed NLL) / sentences, or / target tokens for ``token``; the logged gnorm is
    that gradient's norm.  The trainer computes its loss in chunks from the model's features
    (output_layer_loss), the expected gradient from the whole logits (sequence_loss)."""
    trainer = make_trainer(data_dir, tmp_path / "s", loss_norm=loss_norm)
    assert loss_from_features(trainer.model, trainer.run.device)
    indices = list(range(len(trainer.train_set)))
    expected, norm = manual_gradient(trainer, indices, loss_norm)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    out = trainer.train_step([indices])
    assert out["sentences"] == len(indices)
    assert out["gnorm"] == pytest.approx(norm, rel=1e-4)
    for n, p in trainer.model.named_parameters():
        torch.testing.assert_close(before[n] - p.detach(), expected[n], atol=1e-6, rtol=1e-4, msg=lambda m: f"{n}: {m}")


def test_sentence_norm_gradient_is_tokens_per_sentence_times_token_norm(data_dir, tmp_path):
    """Same batch, same model: the sentence-normalised gradient is the token-normalised one times
    the mean target length (the audit's 0.16 vs 1.63 on the sample corpus)."""
    a = make_trainer(data_dir, tmp_path / "a", loss_norm="token")
    b = make_trainer(data_dir, tmp_path / "b", loss_norm="sentence")
    indices = list(range(len(a.train_set)))
    ntokens = float(collate([a.train_set[i] for i in indices], indices).ntokens)
    ga, gb = a.train_step([indices])["gnorm"], b.train_step([indices])["gnorm"]
    assert gb == pytest.approx(ga * ntokens / len(indices), rel=1e-4)
    assert ntokens / len(indices) > 4


def test_update_freq_accumulates_before_normalising(data_dir, tmp_path):
    """train_step over [[0, 1, 2], [3, 4, 5]] is one update with the gradient of all six
    sentences normalised once (by 6 sentences), not the mean of two normalised halves."""
    one = make_trainer(data_dir, tmp_path / "one", loss_norm="sentence")
    two = make_trainer(data_dir, tmp_path / "two", loss_norm="sentence", update_freq=2)
    one.train_step([[0, 1, 2, 3, 4, 5]])
    out = two.train_step([[0, 1, 2], [3, 4, 5]])
    assert out["sentences"] == 6
    for (n, p), q in zip(one.model.named_parameters(), two.model.parameters()):
        torch.testing.assert_close(q, p, atol=1e-6, rtol=1e-5, msg=lambda m: f"{n}: {m}")


# -- BLEU-based model selection ---------------------------------------------------------------------
@pytest.mark.slow
def test_eval_bleu_selects_the_best_bleu_epoch(data_dir, tmp_path):
    """BLEU is logged for every epoch, checkpoint_best.pt is the epoch with the highest valid BLEU
    (the first of ties), and the learning curve is a PNG.  With this seed and lr (on CPU, torch
    2.x) BLEU peaks at epoch 4 while the loss is lowest at epoch 3 and the run ends at epoch 5, so
    neither keeping the last nor the loss-best checkpoint would pass."""
    save = tmp_path / "bleu"
    res = train_exact(data_dir, save, "--batch-size", "2", "--max-epoch", "5", "--lr", "0.1", "--eval-bleu",
                    "--eval-bleu-beam", "2", "--best-checkpoint-metric", "bleu")
    assert res.exit_code == 0, res.output
    records = valid_records(save)
    assert [r["epoch"] for r in records] == [1, 2, 3, 4, 5]
    bleus = [r["valid_bleu"] for r in records]
    assert all(isinstance(b, (int, float)) and 0 <= b <= 100 for b in bleus)
    assert all(r["valid_bleu_sentences"] == 6 for r in records)
    assert "BLEU" in res.output
    best_epoch = records[bleus.index(max(bleus))]["epoch"]
    best = params(save / "checkpoint_best.pt")
    for k, v in params(save / f"checkpoint{best_epoch}.pt").items():
        assert torch.equal(best[k], v), k
    losses = [r["valid_loss"] for r in records]
    loss_epoch = records[losses.index(min(losses))]["epoch"]
    if loss_epoch != best_epoch:  # the case this run is chosen for: BLEU, not loss, decided
        loss_best = params(save / f"checkpoint{loss_epoch}.pt")
        assert any(not torch.equal(best[k], loss_best[k]) for k in best)
    state = load_checkpoint(save / "checkpoint_last.pt")["train_state"]["state"]
    assert state["best_valid_bleu"] == max(bleus)
    png = (save / "learning_curve.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


def test_learning_curve_with_bleu_differs_from_without(tmp_path):
    from nmtkit.evaluate.plots import plot_learning_curve

    without = plot_learning_curve(tmp_path / "a.png", [50.0, 20.0, 12.0], epochs=[1, 2, 3])
    with_bleu = plot_learning_curve(tmp_path / "b.png", [50.0, 20.0, 12.0], epochs=[1, 2, 3], valid_bleu=[1.0, None, 9.5])
    a, b = (tmp_path / "a.png").read_bytes(), (tmp_path / "b.png").read_bytes()
    assert a.startswith(b"\x89PNG") and b.startswith(b"\x89PNG") and a != b
    assert len(without.axes) == 1
    ppl_axis, bleu_axis = with_bleu.axes  # BLEU on a second y axis
    assert bleu_axis.get_ylabel() == "BLEU"
    (bleu,) = bleu_axis.get_lines()
    ys = bleu.get_ydata()
    assert ys[0] == 1.0 and math.isnan(ys[1]) and ys[2] == 9.5  # None: no BLEU that epoch
    assert [t.get_text() for t in ppl_axis.get_legend().get_texts()] == ["validation", "validation BLEU"]


def test_bleu_metric_without_eval_bleu_is_a_one_line_error(data_dir, tmp_path):
    res = train_exact(data_dir, tmp_path / "x", "--batch-size", "2", "--best-checkpoint-metric", "bleu")
    assert res.exit_code == 1
    assert res.output.startswith("nmtkit-train: error:") and "--eval-bleu" in res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "x" / "checkpoint_last.pt").exists()


def test_keep_last_leaves_the_two_newest_epoch_checkpoints(data_dir, tmp_path):
    save = tmp_path / "k"
    res = train_exact(data_dir, save, "--batch-size", "6", "--max-epoch", "4", "--keep-last", "2")
    assert res.exit_code == 0, res.output
    numbered = sorted(p.name for p in save.glob("checkpoint*.pt") if p.stem[len("checkpoint"):].isdigit())
    assert numbered == ["checkpoint3.pt", "checkpoint4.pt"]
    assert (save / "checkpoint_last.pt").exists() and (save / "checkpoint_best.pt").exists()
    # the newest epoch checkpoint is the last state
    last, four = params(save / "checkpoint_last.pt"), params(save / "checkpoint4.pt")
    assert all(torch.equal(last[k], four[k]) for k in last)


# -- preset training defaults -------------------------------------------------------------------
def test_bahdanau_presets_bring_their_training_defaults(tmp_path):
    opt = resolve_train_options(str(tmp_path), {"arch": "rnnsearch_50"})
    assert (opt.optimizer, opt.clip_norm, opt.loss_norm) == ("adadelta", 1.0, "sentence")
    opt = resolve_train_options(str(tmp_path), {"arch": "rnnsearch_50", "clip_norm": 5.0, "loss_norm": "token",
                                                "optimizer": "adam"})
    assert (opt.optimizer, opt.clip_norm, opt.loss_norm) == ("adam", 5.0, "token")
    opt = resolve_train_options(str(tmp_path), {"arch": "luong_t1_base"})
    assert (opt.optimizer, opt.lr, opt.lr_schedule, opt.clip_norm, opt.loss_norm) == ("sgd", 1.0, "halving", 5.0, "sentence")
    # presets without training defaults keep TrainOptions' defaults
    plain = resolve_train_options(str(tmp_path), {"arch": "luong_tiny"})
    assert plain.loss_norm == "token" and plain.optimizer == "adam"
    with pytest.raises(NmtkitError, match="--eval-bleu"):
        resolve_train_options(str(tmp_path), {"arch": "luong_tiny", "best_checkpoint_metric": "bleu"})


def test_a_run_length_in_updates_or_hours_lifts_the_default_epoch_limit(tmp_path):
    # --max-update 8000 alone stopped at the default 10 epochs (about 600 Transformer updates on Multi30k)
    def max_epoch(**given) -> int:
        return resolve_train_options(str(tmp_path), {"arch": "transformer_tiny", **given}).max_epoch

    assert max_epoch() == 10
    assert max_epoch(max_update=8000) == 0 and max_epoch(stop_time_hours=2.0) == 0
    assert max_epoch(max_update=8000, max_epoch=3) == 3 and max_epoch(max_epoch=0) == 0
    assert max_epoch(max_update=0, stop_time_hours=0.0, max_epoch=None) == 10
    option = next(p for p in train.params if p.name == "max_epoch")
    assert option.default is None and "no limit with --max-update or --stop-time-hours" in option.help


def test_preset_training_defaults_reach_the_checkpoint_unless_overridden(data_dir, tmp_path):
    small = ["--embed-dim", "8", "--hidden-size", "8", "--attention-dim", "8", "--maxout-size", "4",
             "--batch-size", "6", "--max-update", "1", "--max-epoch", "0"]
    res = train_exact(data_dir, tmp_path / "p", "--arch", "rnnsearch_50", *small)
    assert res.exit_code == 0, res.output
    ckpt = load_checkpoint(tmp_path / "p" / "checkpoint_last.pt")
    o = ckpt["train_options"]
    assert (o["optimizer"], o["clip_norm"], o["loss_norm"]) == ("adadelta", 1.0, "sentence")
    assert ckpt["model_config"]["init"] == "bahdanau"
    res = train_exact(data_dir, tmp_path / "q", "--arch", "rnnsearch_50", *small, "--clip-norm", "5", "--loss-norm", "token")
    assert res.exit_code == 0, res.output
    o = load_checkpoint(tmp_path / "q" / "checkpoint_last.pt")["train_options"]
    assert (o["optimizer"], o["clip_norm"], o["loss_norm"]) == ("adadelta", 5.0, "token")


# -- new model options survive training and a resume -----------------------------------------------
def test_new_model_options_survive_training_and_resume(data_dir, tmp_path):
    save = tmp_path / "r"
    opts = ["--batch-size", "2", "--encoder-bidirectional", "--share-decoder-input-output-embed", "--embed-dim", "96",
            "--dropout-embed", "0.2", "--dropout-output", "0.3", "--update-freq", "2", "--loss-norm", "sentence"]
    res = train_exact(data_dir, save, *opts, "--max-epoch", "2", "--max-update", "1")
    assert res.exit_code == 0, res.output
    res = train_exact(data_dir, save, *opts, "--max-epoch", "2")
    assert res.exit_code == 0, res.output
    assert "resuming from" in res.output
    ckpt = load_checkpoint(save / "checkpoint_last.pt")
    cfg = ckpt["model_config"]
    assert cfg["encoder_bidirectional"] and cfg["share_decoder_input_output_embed"]
    assert (cfg["dropout_embed"], cfg["dropout_output"], cfg["dropout_hidden"]) == (0.2, 0.3, -1.0)
    assert ckpt["train_options"]["update_freq"] == 2 and ckpt["train_options"]["loss_norm"] == "sentence"
    # 3 batches of 2 per epoch, 2 per update: updates of 2 + 1 batches, 2 epochs -> 4 updates
    assert ckpt["train_state"]["state"]["update"] == 4
    # a resume with the model option changed is refused
    res = train_exact(data_dir, save, *[o for o in opts if o != "--encoder-bidirectional"], "--max-epoch", "3")
    assert res.exit_code == 1 and "encoder_bidirectional" in res.output


# -- review fixes: preset lr with another optimizer, resume after early stopping, metric change ---------
def test_a_preset_lr_is_not_given_to_an_optimizer_the_user_chose(data_dir):
    # luong_t1_base brings SGD with lr 1.0 and halving; with --optimizer adam that lr would diverge
    opt = resolve_train_options(str(data_dir), {"arch": "luong_t1_base", "optimizer": "adam"})
    assert (opt.optimizer, opt.lr, opt.lr_schedule) == ("adam", None, "fixed")
    assert opt.loss_norm == "sentence" and opt.clip_norm == 5.0  # not tied to the optimiser: kept
    same = resolve_train_options(str(data_dir), {"arch": "luong_t1_base", "optimizer": "sgd"})
    assert (same.lr, same.lr_schedule) == (1.0, "halving")


def test_rerunning_after_early_stopping_does_not_train_again(data_dir, tmp_path):
    save = tmp_path / "es"
    first = train_exact(data_dir, save, "--batch-size", "3", "--lr", "1e-30", "--patience", "1", "--max-epoch", "6")
    assert first.exit_code == 0, first.output
    assert "early stopping" in first.output
    before = (save / "checkpoint_last.pt").read_bytes()
    again = train_exact(data_dir, save, "--batch-size", "3", "--lr", "1e-30", "--patience", "1", "--max-epoch", "6")
    assert again.exit_code == 0, again.output
    assert "already stopped early" in again.output
    assert (save / "checkpoint_last.pt").read_bytes() == before


def test_changing_the_best_checkpoint_metric_on_resume_restarts_its_counts(data_dir, tmp_path):
    save = tmp_path / "m"
    assert train_exact(data_dir, save, "--batch-size", "3", "--max-epoch", "2").exit_code == 0
    res = train_exact(data_dir, save, "--batch-size", "3", "--max-epoch", "3", "--eval-bleu", "--eval-bleu-beam", "1",
                    "--best-checkpoint-metric", "bleu")
    assert res.exit_code == 0, res.output
    assert "start counting afresh in bleu" in res.output


def test_an_unknown_device_is_a_one_line_error(data_dir, tmp_path):
    res = train_exact(data_dir, tmp_path / "d", "--batch-size", "3", "--device", "gpu")
    assert res.exit_code == 1
    assert "--device 'gpu': expected auto, cpu or cuda[:N]" in res.output
    assert "Traceback" not in res.output


# -- model flags derived from the Config dataclasses -------------------------------------------------
def test_every_config_field_of_every_model_is_a_flag_in_the_help():
    import dataclasses

    from nmtkit.models import get_model_class, list_models

    from nmtkit.models.registry import field_metadata

    text = CliRunner().invoke(train, ["--help"], terminal_width=200).output
    for model in list_models():
        config = get_model_class(model).Config
        for field in dataclasses.fields(config):
            if not field_metadata(config, field.name).get("flag", True):
                continue  # declared --model-opt only
            flag = "--" + field.name.replace("_", "-")
            assert f"{flag} " in text or f"{flag}\n" in text, f"{model}.{field.name}: no {flag} in nmtkit-train --help"


def test_todays_model_flags_keep_working():
    """The names nmtkit-train had before its flags were derived; bools also take --no-X."""
    args = ["data", "--arch", "luong_tiny", "--hidden-size", "8", "--no-input-feeding", "--attention", "local-p", "--score", "dot",
            "--encoder-bidirectional", "--share-decoder-input-output-embed", "--init", "bahdanau", "--cell", "gru",
            "--dropout-embed", "0.1", "--alignment-head", "--model-opt", "window=4"]
    ctx = train.make_context("train", args)
    p = ctx.params
    assert (p["hidden_size"], p["input_feeding"], p["attention"], p["score"]) == (8, False, "local-p", "dot")
    assert p["encoder_bidirectional"] is True and p["share_decoder_input_output_embed"] is True
    assert (p["init"], p["cell"], p["dropout_embed"], p["alignment_head"]) == ("bahdanau", "gru", 0.1, True)
    assert p["model_opt"] == ("window=4",) and p["layers"] is None and p["source_reversal"] is None  # unset: preset


def test_choices_in_the_help_come_from_the_model_modules():
    from nmtkit.models.attention import ATTENTION_TYPES, SCORE_FUNCTIONS
    from nmtkit.models.common import INIT_SCHEMES
    from nmtkit.models.rnnencdec import CELLS

    text = CliRunner().invoke(train, ["--help"], terminal_width=200).output
    for flag, choices in [("--attention", ATTENTION_TYPES), ("--score", SCORE_FUNCTIONS), ("--init", INIT_SCHEMES),
                          ("--cell", CELLS)]:
        assert re.search(rf"{flag}\s+\[?{re.escape('|'.join(choices))}\b", text), flag  # rich-click: in a column


def test_a_model_with_its_own_forward_trains_and_validates_from_its_logits(data_dir, tmp_path):
    """A model that overrides ``forward`` with the signature before ``features_only`` (its logits
    need not be ``output_projection(features)``) is trained and validated from the logits it
    returns: the trainer never passes it ``features_only``."""
    from nmtkit.train.validation import valid_loss

    trainer = make_trainer(data_dir, tmp_path / "own")
    base = type(trainer.model)

    class OwnForward(base):  # type: ignore[misc, valid-type]
        def forward(self, src_tokens, src_lengths, prev_output_tokens, need_attention=True):  # noqa: ANN001, ANN201
            logits, attn = base.forward(self, src_tokens, src_lengths, prev_output_tokens, need_attention)
            return logits * 0.5, attn  # its own logits: a loss from the features would differ

    plain = valid_loss(trainer.model, trainer.run.valid_set, None, 6, torch.device("cpu"), None)["valid_loss"]
    trainer.model.__class__ = OwnForward
    assert not loss_from_features(trainer.model, trainer.run.device)
    own = valid_loss(trainer.model, trainer.run.valid_set, None, 6, torch.device("cpu"), None)["valid_loss"]
    assert math.isfinite(own) and own != pytest.approx(plain)
    out = trainer.train_step([list(range(len(trainer.train_set)))])
    assert math.isfinite(out["nll"]) and math.isfinite(out["gnorm"])


def test_a_search_step_reads_the_weights_of_the_moment(data_dir, tmp_path):
    """A search's output layer (packed on the MKL path, once per search) serves the weights of
    its moment: after the trainer's fused Adam updates (which bump no version counter), inside
    and after an EMA swap; outside a search the layer itself computes."""
    from nmtkit.models import gemm
    from nmtkit.train.ema import WeightAverage

    trainer = make_trainer(data_dir, tmp_path / "packed", optimizer="adam", lr=0.01)
    model, layer = trainer.model, trainer.model.output_projection
    x = torch.randn(5, layer.in_features)

    def check() -> None:
        with torch.no_grad():
            want = torch.nn.functional.linear(x, layer.weight, layer.bias)
            for _ in range(2):  # a search's steps: the second reads what the first prepared
                with model.searching():
                    torch.testing.assert_close(model.project_output(x), want, atol=1e-5, rtol=1e-5)
                    torch.testing.assert_close(model.project_output(x), want, atol=1e-5, rtol=1e-5)
                    if not gemm.ENABLED:  # the MKL path: the packed product is what ran
                        assert model._packed_output is not None and model._packed_output._packed is not None
            assert model._packed_output is None
            torch.testing.assert_close(model.project_output(x), want, atol=1e-5, rtol=1e-5)

    ema = WeightAverage(model, 0.5)
    for _ in range(2):
        check()
        trainer.train_step([list(range(len(trainer.train_set)))])
        ema.update(model)
    check()
    with ema.swapped_in(model):
        check()
    check()
