#!/usr/bin/env python3
"""Quality per CPU-hour: every toolkit trains for the same wall time on one core, then test2016.

Systems (``--systems``, any subset, run side by side, one core each, pinned with ``taskset``):

* ``nmtkit-fp32``, ``nmtkit-bf16``: ``luong_m30k`` (2x256 LSTM decoder, general attention, input
  feeding, tied embeddings, dropout 0.2) with a bidirectional encoder of 256 units per direction
  (``--encoder-hidden-size 256``, fairseq's ``lstm`` shape), Adam 2e-3 held, then annealed linearly
  to 0 over the last fifth of the hour (``--lr-schedule anneal``), label smoothing 0.1 and a weight
  average (``--ema-decay 0.999``), in float32 or bf16 autocast.  Chosen on valid BLEU:

  - the weight average: in a 25-minute A/B on one core each (bf16, plateau on loss) it led by
    about 1 valid BLEU from epoch 3 on;
  - the anneal: with the weight average the valid loss kept falling, so the plateau schedule
    never shrank the lr in the hour (best greedy valid BLEU 38.30 at 6761d4d, 37 epochs of slower
    code); annealed over the last 20 %, 38.90 (bf16, 42 epochs);
  - the wider encoder: in the same 1-hour A/B (bf16, annealed, side by side), 39.07 with 256
    units per direction (32 epochs) against 38.90 with 128 (CHANGELOG);
  - dropout 0.2 instead of the preset's 0.3: on this project's later, slower host (Zen 4, about
    half the float32 rate of the first; 17 epochs in the hour instead of 32-42), a 1-hour bf16
    A/B side by side, one core each, at 9dacd39: greedy valid BLEU 38.4 against 37.8 at the end,
    ahead at every one of the last epochs (valid loss 1.81 against 1.90 at epoch 16). Fewer epochs
    want less regularization;
* ``opennmt``: OpenNMT-py 3.5.1's closest RNN recipe at the same shape (brnn encoder, 2 layers,
  256, general attention, input feeding, bridge, dropout 0.3, Adam 2e-3, label smoothing 0.1);
* ``marian``: Marian 1.12 ``--type s2s`` (biGRU encoder, conditional-GRU decoder, the layout of
  its Nematus-style examples: layer normalization, RNN/word dropout, exponential smoothing) at
  256/256 with tied embeddings, Adam 1e-3, label smoothing 0.1;
* ``fairseq``: fairseq 0.12.2 ``lstm`` at the same shape (bidirectional 2-layer encoder, 2x256
  decoder, shared embeddings, dropout 0.3, Adam 2e-3 with reduce-on-plateau, label smoothing 0.1).

All train on the same BPE pieces (the recipe's Moses tokens and joint BPE, 8,000 merges, exported
from nmtkit's data directory), 64 sentences per batch, and save a checkpoint about once per epoch
(every ``ceil(pairs / 64)`` updates where a toolkit counts updates).  Training stops after
``--hours`` of wall time (nmtkit and fairseq stop by themselves; OpenNMT-py and Marian get SIGTERM).

Then, for every system, the same evaluation with the toolkit's own decoder, one core each:
greedy valid BLEU of every checkpoint (cased, detokenized sacreBLEU), the checkpoint with the best
valid BLEU translates test2016 with beam 5 and batch 64, scored with BLEU and chrF.  The training
wall time of a checkpoint is its file time less the start of training.  Tune on valid only.

Phases: ``train`` (then ``eval``) for ``--systems``; ``report`` draws ``bench/quality_per_hour.png``
from every system evaluated so far and, with ``--record``, writes RESULTS.md and results.jsonl.
``--recorded-since DATE`` also draws, dashed, the newest record of each system not in WORK written on
or after DATE (for a WORK that re-ran only some systems; the reporter says from when the records are
comparable: one host ran the same training at half the other's speed).

    python bench/quality_per_hour.py --work /root/qph --systems nmtkit-bf16 marian --hours 1
    python bench/quality_per_hour.py --work /root/qph --phase report --record [--recorded-since 2026-11-25]
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import benchlib as bl

SYSTEMS = ("nmtkit-fp32", "nmtkit-bf16", "opennmt", "marian", "fairseq")
BATCH = 64
PICTURE = bl.REPO / "bench" / "quality_per_hour.png"


# -- data ---------------------------------------------------------------------------------------
def prepare(args: argparse.Namespace, work: Path) -> tuple[Path, Path]:
    """The recipe's nmtkit data directory and a plain-text copy of its BPE pieces for the peers."""
    from preprocess import export_bpe_text

    dest, txt = work / "data", work / "bpe"
    if not (dest / "meta.json").is_file():
        raw = {s: bl.raw_prefix(args.data, s) for s in bl.SPLITS}
        bl.run_cmd(["nmtkit-preprocess", "-s", "en", "-t", "de", "--trainpref", raw["train"], "--validpref", raw["valid"],
                    "--testpref", raw["test"], "--destdir", dest, "--tokenizer", "moses", "--bpe", "subword-nmt",
                    "--bpe-merges", "8000", "--joined-dictionary", "--workers", "2"], work / "preprocess.log")
    if not (txt / "test.de").is_file():
        export_bpe_text(dest, txt)
    for split in ("valid", "test"):
        got, want = bl.count_lines(txt / f"{split}.en"), bl.count_lines(Path(f"{bl.raw_prefix(args.data, split)}.en"))
        if got != want:
            sys.exit(f"{txt / f'{split}.en'}: {got} lines, the raw file has {want}")
    return dest, txt


def updates_per_epoch(txt: Path) -> int:
    return -(-bl.count_lines(txt / "train.en") // BATCH)


# -- one toolkit each ---------------------------------------------------------------------------
def peer_bin(args: argparse.Namespace, venv: str, tool: str) -> Path:
    return Path(args.peers) / venv / "bin" / tool


def onmt_yaml(path: Path, txt: Path, out: Path, per_epoch: int) -> Path:
    """OpenNMT-py's RNN recipe at luong_m30k's shape (see the module docstring)."""
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"""# written by bench/quality_per_hour.py
save_data: {out}/data
src_vocab: {out}/vocab.en
tgt_vocab: {out}/vocab.de
overwrite: true
seed: 1
data:
  corpus_1:
    path_src: {txt}/train.en
    path_tgt: {txt}/train.de
  valid:
    path_src: {txt}/valid.en
    path_tgt: {txt}/valid.de
model_type: text
encoder_type: brnn
decoder_type: rnn
rnn_type: LSTM
enc_layers: 2
dec_layers: 2
word_vec_size: 256
hidden_size: 256
global_attention: general
input_feed: 1
bridge: true
dropout: [0.3]
param_init: 0.1
world_size: 1
gpu_ranks: []
batch_type: sents
batch_size: {BATCH}
valid_batch_size: {BATCH}
normalization: tokens
optim: adam
learning_rate: 0.002
label_smoothing: 0.1
max_grad_norm: 5
train_steps: 1000000
valid_steps: {per_epoch}
save_checkpoint_steps: {per_epoch}
keep_checkpoint: -1
report_every: 100
save_model: {out}/model
""",
        encoding="utf-8",
    )
    return path


def train_plan(args: argparse.Namespace, system: str, dest: Path, txt: Path, w: Path) -> tuple[list[list], dict, bool]:
    """(setup commands, then the training command), extra environment, and whether the training
    command must be stopped with SIGTERM at the deadline (it has no wall-time limit of its own)."""
    per_epoch = updates_per_epoch(txt)
    if system.startswith("nmtkit"):
        amp = "bf16" if system.endswith("bf16") else "none"
        return [["nmtkit-train", dest, "--arch", "luong_m30k", "--save-dir", w / "ckpt", "--seed", "1", "--threads", "1",
                 "--amp", amp, "--batch-size", BATCH, "--label-smoothing", "0.1", "--max-epoch", "100",
                 "--ema-decay", "0.999", "--lr-schedule", "anneal", "--anneal-fraction", "0.2",
                 "--encoder-hidden-size", "256", "--dropout", "0.2", "--stop-time-hours", args.hours]], {}, False
    if system == "opennmt":
        yaml = onmt_yaml(w / "onmt.yaml", txt, w / "ckpt", per_epoch)
        return [[peer_bin(args, "opennmt", "onmt_build_vocab"), "-config", yaml, "-n_sample", "-1"],
                [peer_bin(args, "opennmt", "onmt_train"), "-config", yaml]], bl.ONMT_ENV, True
    if system == "marian":
        (w / "ckpt").mkdir(parents=True, exist_ok=True)
        return [[peer_bin(args, "marian", "pymarian"), "--type", "s2s", "--enc-type", "bidirectional", "--enc-cell", "gru",
                 "--dec-cell", "gru", "--dim-emb", 256, "--dim-rnn", 256, "--tied-embeddings-all", "--layer-normalization",
                 "--dropout-rnn", 0.2, "--dropout-src", 0.1, "--dropout-trg", 0.1, "--label-smoothing", 0.1,
                 "--exponential-smoothing", "--learn-rate", 0.001, "--clip-norm", 5, "--train-sets", txt / "train.en", txt / "train.de",
                 "--vocabs", w / "vocab.yml", w / "vocab.yml", "--cpu-threads", 1, "--mini-batch", BATCH, "--maxi-batch", 100,
                 "--max-length", 100, "--save-freq", f"{per_epoch}u", "--disp-freq", "100u", "--valid-freq", "1000000u",
                 "--model", w / "ckpt" / "model.npz", "--seed", 1, "--sigterm", "save-and-exit", "--log", w / "marian_train.log"]], {}, True
    if system == "fairseq":
        fs = "fairseq"
        return [[peer_bin(args, fs, "fairseq-preprocess"), "--source-lang", "en", "--target-lang", "de", "--trainpref", txt / "train",
                 "--validpref", txt / "valid", "--destdir", w / "bin", "--joined-dictionary", "--workers", "1"],
                [peer_bin(args, fs, "fairseq-train"), w / "bin", "--cpu", "--seed", "1", "--arch", "lstm", "--encoder-layers", "2",
                 "--decoder-layers", "2", "--encoder-bidirectional", "--encoder-embed-dim", "256", "--decoder-embed-dim", "256",
                 "--encoder-hidden-size", "256", "--decoder-hidden-size", "256", "--decoder-out-embed-dim", "256",
                 "--share-all-embeddings", "--dropout", "0.3", "--criterion", "label_smoothed_cross_entropy",
                 "--label-smoothing", "0.1", "--optimizer", "adam", "--lr", "0.002", "--clip-norm", "5",
                 "--lr-scheduler", "reduce_lr_on_plateau", "--lr-shrink", "0.5", "--batch-size", BATCH, "--max-epoch", "100",
                 "--stop-time-hours", args.hours, "--save-dir", w / "ckpt", "--log-format", "simple", "--log-interval", "100",
                 "--num-workers", "0"]], bl.ONMT_ENV, False
    raise ValueError(system)


def train_one(args: argparse.Namespace, system: str, core: int, dest: Path, txt: Path, work: Path) -> dict:
    """Train one system on one core for --hours; returns what eval and report need."""
    w = work / system
    done = w / "train.json"
    if done.is_file():
        return json.loads(done.read_text())
    w.mkdir(parents=True, exist_ok=True)
    cmds, env, kill = train_plan(args, system, dest, txt, w)
    env = {**env, **bl.thread_env(1)}
    pin = ["taskset", "-c", str(core)]
    for k, cmd in enumerate(cmds[:-1]):
        bl.run_cmd(pin + cmd, w / f"setup{k}.log", env=env)
    cmd = [str(c) for c in pin + cmds[-1]]
    print(f"$ {shlex.join(cmd)}", flush=True)
    start = time.time()
    with open(w / "train.log", "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env})
        deadline, stopped = start + args.hours * 3600, False
        while proc.poll() is None:
            if kill and time.time() >= deadline:
                proc.send_signal(signal.SIGTERM)
                stopped = True
                try:
                    proc.wait(timeout=300)
                except subprocess.TimeoutExpired:
                    proc.kill()
                break
            time.sleep(1)
    wall = time.time() - start
    info = {"system": system, "start": start, "train_wall_s": wall, "rc": proc.wait(), "core": core,
            "cmds": [shlex.join(map(str, c)) for c in cmds], "env": env, "commit": bl.git_commit(),
            "hours": args.hours, "cpu": bl.cpu_model()}
    if info["rc"] != 0 and not (stopped and info["rc"] in (-signal.SIGTERM, 143)):  # a crash, not our deadline
        sys.exit(f"{system}: training failed with status {info['rc']}; see {w / 'train.log'}")
    done.write_text(json.dumps(info, indent=2) + "\n")
    return info


# -- evaluation ---------------------------------------------------------------------------------
def checkpoints(system: str, w: Path) -> list[tuple[str, Path]]:
    """Every saved checkpoint of a run, oldest first (label, path)."""
    ck = w / "ckpt"
    if system.startswith("nmtkit") or system == "fairseq":
        found = [(p.stem.removeprefix("checkpoint"), p) for p in ck.glob("checkpoint[0-9]*.pt")]
        found.sort(key=lambda t: int(t[0]))
        last = ck / "checkpoint_last.pt"
        if last.is_file() and (not found or last.stat().st_mtime > found[-1][1].stat().st_mtime + 1):
            found.append(("last", last))
        return found
    if system == "opennmt":
        found = [(p.stem.rsplit("_", 1)[1], p) for p in ck.glob("model_step_*.pt")]
        return sorted(found, key=lambda t: int(t[0]))
    if system == "marian":
        found = [(p.stem.split(".iter")[1], p) for p in ck.glob("model.iter*.npz")]
        found.sort(key=lambda t: int(t[0]))
        final = ck / "model.npz"
        if final.is_file() and (not found or final.stat().st_mtime > found[-1][1].stat().st_mtime + 1):
            found.append(("final", final))
        return found
    raise ValueError(system)


def decode_cmd(args: argparse.Namespace, system: str, ckpt: Path, w: Path, beam: int, threads: int = 1,
               extra: tuple = (), files: tuple = ("/dev/stdin", "/dev/stdout")) -> tuple[list, dict, bool]:
    """(command reading the source on stdin and writing to stdout, environment, whether it reads and
    writes BPE pieces).  OpenNMT-py reads and writes the ``files`` (source, output) instead: its
    ``-output /dev/stdout`` would truncate a redirected stdout under its own timing line."""
    env = bl.thread_env(threads)
    if system.startswith("nmtkit"):
        return [bl.nmtkit_bin("nmtkit-translate"), "--path", ckpt, "--beam", beam, "--batch-size", BATCH, "--threads", threads,
                "--device", "cpu", *extra], env, False
    if system == "opennmt":
        return [peer_bin(args, "opennmt", "onmt_translate"), "-model", ckpt, "-src", files[0], "-output", files[1],
                "-beam_size", beam, "-batch_size", BATCH, "-gpu", "-1", *extra], {**env, **bl.ONMT_ENV}, True
    if system == "marian":
        vocab = w / "vocab.yml"
        return [peer_bin(args, "marian", "pymarian"), "decode", "-m", ckpt, "-v", vocab, vocab, "--cpu-threads", threads,
                "--beam-size", beam, "--mini-batch", BATCH, "--maxi-batch", 100, "--maxi-batch-sort", "src", "--quiet", *extra], env, True
    if system == "fairseq":
        cmd = [peer_bin(args, "fairseq", "fairseq-interactive"), w / "bin", "--path", ckpt, "--source-lang", "en",
               "--target-lang", "de", "--cpu", "--beam", beam, "--batch-size", BATCH, "--buffer-size", 2000, *extra]
        return cmd, {**env, **bl.ONMT_ENV}, True
    raise ValueError(system)


def sources(args: argparse.Namespace, split: str, txt: Path) -> dict[bool, Path]:
    """A split's source side: raw text (False) for nmtkit, BPE pieces (True) for the peers."""
    return {False: Path(f"{bl.raw_prefix(args.data, split)}.en"), True: txt / f"{split}.en"}


def translate(args: argparse.Namespace, system: str, ckpt: Path, source: dict[bool, Path], beam: int, w: Path, out: Path,
              threads: int = 1, extra: tuple = (), core: int | None = None) -> bl.Run:
    """Translate ``source`` (see ``sources``) into detokenized text ``out``; returns the timed run
    (the command alone: turning a peer's pieces into text afterwards is not timed)."""
    from translate import fairseq_hyps, unbpe_detok

    raw_out = out.with_suffix(".raw")
    src = source[not system.startswith("nmtkit")]  # the peers read and write BPE pieces
    cmd, env, pieces = decode_cmd(args, system, ckpt, w, beam, threads, extra, files=(src, raw_out))
    pin = ["taskset", "-c", str(core)] if core is not None else []
    to_file = system == "opennmt"  # writes raw_out itself
    run = bl.run_cmd(pin + cmd, out.with_suffix(".log"), stdin=None if to_file else src, stdout=None if to_file else raw_out,
                     env=env, quiet=True)
    if system == "fairseq":
        fairseq_hyps(raw_out, raw_out)
    if pieces:
        unbpe_detok(raw_out, out, "de")
    else:
        raw_out.replace(out)
    n, want = bl.count_lines(out), bl.count_lines(src)
    if n != want:
        sys.exit(f"{system}: {out} has {n} lines for {want} source lines")
    return run


def scores(hyp: Path, ref: Path) -> dict:
    from sacrebleu.metrics import BLEU, CHRF

    h = hyp.read_text(encoding="utf-8").split("\n")[:-1]
    r = ref.read_text(encoding="utf-8").split("\n")[:-1]
    b, c = BLEU(), CHRF()
    return {"bleu": round(b.corpus_score(h, [r]).score, 2), "chrf": round(c.corpus_score(h, [r]).score, 2),
            "signature": str(b.get_signature())}


def eval_one(args: argparse.Namespace, system: str, core: int, txt: Path, work: Path) -> dict:
    """Greedy valid BLEU of every checkpoint, then beam 5 on test2016 with the best one."""
    w = work / system
    done = w / "eval.json"
    if done.is_file():
        return json.loads(done.read_text())
    info = json.loads((w / "train.json").read_text())
    ev = w / "eval"
    ev.mkdir(exist_ok=True)
    curve = []
    for label, ck in checkpoints(system, w):
        hyp = ev / f"valid.{label}.de"
        translate(args, system, ck, sources(args, "valid", txt), 1, w, hyp, core=core)
        s = scores(hyp, Path(f"{bl.raw_prefix(args.data, 'valid')}.de"))
        curve.append({"checkpoint": label, "path": str(ck), "wall_s": round(ck.stat().st_mtime - info["start"], 1),
                      "valid_bleu": s["bleu"]})
        print(f"{system} {label}: {curve[-1]['wall_s'] / 60:.1f} min, valid BLEU {s['bleu']}", flush=True)
    if not curve:
        sys.exit(f"{system}: no checkpoint in {w / 'ckpt'} (was it trained for less than an epoch?)")
    best = max(curve, key=lambda c: c["valid_bleu"])
    hyp = ev / "test2016.beam5.de"
    translate(args, system, Path(best["path"]), sources(args, "test", txt), 5, w, hyp, core=core)
    result = {**info, "curve": curve, "best": best, "test": scores(hyp, Path(f"{bl.raw_prefix(args.data, 'test')}.de"))}
    done.write_text(json.dumps(result, indent=2) + "\n")
    return result


# -- report -------------------------------------------------------------------------------------
def recorded_curves(skip: set[str], since: str | None) -> list[dict]:
    """The newest ``quality_per_hour`` record, recorded on or after ``since`` (a date, ``YYYY-MM-DD``),
    of each system not in ``skip``: a report of a WORK that re-ran only some systems can still draw
    the others.  None without ``since``: records do not all say which machine trained them (the
    ``cpu`` field is newer than some), and the same run took twice the wall time on one of this
    project's hosts as on the other, so whoever reports says from when the records are comparable."""
    if since is None:
        return []
    newest: dict[str, dict] = {}
    for rec in bl.read_records("quality_per_hour"):
        if rec["system"] not in skip and rec.get("valid_bleu_curve") and rec["date"][:10] >= since:
            newest[rec["system"]] = rec  # the file is in time order
    return [newest[s] for s in SYSTEMS if s in newest]


def plot(results: list[dict], recorded: list[dict], path: Path) -> None:
    """Valid BLEU against wall time: this WORK's runs solid, earlier records dashed (each labelled
    with its date and commit, as those runs may come from another day's machine)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in results:
        c = r["curve"]
        ax.plot([x["wall_s"] / 60 for x in c], [x["valid_bleu"] for x in c], marker="o", ms=3,
                label=f"{r['system']} (test2016 {r['test']['bleu']:.2f})")
    for r in recorded:
        c = r["valid_bleu_curve"]
        ax.plot([w / 60 for w, _ in c], [b for _, b in c], marker=".", ms=3, ls="--", alpha=0.8,
                label=f"{r['system']} (test2016 {r['bleu']:.2f}; record of {r['date'][:10]} @ {r['commit']})")
    ax.set_xlabel("training wall time on one core (minutes)")
    ax.set_ylabel("valid BLEU, greedy (sacreBLEU, cased, detok.)")
    ax.set_title("Multi30k en-de: quality per CPU-hour")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


def report(args: argparse.Namespace, work: Path) -> None:
    results = [json.loads((work / s / "eval.json").read_text()) for s in SYSTEMS if (work / s / "eval.json").is_file()]
    if not results:
        sys.exit(f"nothing evaluated in {work} yet")
    recorded = recorded_curves({r["system"] for r in results}, args.recorded_since)
    plot(results, recorded, PICTURE)
    rows = [[r["system"], f"{r['test']['bleu']:.2f}", f"{r['test']['chrf']:.2f}", f"{r['best']['valid_bleu']:.2f}",
             r["best"]["checkpoint"], f"{r['best']['wall_s'] / 60:.0f}", len(r["curve"]), f"{r['train_wall_s'] / 60:.1f}",
             r["commit"], r.get("beside", "")] for r in results]
    body = (bl.md_table(["system", "test2016 BLEU", "chrF", "best valid BLEU (greedy)", "checkpoint", "at minute",
                         "checkpoints", "train wall (min)", "commit", "trained beside"], rows)
            + f"\n\n![BLEU against wall time]({PICTURE.name})\n\n"
            + (f"Dashed in the picture, from records written on or after {args.recorded_since} (not re-run here): "
               + ", ".join(f"{r['system']} {r['bleu']:.2f} ({r['date']} @ {r['commit']})" for r in recorded) + ".\n\n"
               if recorded else "")
            + "Each system trained on one core (taskset) for "
            f"{results[0]['hours']} h of wall time; test2016 with beam 5 and batch 64 from the checkpoint with the best "
            f"greedy valid BLEU. Signature: {results[0]['test']['signature']}.\n\nLoad of each pair's training "
            "(uptime before and after; the two systems of a pair shared the machine, one core each):\n\n"
            + "".join(f"- {r['system']}: before `{r.get('load_before', '?')}`; after `{r.get('load_after', '?')}`\n" for r in results)
            + "\nValid BLEU (greedy) per checkpoint, minute: BLEU:\n\n"
            + "".join(f"- {r['system']}: " + ", ".join(f"{x['wall_s'] / 60:.0f}: {x['valid_bleu']:.2f}" for x in r["curve"]) + "\n"
                      for r in results))
    print(body)
    if not args.record:
        return
    cmds = [c for r in results for c in r["cmds"]]
    bl.append_results(bl.section("Quality per CPU-hour, Multi30k en-de", bl.machine_info(), results[0].get("load_before", ""),
                                 results[-1].get("load_after", ""), "nmtkit " + results[0]["commit"], body, cmds))
    recs = [{"bench": "quality_per_hour", "system": r["system"], "bleu": r["test"]["bleu"], "chrf": r["test"]["chrf"],
             "train_wall_s": round(r["train_wall_s"], 1), "valid_bleu_curve": [[x["wall_s"], x["valid_bleu"]] for x in r["curve"]],
             "best_checkpoint": r["best"]["checkpoint"], "trained_beside": r.get("beside", ""), "load": r.get("load_before", ""),
             "hours": r["hours"], "cpu": r.get("cpu"), "commit": r["commit"]} for r in results]  # the training machine's
    # A report covers every run in WORK; a run recorded by an earlier report is not appended again
    # (identical rows would read as a second measurement).
    def run_key(x: dict) -> tuple:
        return x["system"], x["commit"], x["train_wall_s"], x["bleu"], x["chrf"]

    done = {run_key(x) for x in bl.read_records("quality_per_hour")}
    bl.append_jsonl([rec for rec in recs if run_key(rec) not in done], {})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_common_args(ap)
    ap.add_argument("--systems", nargs="+", choices=SYSTEMS, default=[], help="what to train and evaluate, side by side (one core each)")
    ap.add_argument("--hours", type=float, default=1.0, help="training wall time of each system (default: %(default)s)")
    ap.add_argument("--phase", choices=["train", "eval", "report"], default="train", help="train (then eval), eval only, or report")
    ap.add_argument("--recorded-since", metavar="YYYY-MM-DD", help="report: also draw (dashed) the newest recorded run of each "
                    "system not in WORK, from records written on or after this date (say from when they are comparable)")
    args = ap.parse_args()
    work = Path(args.work)
    bl.check_outside_repo(work)
    if args.phase == "report":
        return report(args, work)
    if len(args.systems) > os.cpu_count():
        sys.exit(f"{len(args.systems)} systems need {len(args.systems)} cores; this machine has {os.cpu_count()}")
    bl.check_raw_data(args.data)
    work.mkdir(parents=True, exist_ok=True)
    dest, txt = prepare(args, work)
    load_before = bl.uptime_line()
    if args.phase == "train":
        bl.in_parallel(lambda k: train_one(args, args.systems[k], k, dest, txt, work), len(args.systems))  # system k on core k
    load_after = bl.uptime_line()

    def ev(s: str, k: int) -> None:
        w = work / s
        meta = json.loads((w / "train.json").read_text())
        meta.setdefault("load_before", load_before)
        meta.setdefault("load_after", load_after)
        meta.setdefault("beside", ", ".join(x for x in args.systems if x != s))
        (w / "train.json").write_text(json.dumps(meta, indent=2) + "\n")
        eval_one(args, s, k, txt, work)

    bl.in_parallel(lambda k: ev(args.systems[k], k), len(args.systems))


if __name__ == "__main__":
    main()
