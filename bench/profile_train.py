#!/usr/bin/env python3
"""Where training time goes: ``torch.profiler`` over a few updates of one preset.

Prints the operators by self CPU time, for ``bench/README.md``.  Each update is the trainer's
own ``train_step`` (forward and backward under the run's ``--amp``, gradient normalisation and
clipping, the optimizer step), so the profile is of the code that trains.

    python bench/profile_train.py DATA_DIR --arch luong_small --batch-size 64 --updates 20 [--amp bf16]
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
    ap.add_argument("--amp", choices=["none", "bf16"], default="none", help="the trainer's --amp (default: float32)")
    ap.add_argument("--weights", help="a checkpoint of the same --arch whose weights are profiled instead of a fresh "
                    "model's (late in training the logits spread wider, which changes what exp and log_softmax cost)")
    ap.add_argument("--shapes", action="store_true", help="one row per operator and input shapes (which products cost)")
    args = ap.parse_args()

    from rich.console import Console
    from torch.profiler import ProfilerActivity, profile

    from nmtkit.data.dataset import make_batches
    from nmtkit.train import distributed as distmod
    from nmtkit.train.options import resolve_train_options
    from nmtkit.train.trainer import Trainer

    torch.set_num_threads(args.threads)
    opt = resolve_train_options(args.data, {"arch": args.arch, "batch_size": args.batch_size, "max_tokens": None,
                                            "device": "cpu", "threads": args.threads, "no_progress": True,
                                            "save_dir": "/tmp/profile_train_ck", "valid_subset": "none", "amp": args.amp})
    ckpt = torch.load(args.weights, map_location="cpu", weights_only=False) if args.weights else None
    trainer = Trainer(opt, ckpt["model_config"] if ckpt else {}, Console(stderr=True), distmod.DistInfo())
    if ckpt:
        trainer.model.load_state_dict(ckpt["model"])
    ds = trainer.train_set
    batches = make_batches(ds.src_sizes, ds.tgt_sizes, None, args.batch_size, seed=1, epoch=1)

    def update(k: int) -> int:
        return int(trainer.train_step([batches[k]])["ntokens"])

    for k in range(args.warmup):
        update(k)
    t0, tokens = time.perf_counter(), 0
    with profile(activities=[ProfilerActivity.CPU], record_shapes=args.shapes) as prof:
        for k in range(args.warmup, args.warmup + args.updates):
            tokens += update(k)
    seconds = time.perf_counter() - t0
    print(f"{args.arch}, batch {args.batch_size}, {args.threads} thread(s), amp {args.amp}: {args.updates} updates, "
          f"{tokens / seconds:,.0f} target tok/s under the profiler")
    print(prof.key_averages(group_by_input_shape=args.shapes).table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
