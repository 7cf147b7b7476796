"""Validation during training: the loss on the valid split and which checkpoint is the best.

Why apart from the loop: both are pure functions of the model or the run's state, and the
best-checkpoint rule (a NaN loss must never become the best) is worth reading on its own.
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from nmtkit.data.dataset import ParallelDataset, collate, make_batches
from nmtkit.models.base import Seq2SeqModel
from nmtkit.train.ema import averaged
from nmtkit.train.loss import teacher_forced_loss
from nmtkit.train.run import TrainingRun
from nmtkit.train.state import TrainState
from nmtkit.utils.amp import autocast


def validate(run: TrainingRun) -> Optional[dict]:
    """:func:`valid_loss` of the run's model (its weight average, with ``--ema-decay``) on its
    valid split, batched as it trains; None without a valid split."""
    if run.valid_set is None:
        return None
    with averaged(run.ema, run.model):
        return valid_loss(run.model, run.valid_set, run.opt.max_tokens, run.opt.batch_size, run.device, run.amp_dtype)


@torch.inference_mode()
def valid_loss(model: Seq2SeqModel, valid_set: ParallelDataset, max_tokens: Optional[int], batch_size: Optional[int],
               device: torch.device, amp_dtype: Optional[torch.dtype]) -> dict:
    """Per-token NLL and perplexity of ``model`` on ``valid_set``, batched like training (unshuffled)."""
    model.eval()
    tot_nll, tot_tok = 0.0, 0
    batches = make_batches(valid_set.src_sizes, valid_set.tgt_sizes, max_tokens, batch_size, shuffle=False)
    for b in batches:
        batch = collate([valid_set[i] for i in b], b).to(device)
        with autocast(device, amp_dtype):
            _, nll, _ = teacher_forced_loss(model, model, batch)
        tot_nll += float(nll)
        tot_tok += batch.ntokens
    loss = tot_nll / max(tot_tok, 1)
    return {"valid_loss": loss, "valid_ppl": math.exp(min(loss, 50.0)), "valid_tokens": tot_tok}


def end_epoch(run: TrainingRun, v: Optional[dict]) -> tuple[dict, bool]:
    """The record of the epoch that ends (its training loss, the learning rate, the validation
    scores ``v``), logged and kept in the state's ``finished_epochs``; the best scores and
    ``--patience``'s count of epochs without improvement updated.  Returns (record, improved)."""
    st = run.state
    train_loss = st.epoch_nll / max(st.epoch_tokens, 1.0)
    record = {"epoch": st.epoch, "update": st.update, "lr": run.optimizer.param_groups[0]["lr"],
              "train_loss": train_loss, "train_ppl": math.exp(min(train_loss, 50.0)), **(v or {})}
    st.finished_epochs.append(record)
    run.log({"event": "valid", **record})
    improved = record_best(st, v, run.opt.best_checkpoint_metric)
    if improved:
        st.bad_epochs = 0
    elif v:
        st.bad_epochs += 1
    return record, improved


def schedule_metric(v: Optional[dict], metric: str) -> Optional[float]:
    """What the plateau schedule follows (lower is better): the metric of checkpoint_best.pt
    (``--best-checkpoint-metric``); None without validation."""
    if not v:
        return None
    return -v["valid_bleu"] if metric == "bleu" else v["valid_loss"]


def record_best(state: TrainState, v: Optional[dict], metric: str) -> bool:
    """Update the best loss/BLEU in ``state``; True when ``metric`` (``--best-checkpoint-metric``) improved."""
    if not v:
        return False
    finite = math.isfinite(v["valid_loss"])  # a NaN loss would become the best and stay it (NaN < x is False)
    loss_better = finite and (state.best_valid_loss is None or v["valid_loss"] < state.best_valid_loss)
    if loss_better:
        state.best_valid_loss = v["valid_loss"]
    bleu = v.get("valid_bleu")
    bleu_better = bleu is not None and (state.best_valid_bleu is None or bleu > state.best_valid_bleu)
    if bleu_better:
        state.best_valid_bleu = bleu
    return bleu_better if metric == "bleu" else loss_better
