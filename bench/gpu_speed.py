"""GPU throughput: ``luong_wmt_en_de`` (Luong et al.'s 4 x 1000 model) training target tokens/s,
eager and with ``--cuda-graphs``, beside a plain PyTorch peer and a cuDNN ceiling
(``bench/gpu_peers.py``), in float32 and bf16; then a model trained on the GPU for a few minutes
translates test2016 at beam 5, batch 128, and a profile says where a search step's time goes.

Two phases, because the GPU machine sends back files and the records are written here:

    # on the GPU machine (bench/gpu_run.sh is the whole device call)
    python bench/gpu_speed.py measure --data DATA --test SRC --out-dir OUT --commit COMMIT
    # here, on the files that came back
    python bench/gpu_speed.py report --from OUT --ref REF [--record]

``measure`` writes ``gpu_rows.jsonl`` (one row per figure), the hypotheses, ``profile.txt`` and
logs to ``--out-dir``; ``report`` scores the hypotheses (cased detokenized sacreBLEU), appends a
section to RESULTS.md and, with ``--record``, the rows to results.jsonl with the commit measured.
Throughput is timed in-process with ``torch.cuda.synchronize``: a warm-up first (every batch of
one epoch for the graphed runs, so that each bucket shape is captured once; 10 updates for the
others), then ``--updates`` updates.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

DEVICE = "cuda"  # a smoke test on a CPU sets "cpu"
TRAIN_SYSTEMS = ("nmtkit-eager", "plain-lstmcell", "cudnn-ceiling", "nmtkit-graphs")  # graphs last: a fault there spoils no other
PEER = "plain-lstmcell"


def _batches(data: str, max_tokens: int, epoch: int):  # noqa: ANN202
    from nmtkit.data.dataset import DataDir, make_batches

    d = DataDir(data)
    ds = d.load_split("train")
    return d, ds, make_batches(ds.src_sizes, ds.tgt_sizes, max_tokens, None, seed=1, epoch=epoch)


def _nmtkit_trainer(data: str, amp: str, graphs: bool, max_tokens: int):  # noqa: ANN202
    from rich.console import Console

    from nmtkit.train import distributed as distmod
    from nmtkit.train.options import resolve_train_options
    from nmtkit.train.trainer import Trainer

    opt = resolve_train_options(data, {"arch": "luong_wmt_en_de", "amp": amp, "device": DEVICE, "no_progress": True,
                                       "save_dir": "/tmp/gpu_speed_ck", "max_tokens": max_tokens, "valid_subset": "none",
                                       "cuda_graphs": graphs, "optimizer": "adam", "lr": 1e-3})
    return Trainer(opt, {}, Console(stderr=True), distmod.DistInfo())


def train_throughput(system: str, data: str, amp: str, max_tokens: int, updates: int) -> dict:
    """Target tokens/s of one system over ``updates`` timed updates after its warm-up."""
    import torch

    from nmtkit.data.dataset import collate

    d, ds, warm_batches = _batches(data, max_tokens, epoch=1)
    _, _, timed_batches = _batches(data, max_tokens, epoch=2)
    if system.startswith("nmtkit"):
        trainer = _nmtkit_trainer(data, amp, system == "nmtkit-graphs", max_tokens)
        step = lambda b: trainer.train_step([b])["ntokens"]  # noqa: E731
        params = trainer.model.num_parameters()
    else:
        from gpu_peers import PlainLuong, PlainTrainer

        peer = PlainTrainer(PlainLuong(len(d.src_dict), len(d.tgt_dict), feed=system == PEER), amp, DEVICE)
        step = lambda b: peer.step(collate([ds[i] for i in b], b).to(DEVICE))  # noqa: E731
        params = sum(p.numel() for p in peer.model.parameters())
    warm = warm_batches if system == "nmtkit-graphs" else warm_batches[:10]
    t0 = time.perf_counter()
    for b in warm:
        step(b)
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    torch.cuda.reset_peak_memory_stats()
    tokens = 0
    t0 = time.perf_counter()
    for k in range(updates):
        tokens += step(timed_batches[k % len(timed_batches)])
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    row = {"tok_s": tokens / seconds, "updates": updates, "seconds": seconds, "warmup_s": warm_s,
           "warmup_updates": len(warm), "params": params, "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30}
    if system == "nmtkit-graphs":
        g = trainer.model.loop_graphs
        row.update(shapes=len(g.graphs), eager_calls=g.eager_calls)
    return row


def translate_throughput(ckpt: str, test: str, amp: str, batch_size: int) -> dict:
    """Beam-5 sentences/s over the whole ``test`` file, after a warm-up pass over its first 256 lines."""
    import torch

    from nmtkit.generate.bundle import ModelBundle
    from nmtkit.generate.translator import SearchOptions, Translator

    bundle = ModelBundle.load(ckpt, device=DEVICE, amp=amp, batch_size=batch_size)
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


def profile_search(ckpt: str, test: str, batch_size: int) -> str:
    """Where one batch's beam search spends its time: CUDA kernel launches, GPU-busy time, wall."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from nmtkit.generate.bundle import ModelBundle
    from nmtkit.generate.translator import SearchOptions, Translator

    bundle = ModelBundle.load(ckpt, device=DEVICE, amp="none", batch_size=batch_size)
    translator = Translator(bundle, SearchOptions(beam=5))
    items = list(enumerate(Path(test).read_text(encoding="utf-8").splitlines()[:batch_size]))
    with torch.inference_mode():
        translator.translate(items, batch_size=batch_size)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            translator.translate(items, batch_size=batch_size)
            torch.cuda.synchronize()
            wall = time.perf_counter() - t0
    events = prof.key_averages()
    kernels = sum(e.count for e in events if e.device_type.name == "CUDA")
    gpu_us = sum(e.self_device_time_total for e in events if e.device_type.name == "CUDA")
    syncs = sum(e.count for e in events if e.key in ("aten::item", "aten::_local_scalar_dense", "cudaStreamSynchronize",
                                                      "cudaDeviceSynchronize", "cudaMemcpyAsync"))
    head = (f"beam 5, batch {batch_size} (one batch of test2016), float32: wall {wall * 1e3:.1f} ms, GPU busy "
            f"{gpu_us / 1e3:.1f} ms ({gpu_us / 1e6 / wall:.0%}), {kernels} kernels, {syncs} host copies/syncs\n\n")
    return head + events.table(sort_by="self_cpu_time_total", row_limit=25)


def train_for_quality(data: str, out: Path, minutes: float) -> tuple[Path, bool]:
    """``nmtkit-train`` (the console script's code path) with ``--cuda-graphs --amp bf16`` for
    ``minutes`` (eagerly if that fails) -> (the best checkpoint, whether graphs trained it)."""
    save = Path("/tmp/gpu_quality")
    cmd = [sys.executable, "-m", "nmtkit", "train", data, "--arch", "luong_wmt_en_de", "--save-dir", str(save),
           "--device", DEVICE, "--amp", "bf16", *(["--cuda-graphs"] if DEVICE == "cuda" else []), "--max-tokens", "8000", "--optimizer", "adam",
           "--lr", "0.001", "--label-smoothing", "0.1", "--max-epoch", "100", "--stop-time-hours", str(minutes / 60),
           "--no-epoch-checkpoints", "--log-interval", "20"]
    with open(out / "train_quality.log", "w", encoding="utf-8") as log:
        for attempt in (cmd, [c for c in cmd if c != "--cuda-graphs"]):  # eager if the graphed run fails
            log.write(" ".join(attempt) + "\n")
            log.flush()
            if subprocess.run(attempt, stdout=log, stderr=subprocess.STDOUT, cwd=REPO).returncode == 0:
                return save / "checkpoint_best.pt", "--cuda-graphs" in attempt
            subprocess.run(["rm", "-rf", str(save)], check=True)
    raise RuntimeError(f"training failed with and without --cuda-graphs (see {out / 'train_quality.log'})")


def measure(args: argparse.Namespace) -> None:
    import torch

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows_path = out / "gpu_rows.jsonl"
    device = torch.cuda.get_device_name(0)
    base = {"device": device, "commit": args.commit, "torch": torch.__version__, "arch": "luong_wmt_en_de"}

    def emit(row: dict) -> None:
        row = {**base, **{k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}}
        print(json.dumps(row), flush=True)
        with open(rows_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")

    for system in args.systems:
        for amp in ("none", "bf16"):
            try:
                r = train_throughput(system, args.data, amp, args.max_tokens, args.updates)
            except Exception as exc:  # noqa: BLE001 - a failing system is a result too, and the rest still run
                r = {"error": f"{type(exc).__name__}: {str(exc)[:400]}"}
            emit({"bench": "gpu_train_speed", "system": system, "amp": amp, "max_tokens": args.max_tokens, **r})
            torch.cuda.empty_cache()
    if args.quality_minutes > 0:
        ckpt, graphed = train_for_quality(args.data, out, args.quality_minutes)
        for amp in ("none", "bf16"):
            r = translate_throughput(str(ckpt), args.test, amp, args.batch_size)
            hyp = f"gpu-eager-{amp}.hyp"
            (out / hyp).write_text("\n".join(r.pop("hyps")) + "\n", encoding="utf-8")
            emit({"bench": "gpu_translate_speed", "system": "nmtkit-eager", "amp": amp, "beam": 5,
                  "batch_size": args.batch_size, "hyp": hyp, "train_minutes": args.quality_minutes,
                  "trained_with_graphs": graphed, **r})
        (out / "profile.txt").write_text(profile_search(str(ckpt), args.test, args.batch_size), encoding="utf-8")


def report(args: argparse.Namespace) -> None:
    import sacrebleu

    import benchlib as bl

    src = Path(args.from_dir)
    rows = [json.loads(line) for line in (src / "gpu_rows.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    refs = Path(args.ref).read_text(encoding="utf-8").splitlines()
    for r in rows:
        if r["bench"] == "gpu_translate_speed":
            hyps = (src / r["hyp"]).read_text(encoding="utf-8").splitlines()
            r["bleu"] = round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)
    peer = {r["amp"]: r.get("tok_s") for r in rows if r.get("system") == PEER and "tok_s" in r}
    for r in rows:
        if r["bench"] == "gpu_train_speed" and "tok_s" in r and peer.get(r["amp"]):
            r["ratio_vs_peer"] = round(r["tok_s"] / peer[r["amp"]], 3)
            r["peer"] = PEER
    train = [[r["system"], r["amp"], f"{r['tok_s']:,.0f}" if "tok_s" in r else r.get("error", "?"),
              f"{r['ratio_vs_peer']:.2f}x" if "ratio_vs_peer" in r else "", r.get("peak_mem_gib", ""),
              r.get("shapes", "")] for r in rows if r["bench"] == "gpu_train_speed"]
    trans = [[r["system"], r["amp"], f"{r['sent_s']:,.0f}", r["bleu"]] for r in rows if r["bench"] == "gpu_translate_speed"]
    device = rows[0]["device"]
    body = (f"Training `luong_wmt_en_de` (4 x 1000 LSTMs, local-p attention, input feeding; Multi30k en-de, joint BPE 8k), "
            f"`--max-tokens {rows[0].get('max_tokens')}`, target tokens/s over {rows[0].get('updates')} updates after warm-up; "
            f"the peer is `{PEER}` (bench/gpu_peers.py):\n\n"
            + bl.md_table(["system", "autocast", "target tok/s", "vs peer", "peak GiB", "graph shapes"], train)
            + "\n\nTranslation of test2016 (1,000 sentences), beam 5, batch "
            f"{next((r['batch_size'] for r in rows if 'batch_size' in r), '?')}, by a model trained on this GPU for "
            f"{next((r['train_minutes'] for r in rows if 'train_minutes' in r), '?')} min (`--cuda-graphs --amp bf16`):\n\n"
            + bl.md_table(["search", "autocast", "sentences/s", "BLEU"], trans)
            + ("\n\nProfile of one search batch:\n\n```\n" + (src / "profile.txt").read_text(encoding="utf-8").split("\n\n")[0]
               + "\n```\n" if (src / "profile.txt").exists() else ""))
    text = bl.section(f"GPU speed ({device})", f"{device} (device tool), torch {rows[0]['torch']}",
                      "n/a: the GPU machine ran nothing else", "n/a", f"nmtkit @ {rows[0]['commit']}", body,
                      [f"bash bench/gpu_run.sh  # on the GPU machine: gpu_speed.py measure (commit {rows[0]['commit']})",
                       f"python bench/gpu_speed.py report --from {src} --ref {args.ref} --record"])
    print(text)
    if args.record:
        bl.append_results(text)
        records = [{k: v for k, v in r.items() if k not in ("hyp",)} for r in rows]
        bl.append_jsonl(records, {"load": "n/a: the GPU machine ran nothing else"})


def main() -> None:
    import benchlib as bl

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="phase", required=True)
    m = sub.add_parser("measure", help="on the GPU machine")
    m.add_argument("--data", required=True, help="an nmtkit-preprocess directory (Multi30k en-de)")
    m.add_argument("--test", required=True, help="raw source text to translate")
    m.add_argument("--out-dir", required=True)
    m.add_argument("--commit", required=True, help="the commit of the tree measured (the GPU machine has no .git)")
    m.add_argument("--systems", nargs="+", default=list(TRAIN_SYSTEMS), choices=TRAIN_SYSTEMS)
    m.add_argument("--max-tokens", type=int, default=8000)
    m.add_argument("--updates", type=int, default=40)
    m.add_argument("--batch-size", type=int, default=128, help="translation batch size")
    m.add_argument("--quality-minutes", type=float, default=1.5, help="train a model this long to translate (0: skip)")
    r = sub.add_parser("report", help="here, on the files measure wrote")
    r.add_argument("--from", dest="from_dir", required=True)
    r.add_argument("--ref", required=True, help="the reference translation of --test")
    r.add_argument("--record", nargs=0, action=bl.RecordFromCommit, default=False)
    args = ap.parse_args()
    if args.phase == "measure":
        import torch

        if not torch.cuda.is_available():
            sys.exit("gpu_speed: no CUDA GPU here; nothing measured")
        measure(args)
    else:
        report(args)


if __name__ == "__main__":
    main()
