#!/usr/bin/env python3
"""Translation speed on trained models: nmtkit against OpenNMT-py, fairseq and Marian, CPU.

The models are the ones bench/quality_per_hour.py trained for the same wall time (each system's
checkpoint with the best greedy valid BLEU), so every system decodes at its trained quality.
test2016, beam 5, batch 64, at each ``--threads``; every command runs ``--repeat`` times, in
rounds over all commands (so a drift in the host's speed reaches every system alike), and the
fastest run is kept, and so is the fastest of the same command on the first sentence alone, so
that sentences/s is given both for the whole command and net of start-up.

Paths, each with the BLEU and chrF of its own output:

* like for like, float32: ``nmtkit-fp32``, ``opennmt-fp32``, ``fairseq-fp32`` (fairseq-interactive),
  ``marian-fp32``;
* fast paths: nmtkit ``bf16``, ``int8`` and ``int8+shortlist`` (the table: the model
  force-aligns its training data and keeps the top 50 targets per source word seen at least
  ``mc`` times, of which ``--shortlist-k`` are used, plus the 100 most frequent targets; ``mc`` and
  ``k`` are what bench/shortlist_valid.py chose on valid, read from its ``choice.json``), compiled
  for the model by ``nmtkit-shortlist`` (not timed, as Marian's shortlist is made untimed);
  Marian ``packed8`` (``--gemm-type packed8``) and ``packed8+shortlist`` (``--shortlist lex 100
  50``: the same 100 + 50, from eflomal alignments of the same BPE training pieces).

The Transformer pair (``--nmtkit-run nmtkit-transformer``, a WORK of bench/quality_per_hour.py's
``nmtkit-transformer`` and ``fairseq-transformer``): nmtkit's float32, bf16 and int8 paths against
fairseq-interactive and CTranslate2 (``pip install ctranslate2`` in the fairseq peer's venv; the
fairseq model converted by ``ct2-fairseq-converter``, decoded by bench/ct2_translate.py with the
same beam, length normalisation and bound), int8 and float32.  A run with no shortlist chosen on
valid (no ``shortlist_valid/choice.json``) times no shortlist path, and says so.

Records (``--record``): one ``translate_speed`` record per nmtkit path and peer it is compared
with (fp32 against each peer's fp32; nmtkit's fastest path against Marian's fastest and against
OpenNMT-py's fp32), with ``sent_s``, ``sent_s_net``, ``bleu`` of both sides and the ratio.
Run it alone, on a quiet machine.

    python bench/translate_speed.py --work /root/qph --record
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import benchlib as bl
import peers
from quality_per_hour import SYSTEMS, decode_cmd, scores, sources, toolkit, translate

#: timed paths per toolkit: label -> extra decoder flags ({table} / {lex}: the shortlist files)
PATHS = {
    "nmtkit": {"fp32": ["--amp", "none"], "bf16": ["--amp", "bf16"], "int8": ["--quantize", "int8", "--amp", "none"],
               "int8+shortlist": ["--quantize", "int8", "--amp", "none", "--shortlist", "{table}", "--shortlist-k", "{k}"]},
    "opennmt": {"fp32": []},
    "fairseq": {"fp32": []},
    # CTranslate2 decodes the fairseq Transformer (converted untimed by ct2-fairseq-converter)
    "ctranslate2": {"int8": ["--compute-type", "int8"], "fp32": ["--compute-type", "float32"]},
    "marian": {"fp32": [], "packed8": ["--gemm-type", "packed8"],
               "packed8+shortlist": ["--gemm-type", "packed8", "--shortlist", "{lex}", "100", "50"]},
}


def marian_lex(args: argparse.Namespace, txt: Path, out: Path) -> Path:
    """Marian's lexical shortlist (``target source p(target|source)`` lines) from eflomal's
    forward alignments of the BPE training pieces (not timed)."""
    lex = out / "lex.s2t"
    if lex.is_file():
        return lex
    fwd = out / "train.fwd.align"
    bl.run_cmd([Path(args.peers) / "eflomal" / "bin" / "eflomal-align", "-s", txt / "train.en", "-t", txt / "train.de",
                "-f", fwd, "--overwrite"], out / "eflomal.log")
    counts: dict[str, Counter] = defaultdict(Counter)
    src_lines = (txt / "train.en").read_text(encoding="utf-8").splitlines()
    tgt_lines = (txt / "train.de").read_text(encoding="utf-8").splitlines()
    for s, t, a in zip(src_lines, tgt_lines, fwd.read_text(encoding="utf-8").splitlines()):
        sw, tw = s.split(), t.split()
        for link in a.split():
            i, j = map(int, link.split("-"))
            counts[sw[i]][tw[j]] += 1
    with open(lex, "w", encoding="utf-8") as fh:
        for sw, c in counts.items():
            total = sum(c.values())
            for tw, n in c.items():
                fh.write(f"{tw} {sw} {n / total:.6f}\n")
    return lex


def ct2_model(args: argparse.Namespace, ckpt: Path, w: Path, out: Path) -> Path | None:
    """The fairseq Transformer ``ckpt`` converted for CTranslate2 (once, untimed); None where the
    fairseq peer's venv has no ctranslate2."""
    conv = Path(args.peers) / "fairseq" / "bin" / "ct2-fairseq-converter"
    if not conv.is_file():
        if args.record:  # the fastest Transformer decoder left out would flatter nmtkit's rows
            sys.exit(f"--record: no {conv}; CTranslate2 is the Transformer pair's fastest peer "
                     f"({Path(args.peers) / 'fairseq' / 'bin' / 'pip'} install ctranslate2, then run again)")
        print(f"no {conv}: CTranslate2 not timed (pip install ctranslate2 in the fairseq peer's venv)", flush=True)
        return None
    model = out / "ct2-fairseq"
    if not (model / "model.bin").is_file():
        bl.run_cmd([conv, "--model_path", ckpt, "--data_dir", w / "bin", "--source_lang", "en", "--target_lang", "de",
                    "--output_dir", model, "--force", "--unsafe_deserialization"], out / "ct2-convert.log", env=bl.ONMT_ENV)  # our own checkpoint
    return model


#: Peers that decode a model of nmtkit's shape (the parameter count checked within 1 % when they
#: trained): the same FLOPs per sentence as nmtkit's, so their rows get a share of the peak too.
SAME_SHAPE_PEERS = ("fairseq-transformer", "ctranslate2-transformer", "opennmt-transformer")


def add_flop_shares(results: list[dict], ckpt: Path, work: Path, txt: Path) -> None:
    """The search's FLOPs per second (bench/flops.py: the encoder once per sentence, the decoder for
    every hypothesis of the beam and every output piece) net of start-up, for nmtkit's paths and
    the peers decoding a model of its shape; and the share of the host's probed peak of that
    precision (times the threads) for the float32 and bf16 paths.  The int8 paths get their FLOP/s
    without a share (no int8 peak is probed); peers of another shape get neither."""
    import flops

    model, cfg, v = flops.checkpoint_shape(ckpt)
    src = flops.data_stats(txt / "test.en", txt / "test.de")
    peak = bl.this_host().get("peak_gflops") or {}
    # output length taken as the reference's BPE pieces per sentence (</s> included)
    per_sentence = flops.decode_flops(flops.sentence_decode_macs(model, cfg, v, src["s"], src["t"], 5))
    for r in results:
        if (r["toolkit"] != "nmtkit" and r.get("model") not in SAME_SHAPE_PEERS) or "shortlist" in r["path"]:
            continue  # another shape, or a shortlist's smaller output layer: not this count
        r["gflops_net"] = round(r["sent_s_net"] * per_sentence / 1e9, 2)
        prec = {"fp32": "fp32", "bf16": "bf16"}.get(r["path"])
        if prec and peak.get(prec):
            r["share_of_peak"] = round(r["gflops_net"] / (peak[prec] * r["threads"]), 4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_common_args(ap)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="threads of every decoder (default: 1 2)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per command, the fastest kept (default: %(default)s)")
    ap.add_argument("--nmtkit-run", choices=[s for s in SYSTEMS if toolkit(s) == "nmtkit"], default=None,
                    help="which nmtkit model of the quality run to time (default: nmtkit-fp32 if it was trained, else nmtkit-bf16)")
    args = ap.parse_args()
    work = Path(args.work)
    runs = {s: json.loads((work / s / "eval.json").read_text()) for s in SYSTEMS if (work / s / "eval.json").is_file()}
    nmtkit_run = args.nmtkit_run or next((s for s in ("nmtkit-fp32", "nmtkit-bf16") if s in runs), None)
    systems = [s for s in runs if toolkit(s) != "nmtkit" or s == nmtkit_run]
    if nmtkit_run not in runs:
        raise SystemExit(f"no evaluated nmtkit model in {work}: run bench/quality_per_hour.py first")
    txt, out = work / "bpe", work / "translate_speed"
    out.mkdir(exist_ok=True)
    from quality import compiled_shortlist, shortlist_table

    nmtkit_ckpt = Path(runs[nmtkit_run]["best"]["path"])
    choice_file = work / "shortlist_valid" / "choice.json"
    choice: dict | None = json.loads(choice_file.read_text()) if choice_file.is_file() else None
    files: dict[str, str] = {}
    if choice:
        table = shortlist_table(nmtkit_ckpt, work / "data", out, min_count=choice["min_count"])
        files = {"{table}": str(compiled_shortlist(nmtkit_ckpt, table)), "{k}": str(choice["k"])}
        print(f"shortlist chosen on valid: {choice['path']} ({choice_file})", flush=True)
    else:
        print(f"{choice_file} missing (bench/shortlist_valid.py chooses it on valid): no shortlist path timed", flush=True)
    decoders = [(s, Path(runs[s]["best"]["path"])) for s in systems]
    if "fairseq-transformer" in runs:
        ct2 = ct2_model(args, Path(runs["fairseq-transformer"]["best"]["path"]), work / "fairseq-transformer", out)
        decoders += [("ctranslate2-transformer", ct2)] if ct2 else []
    # every decoder command as it will run: the same beam, length normalisation and bound (bench/peers.py)
    for s, ckpt in decoders:
        peers.check_decoding({toolkit(s): decode_cmd(args, s, ckpt, work / s.replace("ctranslate2", "fairseq"), 5)[0]})
    if "marian" in runs:
        files["{lex}"] = str(marian_lex(args, txt, out))
    test = sources(args, "test", txt)
    ref = Path(f"{bl.raw_prefix(args.data, 'test')}.de")
    n_sent = bl.count_lines(test[False])
    load_before = bl.uptime_line()
    print(load_before, flush=True)
    results, cmds = [], []
    with tempfile.TemporaryDirectory(prefix="nmtkit-tspeed-") as tmp:
        one = {k: Path(tmp) / f"one.{int(k)}.en" for k in (False, True)}
        for k, path in test.items():
            one[k].write_text(path.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
        # every command of the invocation once per round, round after round: a host whose speed drifts
        # over minutes (a shared hypervisor: 20 % between two runs of one command 20 min apart) then
        # slows every system alike, where blocks of repeats per system would favour whichever ran fast
        jobs = []
        for threads in args.threads:
            for system, ckpt in decoders:
                w = work / system.replace("ctranslate2", "fairseq")
                for label, flags in PATHS[toolkit(system)].items():
                    if "{table}" in flags and not choice:
                        continue
                    extra = tuple(files.get(f, f) for f in flags)
                    jobs.append((threads, system, ckpt, w, label, extra, out / f"{toolkit(system)}.{label}.t{threads}.de"))
        fulls: dict[int, list] = {k: [] for k in range(len(jobs))}
        shorts: dict[int, list] = {k: [] for k in range(len(jobs))}
        for rnd in range(args.repeat):
            for j, (threads, system, ckpt, w, label, extra, hyp) in enumerate(jobs):
                fulls[j].append(translate(args, system, ckpt, test, 5, w, hyp, threads, extra))
                shorts[j].append(translate(args, system, ckpt, one, 5, w, Path(tmp) / "one.de", threads, extra))
                if rnd == args.repeat - 1:
                    print(f"t{threads} {toolkit(system)}-{label}: fastest of {args.repeat} rounds {min(r.wall for r in fulls[j]):.1f} s "
                          f"(slowest {max(r.wall for r in fulls[j]):.1f} s)", flush=True)
        for j, (threads, system, ckpt, w, label, extra, hyp) in enumerate(jobs):
            full, short = min(fulls[j], key=lambda r: r.wall), min(shorts[j], key=lambda r: r.wall)
            sc = scores(hyp, ref)
            src = test[toolkit(system) != "nmtkit"]
            cmd, env, _ = decode_cmd(args, system, ckpt, w, 5, threads, extra, files=(src, hyp.with_suffix(".raw")))
            redirect = "" if toolkit(system) == "opennmt" else f" < {src} > {hyp.with_suffix('.raw')}"
            cmds.append(" ".join(f"{k}={v}" for k, v in env.items()) + " " + shlex.join(map(str, cmd)) + redirect)
            results.append({"toolkit": toolkit(system), "path": label, "threads": threads, "wall": full.wall,
                            "sent_s": n_sent / full.wall, "sent_s_net": n_sent / max(full.wall - short.wall, 1e-9),
                            "startup_s": short.wall, "bleu": sc["bleu"], "chrf": sc["chrf"], "rss_mb": full.maxrss_mb,
                            "model": system, "wall_slowest": max(r.wall for r in fulls[j])})
            r = results[-1]
            print(f"t{threads} {r['toolkit']}-{label}: {r['sent_s']:.1f} sent/s ({r['sent_s_net']:.1f} net), "
                  f"BLEU {r['bleu']}", flush=True)
    load_after = bl.uptime_line()
    add_flop_shares(results, nmtkit_ckpt, work, txt)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    body, records = report(results, runs, nmtkit_run, choice)
    body += "\n\nThe decoders, as their authors document them:\n" + "\n".join(
        line for line in peers.report_lines("translate-speed") if line.split(" ", 2)[1] in {toolkit(s) for s, _ in decoders})
    print(body)
    if args.record:
        bl.append_results(bl.section("Translation speed on the quality-per-hour models, test2016", bl.machine_info(), load_before,
                                     load_after, f"models trained {runs[nmtkit_run]['hours']} h each at {runs[nmtkit_run]['commit']}", body, cmds))
        bl.append_jsonl(records, {"bench": "translate_speed", "load": {"before": load_before, "after": load_after}})


def report(results: list[dict], runs: dict, nmtkit_run: str, choice: dict | None) -> tuple[str, list[dict]]:
    """The RESULTS.md table and the translate_speed records (nmtkit path against peer path);
    ``choice``: the shortlist bench/shortlist_valid.py chose on valid."""
    rows = [[f"{r['toolkit']}-{r['path']}", r["threads"], f"{r['wall']:.1f}", f"{r['sent_s']:.1f}", f"{r['sent_s_net']:.1f}",
             f"{r['startup_s']:.1f}", f"{r['bleu']:.2f}", f"{r['chrf']:.2f}", f"{r['rss_mb']:.0f}"] for r in results]
    body = (f"Each system's model from the quality-per-hour run (nmtkit: {nmtkit_run}), test2016 (1,000 sentences), beam 5, "
            "batch 64; fastest of the repeats, which run round-robin over the commands; net = without the start-up (the same command on one sentence). "
            + (f"nmtkit-int8+shortlist: table and k chosen on valid by bench/shortlist_valid.py ({choice['path']}, commit "
               f"{choice['commit']}: valid BLEU {choice['valid_bleu']:.2f} against {choice['fp32_valid_bleu']:.2f} in float32).\n\n"
               if choice else "No shortlist chosen on valid for this model: no shortlist path.\n\n")
            + bl.md_table(["system-path", "threads", "wall s", "sent/s", "net sent/s", "start-up s", "BLEU", "chrF", "peak RSS MB"], rows)
            + "\n")
    by = {(r["toolkit"], r["path"], r["threads"]): r for r in results}
    pairs = [(("nmtkit", "fp32"), (p, "fp32"), "like for like, float32") for p in ("opennmt", "fairseq", "marian", "ctranslate2")]
    fastest = {}
    for t in {r["threads"] for r in results}:
        for tk in ("nmtkit", "marian"):
            cands = [r for r in results if r["toolkit"] == tk and r["threads"] == t]
            own = next((r["bleu"] for r in cands if r["path"] == "fp32"), None)
            if own is not None:  # a fast path counts only within 0.3 BLEU of the toolkit's own float32
                cands = [r for r in cands if r["bleu"] >= own - 0.3]
            if cands:
                fastest[tk, t] = max(cands, key=lambda r: r["sent_s"])["path"]
    records, lines = [], []
    for t in sorted({r["threads"] for r in results}):
        todo = [(a, b, what) for a, b, what in pairs]
        if ("nmtkit", t) in fastest:
            nf = ("nmtkit", fastest["nmtkit", t])
            todo += [(nf, ("marian", fastest["marian", t]), "fastest against fastest")] if ("marian", t) in fastest else []
            todo += [(nf, ("opennmt", "fp32"), "nmtkit's fastest against OpenNMT-py's float32")]
            todo += [(nf, ("ctranslate2", "int8"), "nmtkit's fastest against CTranslate2 int8 (the moonshot)")]
        # every fast path against nmtkit's own float32 on the same model: what each costs in BLEU and
        # gains in speed, recorded even on a day the peers were not run
        todo += [(("nmtkit", path), ("nmtkit", "fp32"), "fast path against nmtkit's own float32")
                 for path in PATHS["nmtkit"] if path != "fp32"]
        for (atk, apath), (btk, bpath), what in todo:
            a, b = by.get((atk, apath, t)), by.get((btk, bpath, t))
            if not a or not b:
                continue
            ratio = a["sent_s"] / b["sent_s"]
            lines.append(f"- {t} thread(s), {what}: nmtkit-{apath} {a['sent_s']:.1f} sent/s (BLEU {a['bleu']:.2f}) against "
                         f"{btk}-{bpath} {b['sent_s']:.1f} (BLEU {b['bleu']:.2f}): **{ratio:.2f}x** whole command, "
                         f"{a['sent_s_net'] / b['sent_s_net']:.2f}x net of start-up")
            records.append({"system": f"nmtkit-{apath}", "peer": f"{btk}-{bpath}", "comparison": what, "threads": t,
                            "amp": "bf16" if apath == "bf16" else "none", "beam": 5, "batch_size": 64,
                            "ratio": round(ratio, 3), "nmtkit": round(a["sent_s"], 2), "peer_value": round(b["sent_s"], 2),
                            "sent_s": round(a["sent_s"], 2), "sent_s_net": round(a["sent_s_net"], 2),
                            "peer_sent_s_net": round(b["sent_s_net"], 2), "bleu": a["bleu"], "peer_bleu": b["bleu"],
                            "chrf": a["chrf"], "peer_chrf": b["chrf"], "model": a["model"], "peer_model": b["model"],
                            # how long each model trained (wall hours on one core): speeds of models that did
                            # not train the same time are not like for like in quality
                            "train_hours": runs.get(a["model"], {}).get("hours"),
                            "peer_train_hours": runs.get(b["model"], {}).get("hours"),
                            **{k: a[k] for k in ("gflops_net", "share_of_peak") if k in a},
                            **{f"peer_{k}": b[k] for k in ("gflops_net", "share_of_peak") if k in b},
                            "measure": "sentences/s of the whole command, fastest of the repeats; net = minus a 1-sentence run",
                            **({"shortlist": choice["path"]} if apath == "int8+shortlist" and choice else {})})
    return body + "\n" + "\n".join(lines) + "\n", records


if __name__ == "__main__":
    main()
