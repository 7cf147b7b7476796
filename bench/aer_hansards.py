#!/usr/bin/env python3
"""Alignment quality (AER) on the Canadian Hansards En-Fr: nmtkit attention vs eflomal and fast_align.

What is compared, all trained on the SAME first ``--max-train`` pairs of the Hansards bitext as
normalized by examples/hansards/prepare.py (the full 310K pairs are too slow to train a neural
model on a shared 2-core CPU within the benchmark's time), all scored on the 100 gold dev pairs
of HLT-NAACL 2003 (sure + possible links) with nmtkit's AER (Och & Ney):

* nmtkit: one attention model per direction (en->fr and fr->en, ``--arch``, same BPE, a fixed
  wall-time budget per direction, both trained side by side with ``--threads`` torch threads
  each), then ``nmtkit-align`` forced decoding on the dev pairs: each direction alone, and
  both symmetrized (intersect, union, grow-diag-final-and; and soft-grow-diag-final-and, which
  averages the two directions' attention first), at ``--align-shift`` 0 and 1, and (rnnsearch)
  read off the attention posterior given each target word (``--posterior``);
* eflomal 2.0.0 (``eflomal-align``, default model 3, both directions) on train + dev
  concatenated, the dev lines' links symmetrized with nmtkit.evaluate.symmetrize;
* fast_align (systran-align 3.5.0, fast_align's training with ``-d -o`` i.e. favor diagonal +
  optimize tension) on the same train + dev text; its Python API only returns the two
  directions already combined (how is not documented), so only that combination is scored.

Every step's outputs and timing are kept in ``--work`` (outside the repo) and reused by a
later run unless ``--fresh``; ``--record`` appends a section to bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
import shlex
from typing import Optional, Sequence

import benchlib as bl

DIRECTIONS = (("en", "fr"), ("fr", "en"))
KIND_LABEL = {"attention": "", "guided": " guided", "guided-head": " guided + alignment head"}
SYMS = ("intersect", "union", "grow-diag-final-and", "soft-grow-diag-final-and")  # soft: shift 0 only
#: Symmetrizations also read off the attention posterior (nmtkit-align --posterior; rnnsearch and luong).
POSTERIOR_SYMS = ("intersect", "grow-diag-final-and", "soft-grow-diag-final-and")


# -- cached steps ---------------------------------------------------------------------------------
class Steps:
    """Runs commands once: a finished step leaves ``steps/NAME.json`` and is reused next time,
    so an interrupted benchmark resumes without retraining."""

    def __init__(self, work: Path, fresh: bool, nice: int) -> None:
        self.dir = work / "steps"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.fresh = fresh
        self.nice = ["nice", "-n", str(nice)] if nice else []
        self.runs: dict[str, bl.Run] = {}

    def done(self, name: str) -> Optional[bl.Run]:
        p = self.dir / f"{name}.json"
        if self.fresh or not p.is_file():
            return None
        run = bl.Run.from_json(json.loads(p.read_text(encoding="utf-8")))
        print(f"[reuse] {name}: {run.shell()}", flush=True)
        self.runs[name] = run
        return run

    def save(self, name: str, run: bl.Run, load_before: str = "") -> bl.Run:
        run.extra.update(load_before=load_before, load_after=bl.uptime_line(), finished=time.time())
        (self.dir / f"{name}.json").write_text(json.dumps(run.to_json()), encoding="utf-8")
        self.runs[name] = run
        return run

    def run(self, name: str, cmd: list, **kw) -> bl.Run:
        """Run ``nice cmd`` (logged to steps/NAME.log) unless a previous run finished it."""
        if self.done(name):
            return self.runs[name]
        load = bl.uptime_line()
        return self.save(name, bl.run_cmd(self.nice + cmd, log=self.dir / f"{name}.log", **kw), load)

    def parallel(self, jobs: dict[str, dict]) -> None:
        """Run the not-yet-finished jobs side by side (same background load for each)."""
        todo = {n: j for n, j in jobs.items() if self.done(n) is None}
        for name, job in todo.items():
            job["cmd"] = self.nice + job["cmd"]
            job.setdefault("log", self.dir / f"{name}.log")
        load = bl.uptime_line()
        for name, run in zip(todo, bl.run_parallel(list(todo.values()))):
            self.save(name, run, load)

    def load_span(self) -> tuple[str, str]:
        """uptime before the first and after the last model step (training and aligning, as
        recorded with them): the data preparation and eflomal/fast_align steps, reused from
        earlier runs of the same --work, do not date the load of the models' training."""
        names = {n for n in self.runs if n.startswith(("train-", "probe-", "align-"))} or set(self.runs)
        runs = [r for n, r in self.runs.items() if n in names and r.extra.get("finished")]
        if not runs:
            return "", ""
        runs.sort(key=lambda r: r.extra["finished"] - r.wall)
        return runs[0].extra.get("load_before", ""), max(runs, key=lambda r: r.extra["finished"]).extra["load_after"]


# -- the pieces -------------------------------------------------------------------------------------
def prepare(steps: Steps, args, data: Path) -> None:
    cmd = [sys.executable, bl.REPO / "examples" / "hansards" / "prepare.py", "--data", Path(args.data) / "align",
           "--out", data, "--workers", str(args.workers), "--max-train", str(args.max_train)]
    steps.run("prepare", cmd)


def preprocess(steps: Steps, args, data: Path, work: Path, alignfiles: dict[str, Path]) -> None:
    """One data directory per direction, BPE as in examples/hansards/README.md (the text is
    already tokenized and lowercased, so nmtkit's tokenizer is off), carrying eflomal's links
    of the training pairs (--alignfile): the guided models read them, the plain ones ignore them."""
    jobs = {}
    for s, t in DIRECTIONS:
        jobs[f"preprocess-{s}-{t}"] = {"cmd": [
            "nmtkit-preprocess", "-s", s, "-t", t, "--trainpref", data / "train", "--validpref", data / "valid",
            "--testpref", data / "test", "--bpe", "subword-nmt", "--bpe-merges", str(args.bpe_merges),
            "--alignfile", alignfiles[f"{s}-{t}"], "--max-len", str(args.max_len), "--workers", "1",
            *shlex.split(args.preprocess_args), "--destdir", work / f"bin-{s}-{t}", "--overwrite"]}
    steps.parallel(jobs)


def has_posterior(arch: str, train_args: str) -> bool:
    """Whether models of this preset and these flags compute the attention posterior."""
    return arch.startswith(("rnnsearch", "luong")) and "--attention none" not in " ".join(train_args.split())


PROBE_COLUMNS = ["candidate", "params", "updates", "train ppl", "tok/s", "links from", "precision", "recall", "AER"]


def parse_probe(cfg: str) -> tuple[str, list[str], tuple[str, ...]]:
    """``"ARCH [train flags] [| preprocess flags]"`` -> (arch, train flags, preprocess flags)."""
    train_part, _, pre_part = cfg.partition("|")
    words = shlex.split(train_part)
    if not words:
        sys.exit(f"--probe entry {cfg!r} names no architecture")
    return words[0], words[1:], tuple(shlex.split(pre_part))


def probe_data(steps: Steps, args, data: Path, work: Path, alignfiles: dict[str, Path],
               variants: set[tuple[str, ...]]) -> dict[tuple[str, ...], Path]:
    """en->fr data directories of the probe: the main one for ``()``, else one per set of
    preprocess flags (replacing ``--bpe subword-nmt --bpe-merges N``), built side by side."""
    dirs, jobs = {(): work / "bin-en-fr"}, {}
    for pre in sorted(variants - {()}):
        tag = "".join(c if c.isalnum() else "-" for c in "-".join(pre)).strip("-")
        dirs[pre] = work / f"bin-en-fr-probe-{tag}"
        jobs[f"preprocess-probe-{tag}"] = {"cmd": [
            "nmtkit-preprocess", "-s", "en", "-t", "fr", "--trainpref", data / "train", "--validpref", data / "valid",
            "--testpref", data / "test", "--alignfile", alignfiles["en-fr"], "--max-len", str(args.max_len),
            "--workers", "1", *pre, "--destdir", dirs[pre], "--overwrite"]}  # pre last: it may override --max-len
    if jobs:
        steps.parallel(jobs)
    return dirs


def train_cmd(args, bindir: Path, save: Path, arch: str, seconds: int, extra: Sequence[str] = ()) -> list:
    """nmtkit-train under ``timeout``: SIGTERM makes the trainer finish its update and write
    checkpoint_last.pt, which is what gets aligned (a fixed wall-time budget per model)."""
    cmd = ["timeout", "-s", "TERM", str(seconds), "nmtkit-train", bindir, "--arch", arch, "--save-dir", save,
           *(["--batch-size", str(args.batch_size)] if args.batch_size else []), "--max-epoch", "0", "--seed", str(args.seed), "--device", "cpu",
           "--threads", str(args.threads), "--no-epoch-checkpoints", "--log-interval", "100", "--no-progress",
           *shlex.split(args.train_args), *extra]
    if args.max_update:
        cmd += ["--max-update", str(args.max_update)]
    return cmd


def train_pair(steps: Steps, args, work: Path, jobs_spec: dict[str, tuple], fresh: bool = True,
               snapshot: str = "", previous: str = "") -> None:
    """Train several models side by side, each with its time budget: from scratch when
    ``fresh`` (a half-finished earlier run is removed, the budget is per run), else resuming
    checkpoint_last.pt (as the ``previous`` round's snapshot left it, when this round is redone).
    ``snapshot``: copy each checkpoint_last.pt (and the training log) to this name afterwards
    (later rounds overwrite checkpoint_last.pt)."""
    jobs = {}
    for name, (bindir, save, arch, seconds, *extra) in jobs_spec.items():
        if fresh and steps.done(name) is None and save.exists():
            shutil.rmtree(save)
        elif not fresh and previous and steps.done(name) is None:
            restore_round(save, previous)
        jobs[name] = {"cmd": train_cmd(args, bindir, save, arch, seconds, *extra), "check": False}
    steps.parallel(jobs)
    for name, (_, save, *_) in jobs_spec.items():
        rc = steps.runs[name].rc
        if rc not in (0, 124):  # 124: stopped by `timeout`, the budget; anything else failed
            (steps.dir / f"{name}.json").unlink()  # not a finished step: the next run retries it
            sys.exit(f"{name}: nmtkit-train exited with {rc}; see {steps.dir / (name + '.log')}")
        if not (save / "checkpoint_last.pt").is_file():
            sys.exit(f"{name}: no {save / 'checkpoint_last.pt'}; see {steps.dir / (name + '.log')}")
        if snapshot and not (save / snapshot).is_file():
            shutil.copyfile(save / "train_log.jsonl", save / f"{Path(snapshot).stem}.train_log.jsonl")
            shutil.copyfile(save / "checkpoint_last.pt", save / snapshot)


def restore_round(save: Path, previous: str) -> None:
    """A round that did not finish (a session's end) is redone from where the ``previous`` round
    ended: its checkpoint (with the optimizer and data state) and its training log, so the round
    gets its budget once and train_summary's segments stay one per round."""
    snap, log = save / previous, save / f"{Path(previous).stem}.train_log.jsonl"
    if not snap.is_file():
        sys.exit(f"{snap} is missing: the round before cannot be restored (rerun with --fresh)")
    shutil.copyfile(snap, save / "checkpoint_last.pt")
    if log.is_file():  # snapshots of older runs have no log copy
        shutil.copyfile(log, save / "train_log.jsonl")


def train_summary(save: Path, rounds: int = 0) -> dict:
    """Updates, epoch, last logged training perplexity and training seconds after the first
    ``rounds`` runs of the trainer (each run logs a "start" event; 0: all) from train_log.jsonl."""
    events = [json.loads(l) for l in (save / "train_log.jsonl").read_text(encoding="utf-8").splitlines() if l.strip()]
    starts = [k for k, e in enumerate(events) if e["event"] == "start"]
    segments = [events[a:b] for a, b in zip(starts, starts[1:] + [len(events)])][: rounds or None]
    seconds = sum(seg[-1]["time"] - seg[0]["time"] for seg in segments)
    last_seg = segments[-1]
    trains = [e for e in last_seg if e["event"] == "train"]
    last = trains[-1] if trains else {}
    stop = next((e for e in reversed(last_seg) if "update" in e), last_seg[0])
    return {"params": segments[0][0].get("parameters"), "updates": stop.get("update"), "epoch": last.get("epoch"),
            "train_ppl": last.get("ppl"), "tok_per_s": last.get("tok_per_s"), "seconds": seconds}


def nmtkit_align(steps: Steps, args, work: Path, data: Path, name: str, fwd: Path, rev: Optional[Path],
                 shift: int, sym: Optional[str], posterior: bool = False, layer: Optional[int] = None) -> dict:
    """One nmtkit-align call on the gold dev pairs (``posterior``: links from the attention
    posterior, ``--posterior``; ``layer``: the Transformer decoder layer read, ``--alignment-layer``);
    returns its --json scores."""
    out = work / "align" / f"{name}.align"
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["nmtkit-align", "--path", fwd, "--source", data / "test.en", "--target", data / "test.fr",
           "--gold", data / "test.gold", "--align-shift", str(shift), "--device", "cpu",
           "--threads", str(args.threads), "--json", "-o", out]
    if rev is not None:
        cmd += ["--reverse-path", rev, "--symmetrize", sym]
    if posterior:
        cmd.append("--posterior")
    if layer is not None:
        cmd += ["--alignment-layer", str(layer)]
    steps.run(f"align-{name}", cmd, stdout=work / "align" / f"{name}.json")
    return json.loads((work / "align" / f"{name}.json").read_text(encoding="utf-8"))


def score_file(hyp: Path, gold: Path) -> dict:
    from nmtkit.evaluate.aer import alignment_error_rate
    from nmtkit.evaluate.alignment_io import read_alignments, read_gold

    r = alignment_error_rate(read_alignments(hyp), read_gold(gold))
    return {"precision": r.precision, "recall": r.recall, "aer": r.aer, "n_hyp": r.n_hyp}


def score_links(links: list[set], gold: Path) -> dict:
    from nmtkit.evaluate.aer import alignment_error_rate
    from nmtkit.evaluate.alignment_io import read_gold

    r = alignment_error_rate(links, read_gold(gold))
    return {"precision": r.precision, "recall": r.recall, "aer": r.aer, "n_hyp": r.n_hyp}


def concat_corpus(data: Path, out: Path) -> tuple[list[int], int]:
    """train + dev text for the statistical aligners (they align the corpus they learn from);
    pairs with an empty side are left out of train. Returns (indices of the train pairs kept, train pairs)."""
    from nmtkit.utils.textio import atomic_write, read_lines

    out.mkdir(parents=True, exist_ok=True)
    tr_en, tr_fr = read_lines(data / "train.en"), read_lines(data / "train.fr")
    keep = [k for k in range(len(tr_en)) if tr_en[k].split() and tr_fr[k].split()]
    for lang, tr in (("en", tr_en), ("fr", tr_fr)):
        with atomic_write(out / f"all.{lang}") as fh:
            fh.writelines(" ".join(tr[k].split()) + "\n" for k in keep)
            fh.writelines(" ".join(l.split()) + "\n" for l in read_lines(data / f"test.{lang}"))
    return keep, len(tr_en)


def write_train_alignfiles(stat: Path, keep: list[int], n_train: int) -> dict[str, Path]:
    """eflomal's links of the training pairs, symmetrized (grow-diag-final-and), as one Pharaoh
    line per line of train.{en,fr} (empty for a pair eflomal did not see): the --alignfile of
    each direction (fr-en flipped). Returns direction -> alignfile prefix."""
    from nmtkit.evaluate.alignment_io import read_alignments, write_pharaoh
    from nmtkit.evaluate.symmetrize import symmetrize

    prefixes = {"en-fr": stat / "train.eflomal.en-fr", "fr-en": stat / "train.eflomal.fr-en"}
    if all(Path(f"{p}.align").is_file() for p in prefixes.values()):
        return prefixes
    fwd, rev = read_alignments(stat / "eflomal.fwd"), read_alignments(stat / "eflomal.rev")
    links: list[set] = [set() for _ in range(n_train)]
    for row, k in enumerate(keep):
        links[k] = symmetrize(fwd[row], rev[row], "grow-diag-final-and")
    write_pharaoh(f"{prefixes['en-fr']}.align", [sorted(x) for x in links])
    write_pharaoh(f"{prefixes['fr-en']}.align", [sorted((j, i) for i, j in x) for x in links])
    return prefixes


def diagonal_links(data: Path) -> list[set]:
    """The length-diagonal baseline: each French word j of a J-word line linked to English word
    round((j + 0.5) * I / J - 0.5) of the I-word line (no model at all)."""
    from nmtkit.utils.textio import read_lines

    out = []
    for en, fr in zip(read_lines(data / "test.en"), read_lines(data / "test.fr")):
        n_en, n_fr = len(en.split()), len(fr.split())
        out.append({(min(n_en - 1, max(0, round((j + 0.5) * n_en / n_fr - 0.5))), j) for j in range(n_fr)} if n_en and n_fr else set())
    return out


def tail_links(path: Path, n: int) -> list[set]:
    from nmtkit.data.pharaoh import parse_pharaoh_line

    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [parse_pharaoh_line(l, allow_possible=False).sure for l in lines[-n:]]


def write_links(path: Path, links: list[set]) -> None:
    from nmtkit.evaluate.alignment_io import write_pharaoh

    write_pharaoh(path, [sorted(s) for s in links])


def run_statistical(steps: Steps, args, work: Path, data: Path, rows: list) -> tuple[Path, int, int]:
    """eflomal (both directions, symmetrized by nmtkit) and fast_align on train + dev; appends
    their score rows. Returns (folder, train pairs used, train pairs dropped)."""
    from nmtkit.evaluate.symmetrize import symmetrize

    peers = Path(args.peers)
    efl_py = peers / "eflomal" / "bin" / "python"
    fastalign_script = Path(args.data).parent / "peers" / "fastalign_systran.py"
    stat = work / "statistical"
    keep, n_train = concat_corpus(data, stat)
    kept, dropped = len(keep), n_train - len(keep)
    n_dev = bl.count_lines(data / "test.gold")
    gold = data / "test.gold"
    steps.run("eflomal", [peers / "eflomal" / "bin" / "eflomal-align", "--overwrite", "-v", "-s", stat / "all.en",
                          "-t", stat / "all.fr", "-f", stat / "eflomal.fwd", "-r", stat / "eflomal.rev"])
    e_fwd, e_rev = tail_links(stat / "eflomal.fwd", n_dev), tail_links(stat / "eflomal.rev", n_dev)
    rows.append(["eflomal 2.0.0", "en->fr (forward)", *prf(score_links(e_fwd, gold))])
    rows.append(["eflomal 2.0.0", "fr->en (reverse)", *prf(score_links(e_rev, gold))])
    for sym in (s for s in SYMS if not s.startswith("soft")):  # eflomal has links, no attention
        links = [symmetrize(f, r, sym) for f, r in zip(e_fwd, e_rev)]
        write_links(stat / f"eflomal.dev.{sym}", links)
        rows.append(["eflomal 2.0.0", sym, *prf(score_links(links, gold))])
    fa_dir = stat / "fastalign"
    steps.run("fastalign", [efl_py, fastalign_script, stat / "all.en", stat / "all.fr", fa_dir, "--favor-diagonal"])
    fa = tail_links(fa_dir / "align.sym", n_dev)
    write_links(stat / "fastalign.dev.sym", fa)
    rows.append(["fast_align (systran-align 3.5.0, -d -o)", "its own combination of both directions", *prf(score_links(fa, gold))])
    write_train_alignfiles(stat, keep, n_train)
    return stat, kept, dropped


# -- main -----------------------------------------------------------------------------------------
def fmt(x: Optional[float], p: int = 3) -> str:
    return "" if x is None else f"{x:.{p}f}"


def prf(scores: dict) -> list[str]:
    """precision, recall, AER cells of a scores dict."""
    return [fmt(scores[k]) for k in ("precision", "recall", "aer")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_common_args(ap)
    ap.set_defaults(work="/root/nmtkit-bench/hansards")
    ap.add_argument("--max-train", type=int, default=100000, help="first N training pairs (default: %(default)s; 0: all 310,661)")
    ap.add_argument("--arch", default="rnnsearch_tiny", help="nmtkit preset for both directions (default: %(default)s)")
    ap.add_argument("--train-minutes", type=float, default=14.0, help="wall-time budget per direction; both train side by side (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=1, help="train --train-minutes this many times (resuming), aligning after each (default: %(default)s; 0: only the guided models)")
    ap.add_argument("--max-update", type=int, default=0, help="also stop training after N updates (0: time budget only)")
    ap.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default: %(default)s; 0: no --batch-size, batches of --max-tokens only, given in --train-args)")
    ap.add_argument("--bpe-merges", type=int, default=16000, help="joint BPE merges, as examples/hansards/README.md (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per nmtkit process (default: %(default)s; 2 at most on this machine)")
    ap.add_argument("--workers", type=int, default=2, help="prepare.py tokenizer processes (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--nice", type=int, default=10, help="run every heavy command under nice -n N (0: off; default: %(default)s)")
    ap.add_argument("--probe", default="", help="candidates to compare first, 'label=ARCH [nmtkit-train flags] [| nmtkit-preprocess flags]' "
                    "entries separated by ';' (preprocess flags replace the BPE flags, e.g. '| --bpe none' for words): each trains "
                    "en->fr for --probe-minutes, all side by side, and aligns the dev set from its attention and its posterior "
                    "(which aligns best per CPU-hour?)")
    ap.add_argument("--probe-minutes", type=float, default=4.0)
    ap.add_argument("--probe-only", action="store_true", help="stop after the probe (a later run with the same --probe reuses it)")
    ap.add_argument("--train-args", default="", help="extra nmtkit-train flags for every model (e.g. '--encoder-bidirectional')")
    ap.add_argument("--max-len", type=int, default=80, help="nmtkit-preprocess --max-len (default: %(default)s)")
    ap.add_argument("--guided-rounds", type=int, default=0, help="also train guided models (eflomal's links, --guided-alignment-weight) "
                    "this many rounds of --train-minutes (default: %(default)s)")
    ap.add_argument("--preprocess-args", default="", help="extra nmtkit-preprocess flags for both data directories "
                    "(e.g. '--joined-dictionary' for a preset that ties all embeddings)")
    ap.add_argument("--guided-args", default="", help="extra nmtkit-train flags for the guided models only "
                    "(e.g. '--alignment-heads 1': one supervised head, as Garg et al. 2019)")
    ap.add_argument("--head-rounds", type=int, default=0, help="also train guided models with --alignment-head this many rounds of --train-minutes (default: %(default)s)")
    ap.add_argument("--guided-weight", type=float, default=1.0, help="--guided-alignment-weight of the guided models (default: %(default)s)")
    ap.add_argument("--alignment-layers", type=int, nargs="*", default=[], metavar="L",
                    help="Transformers: also read the cross-attention of these decoder layers (nmtkit-align --alignment-layer), "
                         "shift 0 and 1, grow-diag-final-and: how the default layer is chosen on the dev pairs")
    ap.add_argument("--only-statistical", action="store_true", help="only eflomal and fast_align (their steps are then reused by a full run)")
    ap.add_argument("--note", default="", help="a remark to add to the recorded section (e.g. what ran alongside)")
    ap.add_argument("--fresh", action="store_true", help="redo every step (default: reuse finished steps in --work)")
    args = ap.parse_args()

    work = Path(args.work)
    bl.check_outside_repo(work)
    work.mkdir(parents=True, exist_ok=True)
    data = work / "data"
    steps = Steps(work, args.fresh, args.nice)
    peers = Path(args.peers)
    efl_py = peers / "eflomal" / "bin" / "python"
    for p in (efl_py, peers / "eflomal" / "bin" / "eflomal-align"):
        if not p.exists():
            sys.exit(f"{p} missing: run shared/peers/setup.sh (see shared/peers/README.md)")
    if not (Path(args.data).parent / "peers" / "fastalign_systran.py").is_file():
        sys.exit(f"{Path(args.data).parent / 'peers' / 'fastalign_systran.py'} missing (shared/peers/ beside --data)")
    load_before = bl.uptime_line()
    budget = int(args.train_minutes * 60)

    # 1. data; eflomal and fast_align first: eflomal's links of the training pairs go into the
    #    data directories (--alignfile) for the guided models
    prepare(steps, args, data)
    stat_rows: list[list[str]] = []
    stat, kept, dropped = run_statistical(steps, args, work, data, stat_rows)
    if args.only_statistical:
        print("\n" + bl.md_table(["method", "direction / symmetrization", "precision", "recall", "AER"], stat_rows))
        return
    alignfiles = {d: stat / f"train.eflomal.{d}" for d in ("en-fr", "fr-en")}
    preprocess(steps, args, data, work, alignfiles)

    # 1b. optional candidate probe (en->fr only): "label=ARCH [train flags] [| preprocess flags]"
    #     entries, ';'-separated; preprocess flags (e.g. "--bpe-merges 8000", or "--bpe none" for
    #     words) replace the BPE flags of a data directory of its own
    probe_rows = []
    probes = {label: parse_probe(cfg) for label, cfg in (p.split("=", 1) for p in args.probe.split(";") if p.strip())}
    if probes:
        bins = probe_data(steps, args, data, work, alignfiles, {pre for _, _, pre in probes.values()})
        spec = {f"probe-train-{label}": (bins[pre], work / "probe" / label, arch, int(args.probe_minutes * 60), flags)
                for label, (arch, flags, pre) in probes.items()}
        train_pair(steps, args, work, spec)
        for label, (arch, flags, pre) in probes.items():
            ckpt = work / "probe" / label / "checkpoint_last.pt"
            res = {"attention": nmtkit_align(steps, args, work, data, f"probe-{label}", ckpt, None, 0, None)}
            if has_posterior(arch, " ".join(flags)):
                res["posterior"] = nmtkit_align(steps, args, work, data, f"probe-{label}-posterior", ckpt, None, 0, None, posterior=True)
            s = train_summary(work / "probe" / label)
            desc = f"`{' '.join([arch, *flags])}`" + (f", preprocess `{' '.join(pre)}`" if pre else "")
            for how, r in res.items():
                probe_rows.append([f"{label}: {desc}", s["params"], s["updates"], fmt(s["train_ppl"], 1), fmt(s["tok_per_s"], 0), how, *prf(r)])
        print(bl.md_table(PROBE_COLUMNS, probe_rows))
        if args.probe_only:
            return

    # 2.+3. nmtkit models, both directions side by side, --rounds times --train-minutes (resumed),
    #       then nmtkit-align on the 100 gold pairs after each round; then the guided models alike
    rows: list[list[str]] = []
    records: list[dict] = []
    kinds = [("attention", "", args.rounds, [])]
    if args.guided_rounds:
        kinds.append(("guided", "-guided", args.guided_rounds, ["--guided-alignment-weight", str(args.guided_weight),
                                                                *shlex.split(args.guided_args)]))
    if args.head_rounds:
        kinds.append(("guided-head", "-guided-head", args.head_rounds,
                      ["--guided-alignment-weight", str(args.guided_weight), "--alignment-head"]))
    ckpts: dict[str, dict[str, Path]] = {}
    for kind, tag, n_rounds, extra in kinds:
        ckpt = {f"{s}-{t}": work / f"ckpt-{s}-{t}{tag}" for s, t in DIRECTIONS}
        ckpts[kind] = ckpt
        for rnd in range(1, n_rounds + 1):
            sfx = "" if rnd == 1 else f"-round{rnd}"
            train_pair(steps, args, work, {f"train-{d}{tag}{sfx}": (work / f"bin-{d}", ckpt[d], args.arch, budget, extra) for d in ckpt},
                       fresh=rnd == 1, snapshot=f"checkpoint_round{rnd}.pt", previous=f"checkpoint_round{rnd - 1}.pt")
            fwd, rev = (ckpt[d] / f"checkpoint_round{rnd}.pt" for d in ("en-fr", "fr-en"))
            nmt = {}
            for shift in (0, 1):
                for sym in SYMS:
                    if shift == 0 or sym == "grow-diag-final-and":
                        nmt[(shift, sym)] = nmtkit_align(steps, args, work, data, f"nmtkit{tag}-round{rnd}-shift{shift}-{sym}", fwd, rev, shift, sym)
            if has_posterior(args.arch, args.train_args) and kind != "guided-head":  # head models: read their head
                for sym in POSTERIOR_SYMS:
                    nmt[("posterior", sym)] = nmtkit_align(steps, args, work, data, f"nmtkit{tag}-round{rnd}-posterior-{sym}",
                                                           fwd, rev, 0, sym, posterior=True)
            by_layer = {layer: {shift: nmtkit_align(steps, args, work, data, f"nmtkit{tag}-round{rnd}-layer{layer}-shift{shift}-grow-diag-final-and",
                                                    fwd, rev, shift, "grow-diag-final-and", layer=layer) for shift in (0, 1)}
                        for layer in args.alignment_layers}
            sums = {d: train_summary(ckpt[d], rnd) for d in ckpt}
            ups = "/".join(f"{sums[d]['updates']:,}" for d in ckpt)
            label = f"nmtkit {args.arch}{KIND_LABEL[kind]}, {rnd * args.train_minutes:g} min ({ups} upd.)"
            for shift in (0, 1, "posterior"):
                if (shift, "grow-diag-final-and") not in nmt:
                    continue
                how = "posterior" if shift == "posterior" else f"shift {shift}"
                d = nmt[(shift, "grow-diag-final-and")]["directions"]
                rows.append([label, f"en->fr ({how})", *prf(d["source->target"])])
                rows.append([label, f"fr->en ({how})", *prf(d["target->source"])])
                rows += [[label, f"{sym} ({how})", *prf(nmt[(shift, sym)])] for sym in SYMS if (shift, sym) in nmt]
            wall = round(max(sums[d]["seconds"] for d in ckpt))
            base = {"system": f"nmtkit-{kind}", "arch": args.arch, "round": rnd, "train_wall_s": wall,
                    "updates": {d: sums[d]["updates"] for d in ckpt},
                    **({"guided_args": args.guided_args} if kind == "guided" and args.guided_args else {})}
            for reading in (0, "posterior"):
                if (reading, "grow-diag-final-and") not in nmt:
                    continue
                d0 = nmt[(reading, "grow-diag-final-and")]["directions"]
                how = {"align_shift": 0, "links_from": "posterior" if reading == "posterior" else "attention"}
                records += [{**base, "symmetrization": "none (en->fr)", **how, "aer": round(d0["source->target"]["aer"], 4)},
                            {**base, "symmetrization": "none (fr->en)", **how, "aer": round(d0["target->source"]["aer"], 4)}]
            records += [{**base, "symmetrization": sym, "align_shift": 0 if shift == "posterior" else shift,
                         "links_from": "posterior" if shift == "posterior" else "attention", "aer": round(r["aer"], 4)}
                        for (shift, sym), r in nmt.items()]
            for layer, per_shift in by_layer.items():  # the same models read at another decoder layer
                for shift, r in per_shift.items():
                    d = r["directions"]
                    rows += [[f"{label}, layer {layer}", f"{name} (shift {shift})", *prf(x)] for name, x in
                             (("en->fr", d["source->target"]), ("fr->en", d["target->source"]), ("grow-diag-final-and", r))]
                    lay = {**base, "alignment_layer": layer, "align_shift": shift, "links_from": "attention"}
                    records += [{**lay, "symmetrization": "none (en->fr)", "aer": round(d["source->target"]["aer"], 4)},
                                {**lay, "symmetrization": "none (fr->en)", "aer": round(d["target->source"]["aer"], 4)},
                                {**lay, "symmetrization": "grow-diag-final-and", "aer": round(r["aer"], 4)}]
            # cross-check: the links nmtkit-align wrote score the same with the library call
            gdfa = nmt[(0, "grow-diag-final-and")]["aer"]
            chk = score_file(work / "align" / f"nmtkit{tag}-round{rnd}-shift0-grow-diag-final-and.align", data / "test.gold")
            if abs(chk["aer"] - gdfa) > 1e-9:
                sys.exit(f"AER mismatch between nmtkit-align ({gdfa}) and its output file ({chk['aer']})")

    # 4. eflomal and fast_align on train + dev (run first, above), and the length diagonal
    rows += stat_rows
    diag = score_links(diagonal_links(data), data / "test.gold")
    rows.append(["length diagonal (no model)", "-", *prf(diag)])
    records.append({"system": "diagonal", "symmetrization": "none", "aer": round(diag["aer"], 4), "train_wall_s": 0})
    for r in stat_rows:
        system = "eflomal" if r[0].startswith("eflomal") else "fast_align"
        sym = r[1] if r[1] in SYMS else ("its own" if system == "fast_align" else "none (" + r[1].split(" ")[0] + ")")
        records.append({"system": system, "symmetrization": sym, "aer": float(r[4]), "train_wall_s": round(steps.runs["eflomal" if system == "eflomal" else "fastalign"].wall)})

    table = bl.md_table(["method", "direction / symmetrization", "precision", "recall", "AER"], rows)
    print("\n" + table)
    if not args.record:
        return
    first, last = steps.load_span()
    load_before = f"{first} (before the first step this invocation ran)" if first else f"{load_before} (at record time: the steps ran earlier)"
    load_after = last or f"{bl.uptime_line()} (at record time)"
    # 5. RESULTS.md
    n_train = bl.count_lines(data / "train.en")
    meta = {d: json.loads((work / f"bin-{d}" / "meta.json").read_text(encoding="utf-8")) for d in ("en-fr", "fr-en")}
    walls = {n: r.wall for n, r in steps.runs.items()}
    train_lines = []
    for kind, tag, n_rounds, _ in kinds:  # --rounds 0 trains only the guided models
        if not n_rounds:
            continue
        ckpt = ckpts[kind]
        tr = {d: train_summary(ckpt[d]) for d in ckpt}
        train_steps = {d: [r for n, r in steps.runs.items()
                           if n.startswith(f"train-{d}{tag}") and n[len(f"train-{d}{tag}"):] in ("", *(f"-round{k}" for k in range(2, n_rounds + 1)))]
                       for d in ckpt}
        train_lines += [
            f"- nmtkit `{args.arch}`{KIND_LABEL[kind]} {d}: {tr[d]['params']:,} parameters, {tr[d]['updates']:,} updates of "
            f"{f'{args.batch_size} sentences' if args.batch_size else 'token batches'} "
            f"in {tr[d]['seconds'] / 60:.1f} min of training ({n_rounds} run(s) of the trainer; epoch {tr[d]['epoch']}), "
            f"last logged train ppl {fmt(tr[d]['train_ppl'], 1)}, {fmt(tr[d]['tok_per_s'], 0)} target tok/s; "
            f"CPU {sum(r.cpu for r in train_steps[d]):.0f} s in {sum(r.wall for r in train_steps[d]):.0f} s of wall time"
            for d in ckpt]
    train_lines = "\n".join(train_lines)
    step_walls = ", ".join(f"{n} {w:.0f} s" for n, w in walls.items())
    probe = ""
    if probe_rows:
        probe = ("\n\nCandidate probe (en->fr only, each trained " f"{args.probe_minutes:g} min side by side, shift 0, no symmetrization):\n\n"
                 + bl.md_table(PROBE_COLUMNS, probe_rows))
    body = (
        (f"Training data: all {n_train:,} `house-senate.training` pairs, normalized by " if not args.max_train else
         f"Training data: the first {n_train:,} of the 310,661 `house-senate.training` pairs (`--max-train {args.max_train}`), normalized by ")
        + f"`examples/hansards/prepare.py`; dev/test: the 100 HLT-NAACL 2003 gold pairs (sure + possible links, English source). "
        f"nmtkit: joint BPE {args.bpe_merges} merges, `--max-len {args.max_len}`"
        + (f" `{args.preprocess_args}`" if args.preprocess_args else "") + " "
        f"({', '.join(f'{d}: ' + str(meta[d].get('splits', {}).get('train', {}).get('sentences', '?')) for d in meta)} training pairs kept), "
        f"both directions trained side by side, {args.rounds} x {args.train_minutes:g} min of wall time each (SIGTERM via "
        f"`timeout` makes the trainer write `checkpoint_last.pt`; the same command resumes it), aligned after each round, {args.threads} torch thread(s) each{f', extra flags `{args.train_args}`' if args.train_args else ''}. "
        + (f"Guided models: the same, plus `--guided-alignment-weight {args.guided_weight:g}`"
           + (f" `{args.guided_args}`" if args.guided_args else "") + " towards eflomal's grow-diag-final-and links of "
           f"the training pairs (written into the data directories with `--alignfile`), {args.guided_rounds} x {args.train_minutes:g} min. "
           if args.guided_rounds else "") +
        (f"Guided models with an alignment head (`--alignment-head`: an extra attention that also sees the target word it aligns, "
         f"trained only by the guided loss, read by nmtkit-align): {args.head_rounds} x {args.train_minutes:g} min. "
         if args.head_rounds else "") +
        f"eflomal and fast_align: the same {kept:,} training pairs ({dropped} with an empty side left out) + the 100 dev pairs "
        f"concatenated, links of the dev lines scored. All AER by `nmtkit.evaluate.aer`; eflomal's symmetrizations by "
        f"`nmtkit.evaluate.symmetrize`. Labels `N/M upd.`: updates of the en->fr / fr->en model. systran-align's Python API returns only its own (undocumented) combination of the two "
        f"fast_align directions, so fast_align has no one-direction rows.\n\n"
        f"{train_lines}\n- step wall times (side-by-side steps overlap): {step_walls}\n\n"
        f"{table}{probe}"
        + (f"\n\nNotes: {args.note}" if args.note else "")
    )
    commands = [r.shell(stdout=str(work / "align" / (n[len('align-'):] + ".json")) if n.startswith("align-") else None)
                for n, r in steps.runs.items()]
    commands.insert(0, "# after each round of training (the same train command again resumes checkpoint_last.pt): "
                       "cp checkpoint_last.pt checkpoint_roundN.pt in every save dir, then the align commands of that round")
    commands.insert(commands.index(next(c for c in commands if "eflomal-align" in c)),
                    f"# train + dev text for eflomal/fast_align (empty pairs dropped): {stat}/all.{{en,fr}}")
    software = (bl.software_line({}) + f"; eflomal {bl.dist_version(str(efl_py), 'eflomal')}; "
                f"systran-align {bl.dist_version(str(efl_py), 'systran-align')}")
    bl.append_results(bl.section("AER: Canadian Hansards En-Fr, nmtkit attention vs eflomal and fast_align",
                                 bl.machine_info(), load_before, load_after, software, body, commands))
    bl.append_jsonl(records, {"bench": "aer", "set": "hansards-enfr-dev (100 gold pairs)", "train_pairs": n_train,
                              "load": {"before": load_before, "after": load_after}})


if __name__ == "__main__":
    main()
