#!/usr/bin/env python3
"""Translation speed and quality: nmtkit-translate vs onmt_translate, beam 5, Multi30k test2016.

Phase ``train`` (long; start it early, in the background): nmtkit trains ``luong_small`` on
Multi30k En->De (the data directory of bench/preprocess.py) for --epochs epochs, batch 64
sentences, Adam 1e-3, validating every epoch and keeping checkpoint_best.pt; OpenNMT-py then
trains the same architecture on the same BPE pieces for the same number of updates,
validating and saving once per nmtkit-epoch worth of updates; its best checkpoint is the one
with the lowest validation perplexity.  Rerunning resumes / skips finished runs.

Phase ``eval``: both translate test2016 with beam 5 and 64 sentences per batch.  nmtkit reads
raw English and writes detokenized German (its checkpoint carries Moses + BPE); OpenNMT reads
the BPE'd English and its output is un-BPE'd and Moses-detokenized here.  Reported: wall time,
sentences/s, target tokens/s (output re-encoded into BPE pieces + </s> by the same pipeline for
both), the same net of start-up (minus a 1-sentence run), and detokenized sacreBLEU.
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import time
from pathlib import Path

import benchlib as bl


def epoch_updates(dest: Path, batch_size: int, epochs: int, seed: int = 1) -> int:
    """Updates nmtkit makes in ``epochs`` epochs (its batches depend only on seed and epoch)."""
    from nmtkit.data.dataset import DataDir, make_batches

    ds = DataDir(dest).load_split("train")
    return sum(len(make_batches(ds.src_sizes, ds.tgt_sizes, None, batch_size, seed=seed, epoch=e)) for e in range(1, epochs + 1))


#: nmtkit systems: save-dir name -> whether it uses --init-scale (else the preset's own init)
NMTKIT_RUNS = {"nmtkit": True, "nmtkit_preset": False}


def nmtkit_train_cmd(args, dest: Path, w: Path, name: str = "nmtkit") -> list:  # noqa: ANN001
    cmd = ["nmtkit-train", dest, "--arch", args.arch, "--batch-size", args.batch_size, "--max-epoch", args.epochs,
           "--optimizer", "adam", "--lr", "0.001", "--save-dir", w / name, "--no-epoch-checkpoints", "--seed", "1",
           "--device", "cpu", "--threads", args.threads, "--log-interval", "100"]
    return cmd + (["--init-scale", args.init_scale] if NMTKIT_RUNS[name] else [])


def nmtkit_done(save: Path, epochs: int) -> bool:
    log = save / "train_log.jsonl"
    if not log.exists():
        return False
    events = [json.loads(l) for l in log.read_text(encoding="utf-8").splitlines() if l.strip()]
    return any(e["event"] == "valid" and e.get("epoch") == epochs for e in events)


def nmtkit_summary(args, w: Path, cmd: list, wall: float | None, name: str = "nmtkit") -> dict:  # noqa: ANN001
    """Best epoch, its validation perplexity, updates and loop time from train_log.jsonl."""
    save = w / name
    events = [json.loads(l) for l in (save / "train_log.jsonl").read_text(encoding="utf-8").splitlines() if l.strip()]
    valids = [e for e in events if e["event"] == "valid" and "valid_ppl" in e]
    best = min(valids, key=lambda e: e["valid_loss"])
    starts = [e for e in events if e["event"] == "start"]
    ends = [e for e in events if e["event"] == "end"]
    info = {"cmd": ("OMP_NUM_THREADS=%d " % args.threads if args.threads else "") + shlex.join(map(str, cmd)),
            "best_epoch": best["epoch"], "best_valid_ppl": best["valid_ppl"],
            "valid_ppl": [e["valid_ppl"] for e in valids], "updates": ends[-1]["update"],
            "train_s": sum(e["time"] for e in ends) - sum(e["time"] for e in starts[: len(ends)]),
            "checkpoint": str(save / "checkpoint_best.pt"), "params": starts[0]["parameters"], "wall": wall}
    (w / f"{name}_train.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def onmt_setup(args, txt: Path, w: Path, updates: int) -> tuple[Path, list, list]:  # noqa: ANN001
    """The OpenNMT-py config (validation + checkpoint every nmtkit-epoch of updates) and commands."""
    onmt = Path(args.peers) / "opennmt" / "bin"
    yaml = bl.onmt_luong_yaml(w / "onmt_luong.yaml", txt, w / "onmt", steps=updates, batch_size=args.batch_size,
                              valid=True, valid_steps=args.per_epoch, save_steps=args.per_epoch, keep=-1,
                              param_init=args.init_scale)
    return yaml, [onmt / "onmt_build_vocab", "-config", yaml, "-n_sample", "-1"], [onmt / "onmt_train", "-config", yaml]


def segment_logs(logs: Path, stem: str) -> list[Path]:
    """Logs of successive runs of one training (first ``stem.log``, then ``stem.2.log`` ...)."""
    found = [logs / f"{stem}.log"] if (logs / f"{stem}.log").exists() else []
    k = 2
    while (logs / f"{stem}.{k}.log").exists():
        found.append(logs / f"{stem}.{k}.log")
        k += 1
    return found


def next_log(logs: Path, stem: str) -> Path:
    n = len(segment_logs(logs, stem))
    return logs / (f"{stem}.log" if n == 0 else f"{stem}.{n + 1}.log")


def onmt_summary(args, w: Path, yaml: Path, vocab_cmd: list, train_cmds: list, updates: int, wall: float | None) -> dict:  # noqa: ANN001
    """Best per-epoch checkpoint by validation perplexity, parameters, loop time from the logs
    (one per run: a run continued with -train_from writes a new log)."""
    parts = [bl.parse_onmt_train_log(p.read_text(encoding="utf-8", errors="replace")) for p in segment_logs(w / "logs", "onmt_train")]
    ppl = [x for p in parts for x in p["valid_ppl"]]
    k = min(range(len(ppl)), key=lambda i: ppl[i])
    prefix = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 " + ("OMP_NUM_THREADS=%d " % args.threads if args.threads else "")
    info = {"cmds": [shlex.join(map(str, vocab_cmd)), *(prefix + shlex.join(map(str, c)) for c in train_cmds)],
            "yaml": yaml.read_text(), "best_step": (k + 1) * args.per_epoch, "best_valid_ppl": ppl[k], "valid_ppl": ppl,
            "updates": updates, "params": parts[0]["params"], "train_s": sum(p["windows"][-1]["sec"] for p in parts if p["windows"]),
            "checkpoint": str(w / "onmt" / f"model_step_{(k + 1) * args.per_epoch}.pt"), "wall": wall}
    (w / "onmt_train.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def onmt_resume_from(out: Path, updates: int) -> Path | None:
    """The latest checkpoint of an earlier, shorter OpenNMT-py run, to continue with -train_from."""
    steps = sorted(int(p.stem.rsplit("_", 1)[1]) for p in out.glob("model_step_*.pt"))
    steps = [s for s in steps if s < updates]
    return out / f"model_step_{steps[-1]}.pt" if steps else None


def fairseq_cmds(args, txt: Path, w: Path, updates: int) -> tuple[list, list]:  # noqa: ANN001
    """fairseq 0.12.2's ``lstm`` with luong_small's shape (2x256 LSTM, emb 256, unidirectional
    encoder; its decoder always feeds attention back and its AttentionLayer is Luong 'general'),
    on the same BPE pieces, batch, optimizer, clip and number of updates; token-normalised
    cross entropy like nmtkit; its own init (U(-0.1, 0.1) embeddings and LSTM weights)."""
    fs = Path(args.peers) / "fairseq" / "bin"
    pre = [fs / "fairseq-preprocess", "--source-lang", "en", "--target-lang", "de", "--trainpref", txt / "train",
           "--validpref", txt / "valid", "--destdir", w / "fairseq-bin", "--workers", "1"]
    train = [fs / "fairseq-train", w / "fairseq-bin", "--cpu", "--seed", "1", "--arch", "lstm", "--encoder-layers", "2",
             "--decoder-layers", "2", "--encoder-embed-dim", "256", "--decoder-embed-dim", "256", "--encoder-hidden-size", "256",
             "--decoder-hidden-size", "256", "--decoder-out-embed-dim", "256", "--decoder-attention", "True", "--dropout", "0.2",
             "--criterion", "cross_entropy", "--optimizer", "adam", "--lr", "0.001", "--clip-norm", "5",
             "--batch-size", args.batch_size, "--max-update", updates, "--save-dir", w / "fairseq", "--no-epoch-checkpoints",
             "--log-format", "simple", "--log-interval", "100", "--num-workers", "0"]
    return pre, train


def fairseq_summary(args, w: Path, cmds: list, wall: float | None) -> dict:  # noqa: ANN001
    """Validation perplexities, parameters and the best checkpoint from fairseq-train's log."""
    text = (w / "logs" / "fairseq_train.log").read_text(encoding="utf-8", errors="replace")
    ppl = [float(x) for x in re.findall(r"valid on 'valid' subset \|.*?\| ppl ([\d.]+)", text)]
    params = re.search(r"num\. (?:shared )?model params: ([\d,]+)", text)
    prefix = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 " + ("OMP_NUM_THREADS=%d " % args.threads if args.threads else "")
    info = {"cmds": [prefix + shlex.join(map(str, c)) for c in cmds], "best_valid_ppl": min(ppl) if ppl else float("nan"),
            "best_epoch": (ppl.index(min(ppl)) + 1) if ppl else None, "valid_ppl": ppl,
            "params": int(params.group(1).replace(",", "")) if params else None, "train_s": wall or 0.0,
            "checkpoint": str(w / "fairseq" / "checkpoint_best.pt"), "wall": wall}
    (w / "fairseq_train.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def train_both(args, dest: Path, txt: Path, w: Path, updates: int) -> tuple[dict, dict]:  # noqa: ANN001
    """Train nmtkit and OpenNMT-py (side by side unless --sequential), and with --preset-init-too
    a second nmtkit model with the preset's own init.  Finished runs are kept; a larger --epochs
    continues them (nmtkit resumes exactly from checkpoint_last.pt, OpenNMT-py continues from its
    last checkpoint with -train_from, its data iterator restarting)."""
    logs = w / "logs"
    env = bl.thread_env(args.threads)
    names = ["nmtkit", "nmtkit_preset"] if args.preset_init_too else ["nmtkit"]
    ncmds = {name: nmtkit_train_cmd(args, dest, w, name) for name in names}
    yaml, vcmd, ocmd = onmt_setup(args, txt, w, updates)
    onmt_json = w / "onmt_train.json"
    onmt_cmds = json.loads(onmt_json.read_text()).get("train_cmds", []) if onmt_json.exists() else []
    jobs = []
    for name in names:
        if not nmtkit_done(w / name, args.epochs):
            jobs.append({"cmd": ncmds[name], "log": next_log(logs, f"{name}_train"), "env": env})
    if not (w / "onmt" / f"model_step_{updates}.pt").exists():
        start = onmt_resume_from(w / "onmt", updates)
        if start is None:
            bl.run_cmd(vcmd, logs / "onmt_vocab.log")
            onmt_cmds = []
        if start is not None and not onmt_cmds:  # continuing a run recorded without its command list
            onmt_cmds = [[str(c) for c in ocmd]]
        cmd = ocmd + (["-train_from", start] if start else [])
        onmt_cmds.append([str(c) for c in cmd])
        jobs.append({"cmd": cmd, "log": next_log(logs, "onmt_train"), "env": {**env, **bl.ONMT_ENV}})
    if jobs:  # which nmtkit trained (a continued run may span commits)
        cpath = w / "train_commits.json"
        commits = json.loads(cpath.read_text()) if cpath.exists() else []
        commits.append(f"{bl.git_commit()} (--epochs {args.epochs}, started {bl.now()})")
        cpath.write_text(json.dumps(commits, indent=1) + "\n")
    fs_pre, fs_train = fairseq_cmds(args, txt, w, updates)
    if args.fairseq and not (w / "fairseq_train.json").exists():
        if not (w / "fairseq-bin" / "dict.en.txt").exists():
            bl.run_cmd(fs_pre, logs / "fairseq_preprocess.log")
        jobs.append({"cmd": fs_train, "log": logs / "fairseq_train.log", "env": {**env, **bl.ONMT_ENV}})
    runs = bl.run_parallel(jobs) if not args.sequential else [bl.run_cmd(**j) for j in jobs]
    walls = {(Path(r.cmd[r.cmd.index("--save-dir") + 1]).name if "--save-dir" in r.cmd else "onmt"): r.wall for r in runs}
    if args.fairseq and not (w / "fairseq_train.json").exists():
        fairseq_summary(args, w, [fs_pre, fs_train], walls.get("fairseq"))
    for name in names[1:]:
        nmtkit_summary(args, w, ncmds[name], walls.get(name), name)
    nk = nmtkit_summary(args, w, ncmds["nmtkit"], walls.get("nmtkit"))
    on = onmt_summary(args, w, yaml, vcmd, onmt_cmds or [ocmd], updates, walls.get("onmt"))
    on["train_cmds"] = onmt_cmds or [[str(c) for c in ocmd]]
    onmt_json.write_text(json.dumps(on, indent=2) + "\n")
    return nk, on


# -- evaluation -------------------------------------------------------------------------------
def unbpe_detok(bpe_out: Path, out: Path, lang: str) -> None:
    """OpenNMT output (BPE pieces) -> detokenized text, the same way nmtkit decodes."""
    from nmtkit.data.text_pipeline import TextPipeline

    pipe = TextPipeline(lang=lang, tokenizer="moses")
    lines = bpe_out.read_text(encoding="utf-8").split("\n")[:-1]
    out.write_text("".join(pipe.decode(l.split()) + "\n" for l in lines), encoding="utf-8")


def target_pieces(hyp: Path, dest: Path) -> int:
    """Output size in the model's own units: BPE pieces (+ </s> per sentence) of the hypotheses."""
    from nmtkit.data.dataset import DataDir

    data = DataDir(dest)
    pipe = data.pipeline(data.tgt_lang)
    lines = hyp.read_text(encoding="utf-8").split("\n")[:-1]
    return sum(len(pipe.encode(l)[1]) + 1 for l in lines)


def bleu(hyp: Path, ref: Path) -> tuple[float, str]:
    from sacrebleu.metrics import BLEU

    h = hyp.read_text(encoding="utf-8").split("\n")[:-1]
    r = ref.read_text(encoding="utf-8").split("\n")[:-1]
    metric = BLEU()
    return metric.corpus_score(h, [r]).score, str(metric.get_signature())


#: nmtkit's fast paths, timed on the same checkpoint as the float32 run: name -> extra flags
#: (the shortlist table is written by the eval phase itself, see ``shortlist_table``)
VARIANTS = {"int8": ["--quantize", "int8"], "shortlist": ["--shortlist", "{table}"],
            "int8+shortlist": ["--quantize", "int8", "--shortlist", "{table}"],
            "bf16": ["--amp", "bf16"], "bf16+shortlist": ["--amp", "bf16", "--shortlist", "{table}"]}


def shortlist_table(args, dest: Path, ckpt: str, ev: Path, logs: Path) -> Path:  # noqa: ANN001
    """The lexical table for --shortlist: nmtkit-align forced-decodes the training split with the
    model itself and keeps the top --shortlist-k targets per source word (not timed)."""
    table = ev / f"lex.top{args.shortlist_k}.txt"
    if not table.exists():
        bl.run_cmd(["nmtkit-align", "--path", ckpt, "--data", dest, "--split", "train", "--max-tokens", "8000",
                    "--device", "cpu", "--build-dict", table, "--dict-top-k", args.shortlist_k, "-o", ev / "train.align"],
                   logs / "shortlist_table.log")
    return table


def fairseq_hyps(raw: Path, out: Path) -> None:
    """fairseq-interactive's ``H-i<TAB>score<TAB>pieces`` lines, in input order."""
    hyps = {}
    for line in raw.read_text(encoding="utf-8").split("\n"):
        if line.startswith("H-"):
            k, _, text = line.split("\t", 2)
            hyps[int(k[2:])] = text
    out.write_text("".join(hyps.get(i, "") + "\n" for i in range(len(hyps))), encoding="utf-8")


def evaluate(args, dest: Path, txt: Path, w: Path, nks: dict[str, dict], on: dict, fs: dict | None) -> tuple[str, list[str], list[dict]]:  # noqa: ANN001
    """Translate test2016 with every system (runs alternate between systems), score, tabulate.
    Returns the RESULTS.md body, the commands and one results.jsonl record per nmtkit system."""
    ev = w / f"eval-t{args.threads}"
    logs = w / "logs"
    ev.mkdir(exist_ok=True)
    src = Path(f"{bl.raw_prefix(args.data, 'test')}.en")
    ref = Path(f"{bl.raw_prefix(args.data, 'test')}.de")
    one_raw, one_bpe = ev / "one.en", ev / "one.bpe.en"
    one_raw.write_text(src.read_text(encoding="utf-8").split("\n")[0] + "\n", encoding="utf-8")
    one_bpe.write_text((txt / "test.en").read_text(encoding="utf-8").split("\n")[0] + "\n", encoding="utf-8")
    n_sent = bl.count_lines(src)
    onmt = Path(args.peers) / "opennmt" / "bin" / "onmt_translate"
    fs_bin = Path(args.peers) / "fairseq" / "bin" / "fairseq-interactive"
    env = bl.thread_env(args.threads)
    peer_env = {**env, **bl.ONMT_ENV}
    variants = [v for v in args.variants.split(",") if v]
    table = shortlist_table(args, dest, nks["nmtkit"]["checkpoint"], w, logs) if any("shortlist" in v for v in variants) else None

    # system name -> (checkpoint info, extra nmtkit flags)
    nmt_systems = {name: (nks[name], []) for name in nks}
    for v in variants:
        nmt_systems[f"nmtkit+{v}"] = (nks["nmtkit"], [str(table) if a == "{table}" else a for a in VARIANTS[v]])

    def nmt_cmd(name: str) -> list:
        return ["nmtkit-translate", "--path", nmt_systems[name][0]["checkpoint"], "--beam", args.beam, "--batch-size",
                args.batch_size, "--device", "cpu", "--threads", args.threads, *nmt_systems[name][1]]

    def onmt_cmd(inp: Path, outp: Path) -> list:
        return [onmt, "-model", on["checkpoint"], "-src", inp, "-output", outp, "-beam_size", args.beam,
                "-batch_size", args.batch_size, "-gpu", "-1", "-report_time"]

    def fairseq_cmd(inp: Path) -> list:
        return [fs_bin, w / "fairseq-bin", "--path", fs["checkpoint"], "--source-lang", "en", "--target-lang", "de", "--cpu",
                "--beam", args.beam, "--batch-size", args.batch_size, "--buffer-size", 1024, "--input", inp]

    def run_system(name: str, k: int | str, one: bool) -> bl.Run:
        tag = "one" if one else k
        if name == "onmt":
            return bl.run_cmd(onmt_cmd(one_bpe if one else txt / "test.en", ev / ("one.onmt.de" if one else "hyp.onmt.bpe.de")),
                              logs / f"onmt_translate.t{args.threads}.{tag}.log", env=peer_env)
        if name == "fairseq":
            return bl.run_cmd(fairseq_cmd(one_bpe if one else txt / "test.en"), logs / f"fairseq_interactive.t{args.threads}.{tag}.log",
                              stdout=ev / ("one.fairseq.out" if one else "fairseq.out"), env=peer_env)
        return bl.run_cmd(nmt_cmd(name), logs / f"{name}_translate.t{args.threads}.{tag}.log", stdin=one_raw if one else src,
                          stdout=ev / (f"one.{name}.de" if one else f"hyp.{name}.de"), env=env)

    systems = [*nmt_systems, "onmt"] + (["fairseq"] if fs else [])
    res: dict[str, list[bl.Run]] = {name: [] for name in systems}
    for k in range(args.repeat):  # alternate the systems so all see similar load
        for name in systems:
            res[name].append(run_system(name, k, one=False))
    ones = {name: run_system(name, "one", one=True) for name in systems}
    t0 = time.perf_counter()
    unbpe_detok(ev / "hyp.onmt.bpe.de", ev / "hyp.onmt.de", "de")
    post_s = time.perf_counter() - t0
    if fs:
        fairseq_hyps(ev / "fairseq.out", ev / "hyp.fairseq.bpe.de")
        unbpe_detok(ev / "hyp.fairseq.bpe.de", ev / "hyp.fairseq.de", "de")
    # the peers' own text processing around onmt_translate, timed as CLI steps
    codes = dest / json.loads((dest / "meta.json").read_text())["bpe"]["codes"]["en"]
    pre_tok = bl.run_cmd(["sacremoses", "-q", "-l", "en", "tokenize"], logs / "pre_tok.log", stdin=src, stdout=ev / "test.tok.en")
    pre_bpe = bl.run_cmd(["subword-nmt", "apply-bpe", "-c", codes, "-i", ev / "test.tok.en", "-o", ev / "test.bpe.en"], logs / "pre_bpe.log")
    post_sed = bl.run_cmd(["sed", "-r", "s/(@@ )|(@@ ?$)//g", ev / "hyp.onmt.bpe.de"], logs / "post_sed.log", stdout=ev / "hyp.onmt.tok.de")
    post_detok = bl.run_cmd(["sacremoses", "-q", "-l", "de", "detokenize"], logs / "post_detok.log", stdin=ev / "hyp.onmt.tok.de", stdout=ev / "hyp.onmt.cli.de")
    text_s = pre_tok.wall + pre_bpe.wall + post_sed.wall + post_detok.wall

    init = f"init U(-{args.init_scale:g},{args.init_scale:g})"
    labels = {"nmtkit": f"nmtkit {args.arch}, {init}", "nmtkit_preset": f"nmtkit {args.arch}, preset init (torch default)",
              "onmt": f"OpenNMT-py same model, {init}", "fairseq": "fairseq `lstm` same shape, its own init",
              **{f"nmtkit+{v}": f"nmtkit {args.arch}, {init}, {' + '.join('--quantize int8' if p == 'int8' else f'--shortlist (k {args.shortlist_k})' for p in v.split('+'))}"
                 for v in variants}}
    infos = {**{name: spec[0] for name, spec in nmt_systems.items()}, "onmt": on, **({"fairseq": fs} if fs else {})}
    stats: dict[str, dict] = {}
    rows = []
    for name in systems:
        r = min(res[name], key=lambda x: x.wall)
        one = ones[name]
        hyp = ev / f"hyp.{name}.de"
        score, sig = bleu(hyp, ref)
        st = {"run": r, "one": one, "toks": target_pieces(hyp, dest), "net": r.wall - one.wall, "net_cpu": r.cpu - one.cpu,
              "bleu": score, "sig": sig}
        stats[name] = st
        info = infos[name]
        best = f"step {info['best_step']}" if name == "onmt" else f"epoch {info['best_epoch']}"
        rows.append([f"{labels[name]} ({best})", f"{info['best_valid_ppl']:.2f}", f"{score:.2f}", f"{r.wall:.1f}", f"{n_sent / r.wall:.1f}",
                     f"{st['toks'] / r.wall:,.0f}", f"{n_sent / st['net']:.1f}", f"{r.cpu:.1f}", f"{n_sent / st['net_cpu']:.1f}",
                     f"{st['toks'] / st['net_cpu']:,.0f}", f"{one.wall:.1f} / {one.cpu:.1f}", f"{r.maxrss_mb:.0f}"])
    head = ["system (best checkpoint)", "valid ppl", "BLEU test2016", "wall s", "sent/s", "tgt tok/s", "net sent/s", "CPU s",
            "net sent per CPU s", "net tgt tok per CPU s", "1-sentence run wall / CPU s", "peak RSS MB"]
    onmt_self = re.search(r"Total translation time \(s\):\s*([\d.]+)", res["onmt"][0].log.read_text())
    nk_self = res["nmtkit"][0].log.read_text().strip().splitlines()
    n, o, nk = stats["nmtkit"], stats["onmt"], nks["nmtkit"]
    trained = [name for name in systems if name in nks or name in ("onmt", "fairseq")]
    train = "; ".join(f"{labels[name]}: {infos[name]['train_s'] / 60:.1f} min {'of wall time' if name == 'fairseq' else 'in its training loop'}, "
                      f"{infos[name]['params'] or 0:,} parameters, valid ppl per epoch "
                      + ", ".join(f"{p:.1f}" for p in infos[name]["valid_ppl"]) for name in trained)
    tok_list = ", ".join(f"{name} {stats[name]['toks']:,}" for name in systems)
    ratio_lines = "".join(
        f"- {name} / OpenNMT-py (sentences/s): wall {bl.ratio(n_sent / stats[name]['run'].wall, n_sent / o['run'].wall)}, "
        f"net of start-up {bl.ratio(n_sent / stats[name]['net'], n_sent / o['net'])}"
        + (f"; / fairseq-interactive: wall {bl.ratio(n_sent / stats[name]['run'].wall, n_sent / stats['fairseq']['run'].wall)}, "
           f"net {bl.ratio(n_sent / stats[name]['net'], n_sent / stats['fairseq']['net'])}" if fs else "")
        + f"; BLEU {stats[name]['bleu']:.2f} (float32 {n['bleu']:.2f}, {stats[name]['bleu'] - n['bleu']:+.2f})\n"
        for name in nmt_systems)
    body = (
        f"Multi30k En->De test2016 ({n_sent} sentences), beam {args.beam}, batch {args.batch_size} sentences, CPU, torch threads "
        f"{args.threads or 'default'} ({bl.gpu_line()}); fastest of {args.repeat} run(s) per system, the systems alternating. "
        f"Models: `{args.arch}` architecture (2x256 LSTM, emb 256, global general attention, input feeding, dropout 0.2), "
        f"{nk['updates']} updates ({args.epochs} nmtkit epochs) of 64 sentences, Adam 1e-3, clip 5, trained side by side; best "
        f"checkpoint by validation perplexity (OpenNMT-py validated and saved every {args.per_epoch} updates). Training: {train}.\n\n"
        + bl.md_table(head, rows)
        + "\n\n" + ratio_lines +
        f"- \"net\" = the {n_sent:,}-sentence run minus a 1-sentence run (interpreter, imports, checkpoint loading).\n"
        f"- nmtkit's time includes its own Moses tokenization + BPE + detokenization; OpenNMT-py and fairseq read BPE'd text. The same "
        f"text processing as CLI steps (sacremoses tokenize, subword-nmt apply-bpe, sed, sacremoses detokenize) adds "
        f"{text_s:.1f} s wall to OpenNMT-py's {o['run'].wall:.1f} s.\n"
        f"- OpenNMT-py's own report: total translation time {onmt_self.group(1) if onmt_self else '?'} s; "
        f"nmtkit's own summary: `{nk_self[-1] if nk_self else ''}`.\n"
        f"- shortlist: `--shortlist {table.name if table else '-'} --shortlist-k {args.shortlist_k}` (100 most frequent target pieces "
        f"always in), the table written by `nmtkit-align --build-dict --dict-top-k {args.shortlist_k}` on the training split with the "
        f"same model (not timed).\n"
        f"- target tokens = BPE pieces of the detokenized output re-encoded by the model's pipeline, + </s> per sentence "
        f"({tok_list}). OpenNMT-py defaults: length_penalty avg "
        f"(score/length, like nmtkit's --lenpen 1.0), max_length_ratio 1.25 (nmtkit: 1.5 x source + 10); fairseq: no length "
        f"normalisation switch needed (it divides by length by default, lenpen 1).\n"
        f"- init: OpenNMT-py 3.5.1 can only init U(-x, x) (param_init) or glorot, so the like-for-like pair uses "
        f"U(-{args.init_scale:g}, {args.init_scale:g}) (`--init-scale {args.init_scale:g}` for nmtkit).\n"
        f"- BLEU: sacreBLEU on detokenized output vs raw test2016.de, `{n['sig']}`.\n"
    )
    cmds = [*(shlex.join(map(str, nmt_cmd(name))) + f" < {src} > {ev}/hyp.{name}.de" for name in nmt_systems),
            "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 " + shlex.join(map(str, onmt_cmd(txt / "test.en", ev / "hyp.onmt.bpe.de"))),
            *(["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 " + shlex.join(map(str, fairseq_cmd(txt / "test.en"))) + f" > {ev}/fairseq.out"] if fs else []),
            pre_tok.shell(str(src), f"{ev}/test.tok.en"), pre_bpe.shell(), post_sed.shell(stdout=f"{ev}/hyp.onmt.tok.de"),
            post_detok.shell(f"{ev}/hyp.onmt.tok.de", f"{ev}/hyp.onmt.cli.de")]
    if args.threads:
        cmds = [f"OMP_NUM_THREADS={args.threads} " + c if c.startswith(("nmtkit", "TORCH")) else c for c in cmds]
    print(f"(in-process un-BPE + detokenize of the OpenNMT output: {post_s:.1f} s)")
    records = []
    for name in nmt_systems:
        st = stats[name]
        rec = {"system": name, "arch": args.arch, "threads": args.threads, "beam": args.beam, "batch_size": args.batch_size,
               "nmtkit_sent_s": round(n_sent / st["run"].wall, 2), "peer_sent_s": round(n_sent / o["run"].wall, 2),
               "ratio_vs_opennmt": round(o["run"].wall / st["run"].wall, 3), "ratio_vs_opennmt_net": round(o["net"] / st["net"], 3),
               "bleu": round(st["bleu"], 2), "bleu_fp32": round(n["bleu"], 2), "bleu_opennmt": round(o["bleu"], 2),
               "peak_rss_mb": round(st["run"].maxrss_mb), "peer_peak_rss_mb": round(o["run"].maxrss_mb),
               "measure": "sentences/s of the whole command (start-up included), fastest of --repeat"}
        if fs:
            f = stats["fairseq"]
            rec.update(fairseq_sent_s=round(n_sent / f["run"].wall, 2), ratio_vs_fairseq=round(f["run"].wall / st["run"].wall, 3),
                       ratio_vs_fairseq_net=round(f["net"] / st["net"], 3), bleu_fairseq=round(f["bleu"], 2))
        records.append(rec)
    return body, cmds, records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_common_args(ap)
    ap.add_argument("--phase", choices=["train", "eval", "all"], default="all")
    ap.add_argument("--arch", default="luong_small")
    ap.add_argument("--epochs", type=int, default=4, help="nmtkit epochs; OpenNMT-py gets the same number of updates (default: %(default)s)")
    ap.add_argument("--batch-size", type=int, default=64, help="training and translation batch, sentences (default: %(default)s)")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=2, help="translation runs per toolkit, fastest kept (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of every command, via OMP_NUM_THREADS (and nmtkit "
                    "--threads); 1 suits a shared 2-core machine, 0 = torch default (default: %(default)s)")
    ap.add_argument("--init-scale", type=float, default=0.1, help="uniform init U(-x, x) for both toolkits: OpenNMT-py's "
                    "param_init (its default; it cannot do torch's default init) and nmtkit's --init-scale (default: %(default)s)")
    ap.add_argument("--preset-init-too", action="store_true", help="also train (and evaluate) nmtkit with the preset's own "
                    "init (luong_small: torch's default), which OpenNMT-py cannot match")
    ap.add_argument("--no-fairseq", dest="fairseq", action="store_false", help="leave fairseq's lstm out (default: train it "
                    "too, side by side, and time fairseq-interactive)")
    ap.add_argument("--variants", default="int8,shortlist,int8+shortlist,bf16", help="nmtkit fast paths timed on the same checkpoint, "
                    f"comma-separated, of {','.join(VARIANTS)} (default: %(default)s; '' for none)")
    ap.add_argument("--shortlist-k", type=int, default=50, help="translations per source word in the shortlist table (default: %(default)s)")
    ap.add_argument("--sequential", action="store_true", help="train the two toolkits one after the other instead of side by side")
    ap.add_argument("--fresh", action="store_true", help="delete earlier training runs of this script first")
    args = ap.parse_args()

    work = Path(args.work)
    bl.check_outside_repo(work)
    dest, txt = bl.need_step1(work)
    w = work / "translate"
    if args.fresh:
        shutil.rmtree(w, ignore_errors=True)
    (w / "logs").mkdir(parents=True, exist_ok=True)
    load_before = bl.uptime_line()
    print(load_before)
    updates = epoch_updates(dest, args.batch_size, args.epochs)
    args.per_epoch = epoch_updates(dest, args.batch_size, 1)
    if args.phase in ("train", "all"):
        nk, on = train_both(args, dest, txt, w, updates)
        print(json.dumps({"nmtkit": nk, "onmt": {k: v for k, v in on.items() if k != "yaml"}}, indent=2))
    if args.phase in ("eval", "all"):
        nks = {name: json.loads((w / f"{name}_train.json").read_text()) for name in NMTKIT_RUNS if (w / f"{name}_train.json").exists()}
        on = json.loads((w / "onmt_train.json").read_text()) if (w / "onmt_train.json").exists() else None
        if "nmtkit" not in nks or on is None:
            raise SystemExit("no finished training runs: run with --phase train first")
        nk = nks["nmtkit"]
        if nk["updates"] != updates:
            print(f"note: nmtkit trained {nk['updates']} updates, --epochs {args.epochs} would be {updates}")
        fs = json.loads((w / "fairseq_train.json").read_text()) if args.fairseq and (w / "fairseq_train.json").exists() else None
        if args.fairseq and fs is None:
            raise SystemExit("no finished fairseq training run: run with --phase train first (or --no-fairseq)")
        body, cmds, records = evaluate(args, dest, txt, w, nks, on, fs)
        load_after = bl.uptime_line()
        print("\n" + body)
        if args.record:
            cpath = w / "train_commits.json"
            commits = json.loads(cpath.read_text()) if cpath.exists() else []
            body += f"- nmtkit commits the models were trained with: {'; '.join(commits) or 'not recorded'}.\n"
            train_cmds = [*(info["cmd"] for info in nks.values()), *on["cmds"], "# OpenNMT-py config:", *("#   " + l for l in on["yaml"].splitlines() if not l.startswith("#")),
                          *(fs["cmds"] if fs else [])]
            software = bl.software_line({"OpenNMT-py": (str(Path(args.peers) / "opennmt/bin/python"), "OpenNMT-py"),
                                        **({"fairseq": (str(Path(args.peers) / "fairseq/bin/python"), "fairseq")} if fs else {})})
            bl.append_results(bl.section(f"translate: {args.arch} vs OpenNMT-py, test2016 beam {args.beam}", bl.machine_info(),
                                         load_before, load_after, software, body, train_cmds + cmds))
            bl.append_jsonl(records, {"bench": "translate_speed", "load": {"before": load_before, "after": load_after}})


if __name__ == "__main__":
    main()
