"""GPU throughput: ``luong_wmt_en_de`` (Luong et al.'s 4 x 1000 model) training target tokens/s,
eager and with ``--cuda-graphs``, beside a plain PyTorch peer and a cuDNN ceiling
(``bench/gpu_peers.py``), and ``transformer_base`` eager, in float32 and bf16 (the toolkit peer,
OpenNMT-py at both shapes, is ``bench/gpu_onmt.py``'s run; ``report`` reads its rows too); then test2016 at beam 5, batch 128, translated by
a given checkpoint (``--ckpt``) or by a model trained on the GPU for ``--quality-minutes``, with
the eager search and with ``--cuda-graphs``, in-process and as the ``nmtkit translate`` command,
BLEU beside each speed; and a profile of one search batch of each.

Two phases, because the GPU machine sends back files and the records are written here:

    # on the GPU machine (bench/gpu_run.sh is the whole device call)
    python bench/gpu_speed.py measure --data DATA --test SRC --out-dir OUT --commit COMMIT
    # here, on the files that came back
    python bench/gpu_speed.py report --from OUT [--from OUT2 ...] --ref REF [--record]

``measure`` writes ``gpu_rows.jsonl`` (one row per figure), the hypotheses, ``profile.txt`` and
logs to ``--out-dir``; ``report`` scores the hypotheses (cased detokenized sacreBLEU), appends a
section to RESULTS.md and, with ``--record``, the rows to results.jsonl with the commit measured.
Throughput is timed in-process with ``torch.cuda.synchronize``: a warm-up first (every batch of
one epoch for the graphed runs, so that each bucket shape is captured once; 10 updates for the
others), then ``--updates`` updates.
"""
from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

DEVICE = "cuda"  # a smoke test on a CPU sets "cpu"
TRAIN_SYSTEMS = ("nmtkit-eager", "plain-lstmcell", "cudnn-ceiling", "nmtkit-transformer", "nmtkit-graphs")  # graphs last: a fault there spoils no other
#: The model each training system trains (the rest: luong_wmt_en_de); the Transformer's toolkit peer is
#: OpenNMT-py's at the same shape (bench/gpu_onmt.py).
ARCH_OF = {"nmtkit-transformer": "transformer_base"}
PEER = "plain-lstmcell"


def _batches(data: str, max_tokens: int, epoch: int):  # noqa: ANN202
    from nmtkit.data.dataset import DataDir, make_batches

    d = DataDir(data)
    ds = d.load_split("train")
    return d, ds, make_batches(ds.src_sizes, ds.tgt_sizes, max_tokens, None, seed=1, epoch=epoch)


def _nmtkit_trainer(data: str, amp: str, graphs: bool, max_tokens: int, arch: str = "luong_wmt_en_de"):  # noqa: ANN202
    from rich.console import Console

    from nmtkit.train import distributed as distmod
    from nmtkit.train.options import resolve_train_options
    from nmtkit.train.trainer import Trainer

    opt = resolve_train_options(data, {"arch": arch, "amp": amp, "device": DEVICE, "no_progress": True,
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
        trainer = _nmtkit_trainer(data, amp, system == "nmtkit-graphs", max_tokens, ARCH_OF.get(system, "luong_wmt_en_de"))
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


#: Translation searches: the eager one, and the fixed-shape search as CUDA graphs (``--cuda-graphs``).
#: Runs at 42f9a93 and 4487d8a also timed ``nmtkit-stepgraphs``, the decoder step alone as a graph
#: inside the eager search, which the fixed-shape search replaced (bench/README.md, "GPU").
SEARCHES = ("nmtkit-eager", "nmtkit-graphs")


def _translator(ckpt: str, amp: str, batch_size: int, search: str):  # noqa: ANN202
    from nmtkit.generate.bundle import ModelBundle
    from nmtkit.generate.translator import SearchOptions, Translator

    bundle = ModelBundle.load(ckpt, device=DEVICE, amp=amp, batch_size=batch_size, cuda_graphs=search == "nmtkit-graphs")
    return Translator(bundle, SearchOptions(beam=5))


def translate_throughput(ckpt: str, test: str, amp: str, batch_size: int, search: str) -> dict:
    """Beam-5 sentences/s over the whole ``test`` file, after a warm-up pass over all of it (which
    captures every graph shape the file needs, when ``graphs``)."""
    import torch

    translator = _translator(ckpt, amp, batch_size, search)
    lines = Path(test).read_text(encoding="utf-8").splitlines()
    items = list(enumerate(lines))
    with torch.inference_mode():
        t0 = time.perf_counter()
        translator.translate(items, batch_size=batch_size)
        torch.cuda.synchronize()
        warm = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = translator.translate(items, batch_size=batch_size)
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    row = {"sent_s": len(lines) / seconds, "seconds": seconds, "first_pass_s": warm, "sentences": len(lines),
           "hyps": [t.candidates[0].text for t in out]}
    if translator.bundle.search_graphs is not None:
        row["shapes"] = len(translator.bundle.search_graphs.graphs)
    row["arch"] = translator.bundle.checkpoints[0].get("arch", "?")
    return row


def profile_search(ckpt: str, test: str, batch_size: int, search: str) -> str:
    """Where one batch's beam search spends its time: CUDA kernel launches, GPU-busy time, wall."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    translator = _translator(ckpt, "none", batch_size, search)
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
    launches = sum(e.count for e in events if e.key in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaGraphLaunch"))
    syncs = sum(e.count for e in events if e.key in ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpyAsync"))
    head = (f"{search} search, beam 5, batch {batch_size} (one batch of test2016), float32: "
            f"wall {wall * 1e3:.1f} ms, GPU busy {gpu_us / 1e3:.1f} ms ({gpu_us / 1e6 / wall:.0%}), {kernels} kernels "
            f"from {launches} launches, {syncs} host copies/syncs\n\n")
    return head + events.table(sort_by="self_cpu_time_total", row_limit=20) + "\n\n"


def translate_command(ckpt: str, test: str, batch_size: int, graphs: bool) -> dict:
    """``nmtkit translate`` as a user runs it (stdin to stdout, start-up included) -> sentences/s
    of the whole command and its output lines."""
    cmd = [sys.executable, "-m", "nmtkit", "translate", "--path", ckpt, "--beam", "5", "--batch-size", str(batch_size),
           "--device", DEVICE, "--quiet", *(["--cuda-graphs"] if graphs else [])]
    with open(test, encoding="utf-8") as src:
        t0 = time.perf_counter()
        done = subprocess.run(cmd, stdin=src, capture_output=True, text=True, cwd=REPO)
        seconds = time.perf_counter() - t0
    if done.returncode:
        raise RuntimeError(done.stderr.strip()[-400:])
    lines = done.stdout.splitlines()
    return {"sent_s": len(lines) / seconds, "seconds": seconds, "hyps": lines}


def train_for_quality(data: str, out: Path, minutes: float) -> tuple[Path, bool]:
    """``nmtkit-train`` (the console script's code path) with ``--cuda-graphs --amp bf16`` for
    ``minutes`` (eagerly if that fails) -> (the best checkpoint, whether graphs trained it)."""
    save = Path("/tmp/gpu_quality")
    cmd = [sys.executable, "-m", "nmtkit", "train", data, "--arch", "luong_wmt_en_de", "--save-dir", str(save),
           "--device", DEVICE, "--amp", "bf16", *(["--cuda-graphs"] if DEVICE == "cuda" else []), "--batch-size", "64",
           "--optimizer", "adam", "--lr", "0.001", "--loss-norm", "token", "--label-smoothing", "0.1", "--max-epoch", "100",
           "--stop-time-hours", str(minutes / 60), "--no-epoch-checkpoints", "--log-interval", "100"]
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
    rows_path.write_text("", encoding="utf-8")  # a rerun into the same folder starts afresh
    import host

    device = torch.cuda.get_device_name(0)
    # the GPU machine's own CPU, memory, kernel and torch build beside the GPU (its host's peers: none)
    machine = {k: v for k, v in host.fingerprint(peers=None).items() if k not in ("peers", "id")}
    base = {"device": device, "commit": args.commit, "torch": torch.__version__, "arch": "luong_wmt_en_de", "machine": machine}

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
            emit({"bench": "gpu_train_speed", "system": system, "arch": ARCH_OF.get(system, "luong_wmt_en_de"), "amp": amp,
                  "max_tokens": args.max_tokens, **r})
            gc.collect()  # a graphed model and its graphs hold each other: free them before the next system
            torch.cuda.empty_cache()
    ckpt, trained = (Path(args.ckpt), "given") if args.ckpt else (None, None)
    if ckpt is None and args.quality_minutes > 0:
        ckpt, graphed = train_for_quality(args.data, out, args.quality_minutes)
        trained = f"{args.quality_minutes} min on this GPU{' with --cuda-graphs' if graphed else ''}"
    if ckpt is None:
        return
    hyps, arches = {}, {}
    for search in SEARCHES:
        for amp in ("none", "bf16"):
            try:
                r = translate_throughput(str(ckpt), args.test, amp, args.batch_size, search)
            except Exception as exc:  # noqa: BLE001 - a failing variant is a result too
                emit({"bench": "gpu_translate_speed", "system": search, "amp": amp,
                      "error": f"{type(exc).__name__}: {str(exc)[:400]}"})
                continue
            hyps[f"{search}-{amp}"] = r.pop("hyps")
            arches[search] = r["arch"]
            (out / "hyps.json").write_text(json.dumps(hyps), encoding="utf-8")  # each time: a killed run keeps them
            emit({"bench": "gpu_translate_speed", "system": search, "amp": amp, "beam": 5, "batch_size": args.batch_size,
                  "hyp": f"{search}-{amp}", "model": args.model_label or str(ckpt), "trained": trained, **r})
    for graphs in (False, True):  # the command line, start-up included
        search = "nmtkit-graphs" if graphs else "nmtkit-eager"
        try:
            r = translate_command(str(ckpt), args.test, args.batch_size, graphs)
        except Exception as exc:  # noqa: BLE001
            emit({"bench": "gpu_translate_command", "system": search, "amp": "auto", "error": f"{type(exc).__name__}: {exc}"})
            continue
        hyps[f"{search}-command"] = r.pop("hyps")
        r["arch"] = next(iter(arches.values()), "?")
        emit({"bench": "gpu_translate_command", "system": search, "amp": "auto", "beam": 5, "batch_size": args.batch_size,
              "hyp": f"{search}-command", "model": args.model_label or str(ckpt), "trained": trained, **r})
    (out / "hyps.json").write_text(json.dumps(hyps), encoding="utf-8")
    with open(out / "profile.txt", "w", encoding="utf-8") as fh:
        for search in SEARCHES:
            try:
                fh.write(profile_search(str(ckpt), args.test, args.batch_size, search))
            except Exception as exc:  # noqa: BLE001
                fh.write(f"profile of {search} failed: {type(exc).__name__}: {exc}\n\n")


def _read_rows(dirs: list[str], ref: str) -> list[dict]:
    """Every row of the ``measure`` outputs in ``dirs``, translation rows scored (cased detokenized
    sacreBLEU) and compared line by line with the eager search's output at the same precision."""
    import sacrebleu

    refs = Path(ref).read_text(encoding="utf-8").splitlines()
    rows = []
    for d in (Path(x) for x in dirs):
        got = [json.loads(line) for name in ("gpu_rows.jsonl", "gpu_onmt_rows.jsonl") if (d / name).is_file()
               for line in (d / name).read_text(encoding="utf-8").splitlines() if line.strip()]
        log = d / "train_quality.log"
        saved = json.loads((d / "hyps.json").read_text(encoding="utf-8")) if (d / "hyps.json").exists() else {}
        for r in got:
            r["_dir"] = str(d)
            if r.get("system") == "nmtkit-graphs" and r["bench"] == "gpu_translate_speed" and "model" not in r:
                r["system"] = "nmtkit-stepgraphs"  # rows without "model" predate the fixed-shape search (42f9a93)
            if "hyp_pieces" in r:  # OpenNMT-py's output (bench/gpu_onmt.py): BPE pieces, made text as nmtkit decodes
                r["_hyps"] = onmt_text(d / Path(r["hyp_pieces"]).name)
                r["bleu"] = round(sacrebleu.corpus_bleu(r["_hyps"], [refs]).score, 2)
            elif r["bench"] in ("gpu_translate_speed", "gpu_translate_command") and "hyp" in r:
                if r["hyp"] in saved:
                    r["_hyps"] = saved[r["hyp"]]
                elif (d / r["hyp"]).is_file():  # runs before 4487d8a wrote one file per translation
                    r["_hyps"] = (d / r["hyp"]).read_text(encoding="utf-8").splitlines()
                else:
                    continue  # a run killed before its hypotheses were written: no BLEU to give
                r["bleu"] = round(sacrebleu.corpus_bleu(r["_hyps"], [refs]).score, 2)
                r["_batching"] = _batching(log)
        rows += got
    arch = {(r["_dir"], r.get("model")): r["arch"] for r in rows if r["bench"] == "gpu_translate_speed" and "model" in r}
    for r in rows:  # command rows of 4487d8a took the training bench's arch
        if r["bench"] == "gpu_translate_command" and (r["_dir"], r.get("model")) in arch:
            r["arch"] = arch[(r["_dir"], r.get("model"))]
    eager = {(r["_dir"], r["bench"], r["amp"]): r for r in rows if r.get("system") == "nmtkit-eager" and "_hyps" in r}
    peer = {(r["_dir"], r["amp"]): r.get("tok_s") for r in rows if r.get("system") == PEER and "tok_s" in r}
    toolkit = {}  # the fastest run of a real toolkit's model of the same kind, any precision (issue 40's "best toolkit peer")
    for r in rows:
        if r["bench"] == "gpu_train_speed" and r.get("system", "").startswith("opennmt-") and "tok_s" in r:
            best = toolkit.get(r["arch"])
            toolkit[r["arch"]] = r if best is None or r["tok_s"] > best["tok_s"] else best
    for r in rows:
        key = (r["_dir"], r["amp"])
        if r["bench"] == "gpu_train_speed" and "tok_s" in r and peer.get(key) and not r["system"].startswith("opennmt-") \
                and r.get("arch", "luong_wmt_en_de") == "luong_wmt_en_de":  # the plain loop is an LSTM's peer
            r["ratio_vs_peer"], r["peer"] = round(r["tok_s"] / peer[key], 3), PEER
        best = toolkit.get(r.get("arch"))
        if r["bench"] == "gpu_train_speed" and "tok_s" in r and best and r["system"].startswith("nmtkit"):
            r["ratio_vs_toolkit"], r["toolkit_peer"] = round(r["tok_s"] / best["tok_s"], 3), f"{best['system']} {best['amp']}"
        if "_hyps" in r and (r["_dir"], r["bench"], r["amp"]) in eager:
            base = eager[(r["_dir"], r["bench"], r["amp"])]
            r["lines_as_eager"] = sum(a == b for a, b in zip(r["_hyps"], base["_hyps"]))
            r["ratio_vs_eager"] = round(r["sent_s"] / base["sent_s"], 3)
    return rows


def onmt_text(pieces: Path) -> list[str]:
    """OpenNMT-py's hypotheses (BPE pieces) as detokenized text, the same way nmtkit decodes."""
    from translate import unbpe_detok

    text = pieces.with_suffix(".txt")
    unbpe_detok(pieces, text, "de")
    return text.read_text(encoding="utf-8").splitlines()


def _model_cell(r: dict) -> str:
    """What translated: a given checkpoint, or a model trained on the GPU (minutes and batching)."""
    if "model" in r:
        return f"{r['model']} ({r['trained']})"
    if "train_minutes" in r:
        return f"luong_wmt_en_de, {r['train_minutes']} min on this GPU, {r.get('_batching', '?')}"
    return ""


def _batching(log: Path) -> str:
    """The training batch of the model a run translated with, read from its first training command."""
    if not log.exists():
        return "?"
    words = log.read_text(encoding="utf-8").splitlines()[0].split()
    for opt in ("--batch-size", "--max-tokens"):
        if opt in words:
            return f"{opt} {words[words.index(opt) + 1]}"
    return "?"


def report(args: argparse.Namespace) -> None:
    import benchlib as bl

    rows = _read_rows(args.from_dir, args.ref)
    train_rows = [r for r in rows if r["bench"] == "gpu_train_speed"]
    trans_rows = [r for r in rows if r["bench"] in ("gpu_translate_speed", "gpu_translate_command")]
    train = [[r["system"], r.get("arch", "luong_wmt_en_de"), r["amp"], f"{r['tok_s']:,.0f}" if "tok_s" in r else r.get("error", "?"),
              f"{r['ratio_vs_peer']:.2f}x" if "ratio_vs_peer" in r else "",
              f"{r['ratio_vs_toolkit']:.2f}x ({r['toolkit_peer']})" if "ratio_vs_toolkit" in r else "",
              r.get("peak_mem_gib", ""), r.get("shapes", ""), r["commit"]] for r in train_rows]
    trans = [[r["system"] + (" (command)" if r["bench"] == "gpu_translate_command" else ""), r["amp"],
              f"{r['sent_s']:,.0f}" if "sent_s" in r else r.get("error", "?"),
              f"{r['ratio_vs_eager']:.2f}x" if "ratio_vs_eager" in r else "", r.get("bleu", ""),
              r.get("lines_as_eager", ""), r.get("shapes", ""),
              _model_cell(r), r["commit"]] for r in trans_rows]
    devices = sorted({r["device"] for r in rows})
    body = ""
    if train:
        r0 = next((r for r in train_rows if "tok_s" in r), train_rows[0])
        body += (f"Training `luong_wmt_en_de` (4 x 1000 LSTMs, local-p attention, input feeding; {r0.get('params', 0) / 1e6:.1f}M "
                 f"parameters with Multi30k's joint BPE 8k), Multi30k en-de at `--max-tokens {r0.get('max_tokens')}`, target "
                 f"tokens/s over {r0.get('updates')} updates after warm-up; the peer is `{PEER}` (bench/gpu_peers.py), and "
                 "the toolkit peer OpenNMT-py 3.5.1 (bench/gpu_onmt.py: its LSTM at this shape with global attention, its "
                 "Transformer at transformer_base's; `fp16` is its mixed precision; its steady rate from its own report "
                 "lines):\n\n"
                 + bl.md_table(["system", "model", "autocast", "target tok/s", "vs peer", "vs toolkit peer", "peak GiB",
                                "graph shapes", "commit"], train)
                 + "\n\n")
    if trans:
        r0 = next((r for r in trans_rows if "batch_size" in r), {})
        body += (f"Translation of test2016 (1,000 sentences), beam 5, batch {r0.get('batch_size', '?')}, timed over the whole file "
                 "(after a first pass, which also captures the graphs); `nmtkit-stepgraphs` replays only the decoder step "
                 "as a graph, `nmtkit-graphs` the whole fixed-shape search step (`--cuda-graphs`); 'lines as eager' counts "
                 "the output lines equal to the eager search's at the same precision and model:\n\n"
                 + bl.md_table(["search", "autocast", "sentences/s", "vs eager", "BLEU", "lines as eager", "graph shapes",
                                "model trained", "commit"], trans) + "\n\n")
    for d in args.from_dir:
        prof = Path(d, "profile.txt")
        if prof.exists():
            heads = [line for line in prof.read_text(encoding="utf-8").splitlines() if "wall " in line and "kernels" in line]
            if not Path(d, "hyps.json").exists():  # then --cuda-graphs graphed the decoder step alone
                heads = [h.replace("graphed search", "nmtkit-stepgraphs search") for h in heads]
            of = next((r for r in trans_rows if r["_dir"] == str(Path(d)) and "sent_s" in r), {})
            body += (f"Profile of one search batch (torch.profiler; {_model_cell(of)} at {of.get('commit', '?')}):\n\n"
                     + "\n".join(f"- {h}" for h in heads) + "\n\n")
    commits = sorted({r["commit"] for r in rows})
    text = bl.section(f"GPU speed ({', '.join(devices)})", f"{', '.join(devices)} (device tool), torch {rows[0]['torch']}",
                      "n/a: the GPU machine ran nothing else", "n/a", f"nmtkit @ {', '.join(commits)}", body,
                      ["bash bench/gpu_run.sh COMMIT [measure options]  # on the GPU machine, through the device tool",
                       "python bench/gpu_speed.py report " + " ".join(f"--from {d}" for d in args.from_dir)
                       + f" --ref {args.ref} --record"])
    print(text)
    if args.record:
        bl.append_results(text)
        records = [{k: v for k, v in r.items() if k != "hyp" and not k.startswith("_")} for r in rows]
        # the host is the GPU machine the rows name (its CPU is not this one's); per row, as calls may differ
        for rec in records:
            rec["host"] = {"label": str(rec.get("device", "?")), "gpu": rec.get("device"), "torch": rec.get("torch"),
                           **({"cpu": rec.pop("machine")} if rec.get("machine") else {})}
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
    m.add_argument("--systems", nargs="*", default=list(TRAIN_SYSTEMS), choices=TRAIN_SYSTEMS,
                   help="training systems to time (none: translation only)")
    m.add_argument("--max-tokens", type=int, default=8000)
    m.add_argument("--updates", type=int, default=40)
    m.add_argument("--batch-size", type=int, default=128, help="translation batch size")
    m.add_argument("--quality-minutes", type=float, default=2.5, help="train a model this long to translate (0: skip)")
    m.add_argument("--ckpt", help="translate with this checkpoint instead of training one")
    m.add_argument("--model-label", help="how the report names --ckpt's model")
    r = sub.add_parser("report", help="here, on the files measure wrote")
    r.add_argument("--from", dest="from_dir", action="append", required=True, help="a measure output (repeatable)")
    r.add_argument("--ref", required=True, help="the reference translation of --test")
    r.add_argument("--record", nargs=0, action=bl.RecordFromCommitElsewhere, default=False)
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
