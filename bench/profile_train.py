#!/usr/bin/env python3
"""Where training time goes: ``torch.profiler`` over a few updates of one preset.

Prints the operators by self CPU time and the split between the model's forward, the backward
pass and the optimizer step (record_function ranges), for ``bench/README.md``.

    python bench/profile_train.py DATA_DIR --arch luong_small --batch-size 64 --updates 20
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data")
    ap.add_argument("--arch", default="luong_small")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--updates", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", type=int, default=15)
    args = ap.parse_args()

    from rich.console import Console
    from torch.profiler import ProfilerActivity, profile, record_function

    from nmtkit.data.dataset import collate, make_batches
    from nmtkit.train import distributed as distmod
    from nmtkit.train.loss import sequence_loss
    from nmtkit.train.options import resolve_train_options
    from nmtkit.train.trainer import Trainer

    torch.set_num_threads(args.threads)
    opt = resolve_train_options(args.data, {"arch": args.arch, "batch_size": args.batch_size, "max_tokens": None,
                                            "device": "cpu", "threads": args.threads, "no_progress": True,
                                            "save_dir": "/tmp/profile_train_ck", "valid_subset": "none"})
    trainer = Trainer(opt, {}, Console(stderr=True), distmod.DistInfo())
    ds, model, optim = trainer.train_set, trainer.model, trainer.optimizer
    batches = make_batches(ds.src_sizes, ds.tgt_sizes, None, args.batch_size, seed=1, epoch=1)
    model.train()

    def update(k: int) -> int:
        idx = batches[k]
        batch = collate([ds[i] for i in idx], idx)
        with record_function("forward"):
            logits, _ = model(batch.src_tokens, batch.src_lengths, batch.prev_output_tokens)
            loss, _ = sequence_loss(logits, batch.target)
        with record_function("backward"):
            (loss / batch.ntokens).backward()
        with record_function("optimizer"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optim.step()
            optim.zero_grad(set_to_none=True)
        return batch.ntokens

    for k in range(args.warmup):
        update(k)
    t0, tokens = time.perf_counter(), 0
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for k in range(args.warmup, args.warmup + args.updates):
            tokens += update(k)
    seconds = time.perf_counter() - t0
    print(f"{args.arch}, batch {args.batch_size}, {args.threads} thread(s): {args.updates} updates, "
          f"{tokens / seconds:,.0f} target tok/s under the profiler")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
