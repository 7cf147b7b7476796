#!/usr/bin/env python3
"""Float32 matrix products on this CPU: MKL (``F.linear``) against oneDNN (``nmtkit.models.gemm``).

Why: PyTorch's CPU wheels send a float32 ``F.linear`` to MKL, which runs its AVX2 kernels on AMD
CPUs; oneDNN, in the same wheel, uses AVX-512.  nmtkit's models compute every float32 product
through :mod:`nmtkit.models.gemm`; this measures what that is worth at the shapes of
``luong_small``/``luong_m30k`` (batch 64 sentences, hidden 256, 8,000 target symbols):

* training (forward and backward): the LSTM gate products of a decoder step, the output layer
  over a batch of target positions;
* translation (forward only): the same products for 64 sentences x beam 5 = 320 rows.

GFLOP/s by each library, on 1 thread, best of ``--repeat`` timings of ``--iters`` calls each;
``--record`` appends the table to RESULTS.md and one ``gemm_speed`` record per shape.

    python bench/gemm_speed.py --record
"""
from __future__ import annotations

import argparse
import time
from typing import Callable

import torch
from torch.nn import functional as F

import benchlib as bl
from nmtkit.models import gemm

#: name -> (rows, in, out, with backward)
SHAPES = {
    "train: decoder gates (64 x 256 -> 1024)": (64, 256, 1024, True),
    "train: first-layer gates (64 x 512 -> 1024)": (64, 512, 1024, True),
    "train: output layer (1,600 x 256 -> 8,000)": (1600, 256, 8000, True),
    "translate: decoder gates (320 x 512 -> 1024)": (320, 512, 1024, False),
    "translate: output layer (320 x 256 -> 8,000)": (320, 256, 8000, False),
}


def best_time(fn: Callable[[], None], iters: int, repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(iters):
            fn()
        best = min(best, (time.perf_counter() - t) / iters)
    return best


def measure(rows: int, k: int, n: int, backward: bool, iters: int, repeat: int) -> dict:
    x = torch.randn(rows, k, requires_grad=backward)
    w = (torch.randn(n, k) / k ** 0.5).requires_grad_(backward)
    b = torch.zeros(n, requires_grad=backward)
    g = torch.randn(rows, n)
    flops = 2 * rows * k * n * (3 if backward else 1)

    def step(f: Callable) -> Callable[[], None]:
        if not backward:
            return lambda: f(x, w, b)
        return lambda: torch.autograd.backward(f(x, w, b), g)

    with torch.set_grad_enabled(backward):
        mkl = best_time(step(F.linear), iters, repeat)
        onednn = best_time(step(gemm.linear), iters, repeat)
    return {"mkl_gflops": round(flops / mkl / 1e9, 1), "onednn_gflops": round(flops / onednn / 1e9, 1),
            "ratio": round(mkl / onednn, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--record", action=bl.RecordFromCommit, nargs=0, default=False,
                    help="append the table to bench/RESULTS.md and records to bench/results.jsonl (committed tree only)")
    args = ap.parse_args()
    if not gemm.AVAILABLE:
        raise SystemExit("oneDNN is not available in this torch: nothing to compare")
    gemm.ENABLED = True  # measured whatever this CPU's default is
    torch.set_num_threads(1)
    load_before = bl.uptime_line()
    rows = []
    for name, (m, k, n, backward) in SHAPES.items():
        r = measure(m, k, n, backward, args.iters, args.repeat)
        rows.append({"shape": name, **r})
        print(f"{name}: MKL {r['mkl_gflops']} GFLOP/s, oneDNN {r['onednn_gflops']} GFLOP/s ({r['ratio']}x)", flush=True)
    load_after = bl.uptime_line()
    if args.record:
        table = bl.md_table(["product (float32, 1 thread)", "MKL GFLOP/s", "oneDNN GFLOP/s", "oneDNN / MKL"],
                            [[r["shape"], r["mkl_gflops"], r["onednn_gflops"], f"{r['ratio']}x"] for r in rows])
        body = ("Float32 `F.linear` (MKL) against `nmtkit.models.gemm.linear` (oneDNN), best of "
                f"{args.repeat} x {args.iters} calls; training rows include the backward products.\n\n{table}")
        bl.append_results(bl.section("float32 GEMM speed: MKL vs oneDNN", bl.machine_info(), load_before, load_after,
                                     f"torch {torch.__version__}", body, ["python bench/gemm_speed.py --record"]))
        peak = (bl.this_host().get("peak_gflops") or {}).get("fp32")  # the probe's one-thread float32 peak
        shares = (lambda r: {"share_of_peak": round(max(r["mkl_gflops"], r["onednn_gflops"]) / peak, 4)}) if peak else (lambda r: {})
        bl.append_jsonl([{**r, "threads": 1, **shares(r)} for r in rows],
                        {"bench": "gemm_speed", "load": {"before": load_before, "after": load_after}})


if __name__ == "__main__":
    main()
