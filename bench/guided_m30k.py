#!/usr/bin/env python3
"""Guided alignment on Multi30k En->De: its effect on BLEU and on unknown-word replacement.

Two word-level ``luong_small`` models (Moses tokens, words seen once mapped to <unk>, so test2016
has unknown words to replace) trained side by side, one core each, for the same wall time and
seed: one plain, one with ``--guided-alignment-weight`` towards eflomal's grow-diag-final-and
links of the training pairs (eflomal on the training text with Unicode spaces made ASCII
spaces, which both models train on; nmtkit-preprocess maps the links of whitespace words to
its tokens). Each translates test2016 (beam 5) without and with
``--replace-unk`` (copy the most-attended source word), and with ``--replace-unk --unk-posterior``
(the source word with the highest attention posterior given the ``<unk>``); detokenized sacreBLEU against the raw
references.  ``--record`` appends a RESULTS.md section and one results.jsonl line per
(model, way of replacing): ``{"bench": "guided_m30k", "system": ..., "replace_unk": ..., "unk_from":
"-"|"attention"|"posterior", "bleu": ...}``.
"""
from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import benchlib as bl


def write_alignfile(work: Path) -> Path:
    """eflomal's two directions symmetrized with grow-diag-final-and, as PREFIX.align."""
    from nmtkit.evaluate.alignment_io import read_alignments, write_pharaoh
    from nmtkit.evaluate.symmetrize import symmetrize

    prefix = work / "train.eflomal.en-de"
    links = [symmetrize(f, r, "grow-diag-final-and")
             for f, r in zip(read_alignments(work / "eflomal.fwd"), read_alignments(work / "eflomal.rev"))]
    write_pharaoh(f"{prefix}.align", [sorted(s) for s in links])
    return prefix


def whitespace_words_copy(raw_prefix: Path, out_prefix: Path) -> None:
    """Training text with every Unicode space (e.g. the no-break spaces of Multi30k's German side)
    made an ASCII space: eflomal splits words at any Unicode space, nmtkit only at spaces, so
    both must read text on which the two agree, or the links index other words."""
    from nmtkit.utils.textio import atomic_write, read_lines

    for lang in ("en", "de"):
        with atomic_write(Path(f"{out_prefix}.{lang}")) as fh:
            fh.writelines(" ".join(line.split()) + "\n" for line in read_lines(Path(f"{raw_prefix}.{lang}")))


def bleu(hyp: Path, ref: Path) -> float:
    from sacrebleu.metrics import BLEU

    return BLEU().corpus_score(hyp.read_text(encoding="utf-8").split("\n")[:-1],
                               [ref.read_text(encoding="utf-8").split("\n")[:-1]]).score


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_common_args(ap)
    ap.set_defaults(work="/root/nmtkit-bench/guided_m30k")
    ap.add_argument("--minutes", type=float, default=20.0, help="training wall time of each model (default: %(default)s)")
    ap.add_argument("--weight", type=float, default=1.0, help="--guided-alignment-weight (default: %(default)s)")
    ap.add_argument("--arch", default="luong_small")
    ap.add_argument("--prepare-only", action="store_true", help="stop after eflomal and preprocessing (a later run reuses them)")
    args = ap.parse_args()

    work = Path(args.work)
    bl.check_outside_repo(work)
    work.mkdir(parents=True, exist_ok=True)
    bl.check_raw_data(args.data)
    raw = {s: bl.raw_prefix(args.data, s) for s in bl.SPLITS}
    load_before = bl.uptime_line()
    cmds: list[str] = []

    def run(cmd: list, name: str, done: bool = False, **kw) -> None:
        """Run ``cmd`` (unless an earlier run of this script ``done`` it) and list it for the record."""
        redirect = (f" < {kw['stdin']}" if "stdin" in kw else "") + (f" > {kw['stdout']}" if "stdout" in kw else "")
        cmds.append(shlex.join(map(str, cmd)) + redirect + ("  # (reused from an earlier run)" if done else ""))
        if not done:
            bl.run_cmd(cmd, work / f"{name}.log", **kw)

    train = work / "train"
    if not (work / "train.de").exists():
        whitespace_words_copy(raw["train"], train)
    cmds.append(f"# {train}.{{en,de}}: {raw['train']}.{{en,de}} with every Unicode space made an ASCII space (whitespace_words_copy)")
    efl = Path(args.peers) / "eflomal" / "bin" / "eflomal-align"
    run([efl, "--overwrite", "-s", f"{train}.en", "-t", f"{train}.de", "-f", work / "eflomal.fwd",
         "-r", work / "eflomal.rev"], "eflomal", done=(work / "eflomal.rev").exists())
    prefix = work / "train.eflomal.en-de"
    if not Path(f"{prefix}.align").exists():
        write_alignfile(work)
    dest = work / "bin"
    run(["nmtkit-preprocess", "-s", "en", "-t", "de", "--trainpref", train, "--validpref", raw["valid"],
         "--tokenizer", "moses", "--thresholdsrc", "2", "--thresholdtgt", "2", "--alignfile", prefix,
         "--workers", "2", "--destdir", dest], "preprocess", done=(dest / "meta.json").exists())
    if args.prepare_only:
        return
    seconds = int(args.minutes * 60)
    if seconds <= 0:
        raise SystemExit("--minutes must be > 0")
    systems = {"plain": [], "guided": ["--guided-alignment-weight", str(args.weight)]}
    jobs = []
    for name, extra in systems.items():
        if not (work / name / "checkpoint_last.pt").exists():
            jobs.append({"cmd": ["timeout", "-s", "TERM", seconds, "nmtkit-train", dest, "--arch", args.arch, "--batch-size", 64,
                                 "--max-epoch", 0, "--seed", 1, "--threads", 1, "--device", "cpu", "--no-progress",
                                 "--no-epoch-checkpoints", "--save-dir", work / name, *extra],
                         "log": work / f"train-{name}.log", "check": False})
    for r in bl.run_parallel(jobs):
        cmds.append(r.shell())
    rows, records = [], []
    ref = Path(f"{raw['test']}.de")
    # --replace-unk off, from the search's attention, and from the attention posterior (--unk-posterior)
    unk_modes = {"": [], ".unk": ["--replace-unk"], ".unk-posterior": ["--replace-unk", "--unk-posterior"]}
    for name in systems:
        for suffix, flags in unk_modes.items():
            hyp = work / f"test.{name}{suffix}.de"
            ckpt = work / name / "checkpoint_last.pt"
            run(["nmtkit-translate", "--path", ckpt, "--beam", 5, "--batch-size", 64, "--threads", 1, "--device", "cpu",
                 *flags], f"translate-{name}{suffix.replace('.', '-')}", stdin=Path(f"{raw['test']}.en"), stdout=hyp)
            score = bleu(hyp, ref)
            n_unk = hyp.read_text(encoding="utf-8").count("<unk>")
            unk_from = {"": "-", ".unk": "attention", ".unk-posterior": "posterior"}[suffix]
            rows.append([name, "yes" if flags else "no", unk_from, f"{score:.2f}", n_unk])
            records.append({"system": f"nmtkit-{name}", "replace_unk": bool(flags), "unk_from": unk_from, "bleu": round(score, 2),
                            "unk_left": n_unk, "train_wall_s": seconds, "arch": args.arch})
    table = bl.md_table(["model", "--replace-unk", "source word from", "BLEU test2016", "<unk> left in output"], rows)
    load_after = bl.uptime_line()
    body = (f"Multi30k En->De, word level (Moses tokens, words seen once -> <unk>), `{args.arch}`, batches of 64, Adam, "
            f"{args.minutes:g} min of training each, side by side (one core each), seed 1; guided: "
            f"`--guided-alignment-weight {args.weight:g}` towards eflomal 2.0.0's grow-diag-final-and links of the raw "
            f"training pairs. checkpoint_last.pt of each; beam 5; sacreBLEU on detokenized output vs raw test2016.de.\n\n{table}\n")
    print(body)
    if args.record:
        bl.append_results(bl.section("guided alignment on Multi30k: BLEU and --replace-unk", bl.machine_info(), load_before,
                                     load_after, bl.software_line({}), body, cmds))
        bl.append_jsonl(records, {"bench": "guided_m30k", "pair": "en-de", "set": "test2016",
                                  "load": {"before": load_before, "after": load_after}})
    print(shlex.join(["done", str(work)]))


if __name__ == "__main__":
    main()
