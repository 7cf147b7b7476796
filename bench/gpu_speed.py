"""GPU throughput: training target tokens/s of ``luong_wmt_en_de`` (Luong et al.'s 4x1000 model)
with bf16 autocast at 128 sentences and at ``--max-tokens 8000`` per batch, and beam-5
translation sentences/s with and without ``torch.compile`` of the decoder step.

Run it on a machine with a CUDA GPU (the bench is skipped elsewhere).  It drives the library
(``Trainer``, ``Translator``) in-process so that CUDA is initialised once, times with
``torch.cuda.synchronize``, and leaves out the first updates (allocator and cuDNN warm-up).
Each figure becomes one JSON line in ``--out`` (default ``bench/results.jsonl``).

    python bench/gpu_speed.py --data DATA_DIR [--ckpt MODEL.pt --test RAW_SOURCE_FILE --hyp-dir DIR]

``DATA_DIR`` is an ``nmtkit-preprocess`` output; ``--ckpt`` a model to translate ``--test`` with
(without it, only training is measured); ``--hyp-dir`` keeps the translations, so that their
BLEU can be put next to each speed.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def train_throughput(data: str, batch: dict, updates: int, warmup: int, amp: str) -> dict:
    """Target tokens/s (and sentences/s) of ``luong_wmt_en_de`` over ``updates`` timed updates."""
    from rich.console import Console

    from nmtkit.data.dataset import make_batches
    from nmtkit.train import distributed as distmod
    from nmtkit.train.options import resolve_train_options
    from nmtkit.train.trainer import Trainer

    opt = resolve_train_options(data, {"arch": "luong_wmt_en_de", "amp": amp, "device": "cuda", "no_progress": True,
                                       "save_dir": "/tmp/gpu_speed_ck", "max_tokens": batch.get("max_tokens"),
                                       "batch_size": batch.get("batch_size"), "valid_subset": "none"})
    trainer = Trainer(opt, {}, Console(stderr=True), distmod.DistInfo())
    ds = trainer.train_set
    batches = make_batches(ds.src_sizes, ds.tgt_sizes, opt.max_tokens, opt.batch_size, seed=1, epoch=1)
    tokens = sentences = 0
    for k in range(warmup + updates):
        if k == warmup:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        out = trainer.train_step([batches[k % len(batches)]])
        if k >= warmup:
            tokens += out["ntokens"]
            sentences += out["sentences"]
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    return {"tok_s": tokens / seconds, "sent_s": sentences / seconds, "updates": updates, "seconds": seconds,
            "params": trainer.model.num_parameters(), "tgt_vocab": len(trainer.data.tgt_dict),
            "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30}


def translate_throughput(ckpt: str, test: str, compile_step: bool, amp: str, batch_size: int) -> dict:
    """Beam-5 sentences/s over the whole ``test`` file (after a warm-up pass over its first
    256 lines), optionally with every member's ``decode_step`` under ``torch.compile``."""
    from nmtkit.generate.bundle import ModelBundle
    from nmtkit.generate.translator import SearchOptions, Translator

    bundle = ModelBundle.load(ckpt, device="cuda", amp=amp, batch_size=batch_size)
    if compile_step:
        for m in bundle.model.models:
            m.decode_step = torch.compile(m.decode_step, dynamic=True)
    translator = Translator(bundle, SearchOptions(beam=5))
    lines = Path(test).read_text(encoding="utf-8").splitlines()
    items = list(enumerate(lines))
    with torch.inference_mode():
        translator.translate(items[:256], batch_size=batch_size)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = translator.translate(items, batch_size=batch_size)
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    return {"sent_s": len(lines) / seconds, "seconds": seconds, "sentences": len(lines),
            "hyps": [t.candidates[0].text for t in out]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--test", help="raw source text to translate (with --ckpt)")
    ap.add_argument("--ckpt", help="checkpoint for the translation figures")
    ap.add_argument("--hyp-dir", help="write each translation run's output here (to score it elsewhere)")
    ap.add_argument("--batch-size", type=int, default=128, help="translation batch size")
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--updates", type=int, default=150)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--out", default=str(REPO / "bench" / "results.jsonl"))
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_speed: no CUDA GPU here; nothing measured")
    device = torch.cuda.get_device_name(0)
    base = {"bench": "gpu_train_speed", "date": dt.date.today().isoformat(), "commit": commit(), "device": device,
            "arch": "luong_wmt_en_de", "torch": torch.__version__}
    rows = []
    for batch in ({"batch_size": 128}, {"max_tokens": 8000}) if not args.skip_train else ():
        for amp in ("bf16", "none"):
            r = train_throughput(args.data, batch, args.updates, args.warmup, amp)
            row = {**base, **batch, "amp": amp, **{k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}}
            print(json.dumps(row), flush=True)
            rows.append(row)
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
    if args.ckpt and args.test:
        base = {**base, "bench": "gpu_translate_speed", "arch": args.ckpt, "beam": 5, "batch_size": args.batch_size}
        for compile_step in (False, True):
            for amp in ("none", "bf16"):
                try:
                    r = translate_throughput(args.ckpt, args.test, compile_step, amp, args.batch_size)
                except Exception as exc:  # noqa: BLE001 - a failing variant (e.g. compile) is a result too
                    row = {**base, "compile": compile_step, "amp": amp, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                    print(json.dumps(row), flush=True)
                    rows.append(row)
                    continue
                hyps = r.pop("hyps")
                tag = f"{'compiled' if compile_step else 'eager'}-{amp}"
                if args.hyp_dir:
                    Path(args.hyp_dir, f"gpu-{tag}.hyp").write_text("\n".join(hyps) + "\n", encoding="utf-8")
                row = {**base, "compile": compile_step, "amp": amp, "hyp": f"gpu-{tag}.hyp",
                       **{k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}}
                print(json.dumps(row), flush=True)
                rows.append(row)
    with open(args.out, "a", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
