#!/usr/bin/env python3
"""Translation quality of the Multi30k recipe (examples/multi30k/run.sh) on test2016.

Runs the recipe for each ``--seeds`` side by side (one thread, i.e. one core, per model; each
model gets ``--hours`` of wall-clock training), then translates test2016 with an ensemble of
the seeds, and reports for the pair:

* valid BLEU per epoch of every seed (greedy, logged by the recipe; checkpoint_best.pt has the
  lowest valid loss) and a
  learning-curve picture (``bench/quality_<pair>.png``);
* test2016 BLEU and chrF, cased and detokenized sacreBLEU, of the single best model (by valid
  loss), of the average of its last epoch checkpoints, and of the ensemble;
* training wall time and CPU time of each model, and the load average before and after.

``--report-only`` skips running and reports what a previous run left in ``--work`` (the
recipe skips finished steps, so running again also only completes what is missing).
``--record`` appends a section to bench/RESULTS.md and one JSON object per figure to
bench/results.jsonl.  Tune on valid only: test2016 is scored here and nowhere else.

    python bench/quality.py --work /tmp/m30k --pair en-de --seeds 1 2 --hours 2 --record
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
from pathlib import Path

import benchlib as bl

RECIPE = bl.REPO / "examples" / "multi30k" / "run.sh"
def run_recipe(work: Path, pair: str, seeds: list[int], hours: float, data: str, amp: str, arch: str) -> dict[int, bl.Run]:
    """The recipe for every seed at once (one core each), then the ensemble of the seeds.
    The first seed's run preprocesses; the others start once its data directory exists."""
    import threading
    import time

    src, tgt = pair.split("-")
    wdir = work / f"m30k-{pair}"
    env_base = {**os.environ, "SRC": src, "TGT": tgt, "WORK": str(wdir), "HOURS": str(hours),
                "THREADS": "1", "NMTKIT_DATA": data, "AMP": amp, "ARCH": arch}
    runs: dict[int, bl.Run] = {}

    def one(seed: int) -> None:
        runs[seed] = bl.run_cmd(["bash", str(RECIPE)], env={**env_base, "SEED": str(seed)}, log=work / f"{pair}.seed{seed}.log")

    threads = [threading.Thread(target=one, args=(seeds[0],))]
    threads[0].start()
    while not (wdir / "data" / "meta.json").exists() and threads[0].is_alive():
        time.sleep(2)
    for seed in seeds[1:]:
        threads.append(threading.Thread(target=one, args=(seed,)))
        threads[-1].start()
    for t in threads:
        t.join()
    if len(seeds) > 1:
        subprocess.run(["bash", str(RECIPE)], env={**env_base, "ENSEMBLE": " ".join(map(str, seeds))}, check=True)
    return runs


def read_log(path: Path) -> dict:
    """Valid records per epoch and the training wall time (sum of the run segments)."""
    events = [json.loads(l) for l in path.read_text(encoding="utf-8").splitlines() if l.strip()]
    events = [e for e in events if not e.get("superseded")]  # records of updates a resumed run redid
    valid = [e for e in events if e.get("event") == "valid" and "epoch" in e and "train_loss" in e]
    wall, seg_start, last = 0.0, None, None
    for e in events:
        if e.get("event") == "start":
            if seg_start is not None and last is not None:  # a run killed without an end record (a session's end)
                wall += last - seg_start  # counts up to its last kept record; what it did after, the resumed run redid
            seg_start = e["time"]
        elif seg_start is not None and e.get("event") in ("end", "interrupted"):
            wall += e["time"] - seg_start
            seg_start = None
        last = e["time"]
    if seg_start is not None and events:
        wall += events[-1]["time"] - seg_start
    return {"valid": valid, "train_wall_s": wall, "updates": max((e.get("update", 0) for e in events), default=0)}


def score(hyp: Path, ref: Path) -> tuple[float, float]:
    from nmtkit.evaluate.metrics import corpus_bleu, corpus_chrf
    from nmtkit.utils.textio import read_lines

    hyps, refs = read_lines(hyp, allow_empty_file=True), read_lines(ref)
    return corpus_bleu(hyps, [refs]).score, corpus_chrf(hyps, [refs]).score


def lowercased_tokenized_bleu(hyp: Path, ref: Path, lang: str) -> float:
    """BLEU as Wu et al. (2021) and most Multi30k papers report it (fairseq's multi-bleu form):
    hypotheses and references Moses-tokenized, lowercased, no further tokenization."""
    from sacremoses import MosesTokenizer

    from nmtkit.evaluate.metrics import corpus_bleu
    from nmtkit.utils.textio import read_lines

    tok = MosesTokenizer(lang=lang)

    def moses(lines: list[str]) -> list[str]:
        return [tok.tokenize(line, escape=False, return_str=True) for line in lines]
    hyps, refs = moses(read_lines(hyp, allow_empty_file=True)), moses(read_lines(ref))
    return corpus_bleu(hyps, [refs], tokenized=True, lowercase=True).score


def plot(pair: str, logs: dict[int, dict], path: Path, arch: str) -> None:
    """Valid BLEU (left) and valid perplexity (right) per epoch, one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for seed, log in logs.items():
        ep = [r["epoch"] for r in log["valid"]]
        a.plot(ep, [r.get("valid_bleu") for r in log["valid"]], marker="o", label=f"seed {seed}")
        b.plot(ep, [r["valid_ppl"] for r in log["valid"]], marker="s", label=f"seed {seed}")
    a.set(xlabel="epoch", ylabel="valid BLEU (greedy, cased, detok.)", title=f"Multi30k {pair}: {arch}")
    b.set(xlabel="epoch", ylabel="valid perplexity", yscale="log")
    for ax in (a, b):
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


#: Translation paths timed by --decode: label -> extra nmtkit-translate flags ({table}: the shortlist table).
DECODE_PATHS = {"fp32": ["--amp", "none"], "bf16": ["--amp", "bf16"], "int8": ["--quantize", "int8", "--amp", "none"],
                "int8+shortlist": ["--quantize", "int8", "--amp", "none", "--shortlist", "{table}"]}


def shortlist_table(ckpt: Path, data_dir: Path, out: Path, min_count: int = 1) -> Path:
    """The lexical table of --shortlist: the model force-aligns its own training split and keeps the
    top 50 targets per source word, each seen at least ``min_count`` times (``nmtkit-align
    --build-dict --dict-top-k 50 --dict-min-count 1``; not timed).  Pairs seen once matter: they
    hold the rarer compounds the model writes (bench/shortlist_valid.py measures both on valid).
    A higher ``min_count`` filters the min-count-1 table (the same lines: a word's top 50 do not
    depend on the minimum count), rather than aligning the training split again.
    The table is reused only if it was built by the same command from the same checkpoint file
    (path, size and time, kept beside it): a table of an older model in the same folder would
    shortlist the wrong words."""
    table, built_from = out / f"lex.top50.mc{min_count}.txt", out / f"lex.top50.mc{min_count}.source"
    if min_count > 1:
        full = shortlist_table(ckpt, data_dir, out, min_count=1)
        source = f"{full.with_suffix('.source').read_text()}filtered to count >= {min_count}\n"
        if not (table.exists() and built_from.is_file() and built_from.read_text() == source):
            kept = [ln for ln in full.read_text(encoding="utf-8").splitlines(keepends=True) if int(ln.split()[2]) >= min_count]
            table.write_text("".join(kept), encoding="utf-8")
            built_from.write_text(source)
        return table
    cmd = ["nmtkit-align", "--path", ckpt, "--data", data_dir, "--split", "train", "--max-tokens", "8000",
           "--build-dict", table, "--dict-top-k", "50", "--dict-min-count", min_count, "-o", out / "train.align"]
    st = Path(ckpt).stat()
    source = f"{Path(ckpt).resolve()} {st.st_size} {st.st_mtime_ns}\n{shlex.join(map(str, cmd))}\n"
    if not (table.exists() and built_from.is_file() and built_from.read_text() == source):
        bl.run_cmd(cmd, out / f"shortlist_table.mc{min_count}.log")
        built_from.write_text(source)
    return table


def compiled_shortlist(ckpt: Path, table: Path) -> Path:
    """``table`` compiled for ``ckpt`` by ``nmtkit-shortlist`` (not timed: done once per model and
    table, as Marian's ``marian-conv --shortlist``), written beside it; the translations are the
    text table's (tests/generate/test_shortlist.py), without its start-up cost."""
    compiled = table.with_suffix(".npz")
    bl.run_cmd([bl.nmtkit_bin("nmtkit-shortlist"), "--path", ckpt, "--table", table, "-o", compiled],
               table.with_suffix(".compile.log"))
    return compiled


def decode_speed(wdir: Path, seeds: list[int], ref: Path, src: str, tgt: str, data: Path,
                 paths: list[str]) -> tuple[str, list[str], list[dict]]:
    """test2016 beam 5, batch 64, of each seed's best checkpoint in every DECODE_PATHS precision at 1
    and 2 threads: sentences/s of the whole command and net of start-up (minus a 1-sentence run),
    the fastest of 2 runs, with BLEU -> (RESULTS.md text, commands, translate_speed records)."""
    import tempfile

    raw = data / "multi30k" / f"test2016.{src}"
    n_sent = bl.count_lines(raw)
    rows, cmds, records = [], [], []
    with tempfile.TemporaryDirectory(prefix="nmtkit-decode-") as tmp:
        one = Path(tmp) / "one.txt"
        one.write_text(raw.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
        for seed in seeds:
            ckpt = wdir / f"seed{seed}" / "checkpoint_best.pt"
            table = (compiled_shortlist(ckpt, shortlist_table(ckpt, wdir / "data", wdir / f"seed{seed}"))
                     if any("shortlist" in p for p in paths) else None)
            fp32_bleu = score(hyp_fp32, ref)[0] if (hyp_fp32 := wdir / f"test2016.seed{seed}-best.hyp.{tgt}").exists() else None
            for threads in (1, 2):
                for label in paths:
                    flags = [str(table) if a == "{table}" else a for a in DECODE_PATHS[label]]
                    cmd = [bl.nmtkit_bin("nmtkit-translate"), "--path", ckpt, "--beam", "5", "--batch-size", "64", "--threads", threads,
                           "--quiet", *flags]
                    hyp = Path(tmp) / f"seed{seed}.{label}.t{threads}.{tgt}"
                    full = min((bl.run_cmd(cmd, stdin=raw, stdout=hyp, quiet=True) for _ in range(2)), key=lambda r: r.wall)
                    short = min((bl.run_cmd(cmd, stdin=one, stdout=Path(tmp) / "one.out", quiet=True) for _ in range(2)),
                                key=lambda r: r.wall)
                    bleu, chrf = score(hyp, ref)
                    fp32_bleu = bleu if label == "fp32" else fp32_bleu  # the recipe's own float32 output otherwise
                    net = full.wall - short.wall
                    cmds.append(f"{shlex.join(map(str, cmd))} < {raw} > {hyp.name}")
                    rows.append([f"seed {seed}", label, threads, f"{full.wall:.1f}", f"{n_sent / full.wall:.1f}",
                                 f"{n_sent / net:.1f}", f"{bleu:.2f}", f"{chrf:.2f}", f"{full.maxrss_mb:.0f}"])
                    records.append({"system": f"nmtkit-{label}", "amp": "bf16" if label == "bf16" else "none",
                                    "nmtkit": round(n_sent / full.wall, 2), "seed": seed, "threads": threads, "beam": 5, "batch_size": 64,
                                    "sent_s": round(n_sent / full.wall, 2), "sent_s_net": round(n_sent / net, 2),
                                    "bleu": round(bleu, 2), "bleu_fp32": round(fp32_bleu, 2) if fp32_bleu is not None else None,
                                    "chrf": round(chrf, 2), "peak_rss_mb": round(full.maxrss_mb),
                                    "measure": "sentences/s of the whole command and net of a 1-sentence run, fastest of 2"})
    body = ("Translation of test2016 with each best checkpoint, beam 5, batch 64, run alone: sentences/s of the whole "
            "command (start-up and checkpoint loading included) and net of start-up (minus a 1-sentence run).\n\n"
            + bl.md_table(["model", "path", "threads", "wall s", "sent/s", "net sent/s", "BLEU", "chrF", "peak RSS MB"], rows) + "\n")
    return body, cmds, records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_common_args(ap)
    ap.add_argument("--pair", default="en-de")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--arch", default="luong_m30k", help="the recipe's model (ARCH=...): luong_m30k or a Transformer preset")
    ap.add_argument("--amp", choices=["none", "bf16"], default="none",
                    help="training precision of the recipe (AMP=...): none = float32, bf16 = autocast on a CPU with native bf16")
    ap.add_argument("--decode-paths", default=",".join(DECODE_PATHS),
                    help=f"comma-separated translation paths that --decode times, of {', '.join(DECODE_PATHS)} (default: all)")
    ap.add_argument("--decode", action="store_true",
                    help="also time test2016 translation of each seed's best checkpoint in float32, bf16 and int8, at 1 and 2 "
                         "threads (fastest of 2 runs, net of start-up), with BLEU beside every speed; run alone, on a quiet machine")
    ap.add_argument("--device-note", default="", help="where training ran when it was not this machine's CPU (e.g. an H100)")
    ap.add_argument("--cpu-seconds", default="", help="SEED=SECONDS,...: CPU time of each model measured outside this script (report-only)")
    ap.add_argument("--load-before", default="", help="uptime line before training (report-only)")
    ap.add_argument("--note", default="", help="a sentence on the conditions of the run (shared machine, ...)")
    ap.add_argument("--command", action="append", default=[], help="the exact command(s) that ran, when not this script's recipe calls (report-only; repeatable)")
    args = ap.parse_args()
    work = Path(args.work)
    bl.check_outside_repo(work)
    work.mkdir(parents=True, exist_ok=True)
    src, tgt = args.pair.split("-")
    wdir = work / f"m30k-{args.pair}"
    load_before = args.load_before or bl.uptime_line()
    cpu = {int(k): float(v) for k, v in (kv.split("=") for kv in args.cpu_seconds.split(",") if kv)}
    if args.report_only and args.decode:
        load_before = bl.uptime_line()  # the decode timing's own load, not the training's
    if not args.report_only:
        for seed, run in run_recipe(work, args.pair, args.seeds, args.hours, args.data, args.amp, args.arch).items():
            cpu[seed] = run.cpu
    load_after = bl.uptime_line()

    ref = Path(args.data) / "multi30k" / f"test2016.{tgt}"
    logs = {s: read_log(wdir / f"seed{s}" / "train_log.jsonl") for s in args.seeds}
    precision = "float32" if args.amp == "none" else "bf16"
    arch_tag = "" if args.arch == "luong_m30k" else f"_{args.arch}"
    picture = bl.REPO / "bench" / f"quality_{args.pair}{arch_tag}{'' if args.amp == 'none' else '_bf16'}.png"
    plot(args.pair, logs, picture, args.arch)
    rows, records = [], []
    commit = bl.git_commit()
    toolkit = f"nmtkit-{'fp32' if args.amp == 'none' else 'bf16'}"
    for seed in args.seeds:
        log = logs[seed]
        best = max(log["valid"], key=lambda r: r.get("valid_bleu") or -1)
        for system, label in (("single", f"seed{seed}-best"), ("averaged", None)):
            hyp = next(iter(sorted(wdir.glob(f"test2016.{label}.hyp.{tgt}"))), None) if label else \
                next(iter(sorted(wdir.glob(f"test2016.seed{seed}-avg*.hyp.{tgt}"))), None)
            if hyp is None:
                continue
            bleu, chrf = score(hyp, ref)
            lc_bleu = lowercased_tokenized_bleu(hyp, ref, tgt)
            rows.append([f"{system} (seed {seed})", f"{bleu:.2f}", f"{lc_bleu:.2f}", f"{chrf:.2f}", f"{log['train_wall_s'] / 60:.0f} min",
                         f"{cpu[seed] / 60:.0f} min" if seed in cpu else "n/a", len(log["valid"]),
                         f"{best.get('valid_bleu')} (epoch {best['epoch']})", hyp.name])
            records.append({"system": system, "toolkit": toolkit, "amp": args.amp, "arch": args.arch,
                            "seed": seed, "bleu": round(bleu, 2), "bleu_lc_tok": round(lc_bleu, 2), "chrf": round(chrf, 2),
                            "train_wall_s": round(log["train_wall_s"]), "train_cpu_s": round(cpu[seed]) if seed in cpu else None,
                            "epochs": len(log["valid"])})
    for hyp in sorted(wdir.glob(f"test2016.ensemble-*.hyp.{tgt}")):
        bleu, chrf = score(hyp, ref)
        lc_bleu = lowercased_tokenized_bleu(hyp, ref, tgt)
        wall = max(logs[s]["train_wall_s"] for s in args.seeds)
        rows.append(["ensemble", f"{bleu:.2f}", f"{lc_bleu:.2f}", f"{chrf:.2f}", f"{wall / 60:.0f} min (side by side)", "", "", "", hyp.name])
        records.append({"system": "ensemble", "toolkit": toolkit, "amp": args.amp, "arch": args.arch,
                        "seeds": args.seeds, "bleu": round(bleu, 2), "bleu_lc_tok": round(lc_bleu, 2), "chrf": round(chrf, 2),
                        "train_wall_s": round(wall)})
    curves = "\n".join(
        f"- seed {s}: " + ", ".join(f"{r['epoch']}: {r.get('valid_bleu', 'n/a')}" for r in logs[s]["valid"])
        + f" (valid ppl {logs[s]['valid'][-1]['valid_ppl']:.2f} after epoch {logs[s]['valid'][-1]['epoch']})"
        for s in args.seeds if logs[s]["valid"]
    )
    where = args.device_note or "this machine's CPU, 1 thread (one core) per model, the seeds side by side"
    recipe = ("luong_m30k, joint BPE 8k, batch 64, label smoothing 0.1, Adam 2e-3, lr halved on the valid-loss plateau, "
              "weight EMA 0.999, no early stop") if args.arch == "luong_m30k" else (
              f"{args.arch}, joint BPE 8k, 4096-token batches, label smoothing 0.1, Adam (0.9, 0.98) lr 0.005 with "
              "inverse-sqrt decay after 2000 warm-up updates, at most 8000 updates, the last 5 epochs averaged")
    body = (
        f"Multi30k {args.pair}, recipe `ARCH={args.arch} examples/multi30k/run.sh` ({recipe}), trained in {precision}, " + (f"on {where}. " if args.device_note else f"{args.hours:g} h of training per model on {where}. ")
        + "test2016 scored with cased, detokenized sacreBLEU (13a) and chrF2.\n\n"
        + bl.md_table(["system", "BLEU", "BLEU (lowercased, Moses-tokenized)", "chrF", "train wall", "train CPU", "epochs", "highest valid BLEU (greedy; checkpoint_best.pt is the lowest valid loss)", "output"], rows)
        + (f"\n\n{args.note}" if args.note else "")
        + f"\n\nValid BLEU (greedy) per epoch:\n\n{curves}\n\nLearning curves: `bench/{picture.name}`.\n"
    )
    env = " ".join(f"{k}={v}" for k, v in (("SRC", src), ("TGT", tgt), ("HOURS", args.hours), ("THREADS", 1), ("AMP", args.amp),
                                          ("ARCH", args.arch)))
    commands = [f"{env} SEED={s} bash examples/multi30k/run.sh" for s in args.seeds]
    if len(args.seeds) > 1:
        commands.append(f"{env} ENSEMBLE=\"{' '.join(map(str, args.seeds))}\" bash examples/multi30k/run.sh")
    commands = args.command or commands
    decode_records: list[dict] = []
    decode_body, decode_cmds = "", []
    if args.decode:
        paths = [p for p in args.decode_paths.split(",") if p]
        unknown = sorted(set(paths) - set(DECODE_PATHS))
        if unknown:
            raise SystemExit(f"--decode-paths: unknown {', '.join(unknown)} (choose from {', '.join(DECODE_PATHS)})")
        decode_body, decode_cmds, decode_records = decode_speed(wdir, args.seeds, ref, src, tgt, Path(args.data), paths)
        decode_records = [{**r, "arch": args.arch} for r in decode_records]
        body += "\n" + decode_body
        commands = [*commands, *decode_cmds]
        load_after = bl.uptime_line()
    # the machine line names where the models trained, not only where this script scored them
    machine = f"training: {args.device_note}; scoring: {bl.machine_info()}" if args.device_note else bl.machine_info()
    text = bl.section(f"quality: Multi30k {args.pair} test2016, trained in {precision}", machine, load_before, load_after,
                      bl.software_line({}), body, commands)
    print(text)
    decode_only = args.report_only and args.decode  # the quality figures were recorded when the run ended
    if decode_only:
        text = bl.section(f"translate: Multi30k {args.pair} test2016, recipe model trained in {precision}, float32 / bf16 / int8",
                          machine, load_before, load_after, bl.software_line({}), decode_body, decode_cmds)
        print(text)
    if args.record:
        bl.append_results(text)
    if args.record and not decode_only:
        bl.append_jsonl(records, {"bench": "quality", "commit": commit, "pair": args.pair, "set": "test2016",
                                  "load": {"before": load_before, "after": load_after}, "device": where})
    if args.record and decode_records:
        bl.append_jsonl(decode_records, {"bench": "translate_speed", "pair": args.pair, "set": "test2016",
                                         "load": {"before": load_before, "after": load_after}})


if __name__ == "__main__":
    main()
