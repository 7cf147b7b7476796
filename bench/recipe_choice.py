#!/usr/bin/env python3
"""Which set-up the Multi30k recipe trains, chosen on valid (issue 36: "a Transformer preset chosen on valid").

Each candidate (``--candidates``: ``LABEL:VAR=VALUE,VAR=VALUE``, the recipe's variables such as
``ARCH`` and ``MAX_UPDATE``) runs examples/multi30k/run.sh with ``SPLIT=valid``, the same seed and
``--hours`` of training on one core, the candidates side by side (two at a time on this 2-core
machine).  The recipe then translates the valid set with beam 5, from its best checkpoint (valid
loss) and from the average of its last checkpoints, and scores both.  The candidate whose average
has the highest valid BLEU is the choice.  test2016 is never translated here: the recipe suite
(``bench/quality.py --arch``) reports it for the chosen set-up only.

``--record`` writes one ``recipe_choice`` record per candidate, the choice marked.

``--phase test`` comes once the choice is made (its work folder reused, nothing retrained): the
recipe translates test2016 with the chosen candidate's best and averaged checkpoints, and every
candidate's averaged checkpoint together translate valid and test2016 as one ensemble (the
candidates share the recipe's data and dictionary).  ``--record`` writes them as ``quality``
records, the recipe's own kind, for one model and for two.

    python bench/recipe_choice.py --work /root/m30k-choice --hours 2 --record \\
        --candidates tiny8k:ARCH=transformer_tiny,MAX_UPDATE=8000 tiny16k:ARCH=transformer_tiny,MAX_UPDATE=16000
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import threading
import time
from pathlib import Path

import benchlib as bl
from quality import lowercased_tokenized_bleu, read_log, score

RECIPE = bl.REPO / "examples" / "multi30k" / "run.sh"
#: The recipe's variables a candidate may set.
VARIABLES = ("ARCH", "MAX_UPDATE", "UPDATE_FREQ", "AVG", "AMP", "TRAIN_ARGS")


def parse_candidate(text: str) -> tuple[str, dict[str, str]]:
    """``tiny16k:ARCH=transformer_tiny,MAX_UPDATE=16000`` -> (label, variables); one-line errors."""
    label, _, spec = text.partition(":")
    if not label or not label.replace("-", "").replace("_", "").isalnum():
        raise SystemExit(f"--candidates {text!r}: give LABEL:VAR=VALUE,... (a label of letters, digits, - or _)")
    env = {}
    for item in filter(None, spec.split(",")):
        var, eq, value = item.partition("=")
        if not eq or var not in VARIABLES or not value:
            raise SystemExit(f"--candidates {text!r}: {item!r} is not VAR=VALUE with VAR one of {', '.join(VARIABLES)}")
        env[var] = value
    if "ARCH" not in env:
        raise SystemExit(f"--candidates {text!r}: name the model (ARCH=...)")
    return label, env


def valid_scores(work: Path, label: str) -> dict[str, float]:
    """BLEU of the candidate's best and averaged checkpoints on valid, from the recipe's score lines
    (``valid.LABEL-best`` / ``valid.LABEL-avgN``, then nmtkit-score's ``BLEU value`` fields)."""
    found = {}
    for line in (work / "scores.txt").read_text(encoding="utf-8").splitlines():
        name, *fields = line.split("\t")
        if not name.startswith(f"valid.{label}-"):
            continue
        cells = [c for c in fields if c]
        bleu = next(float(cells[k + 1]) for k in range(len(cells) - 1) if cells[k] == "BLEU")
        # the suffix after the label: a label may itself hold "-avg" (tiny16k-avg10)
        found["avg" if name[len(f"valid.{label}-"):].startswith("avg") else "best"] = bleu
    if set(found) != {"best", "avg"}:
        raise SystemExit(f"{work / 'scores.txt'}: no valid scores of {label} (see {work / (label + '.log')})")
    return found


def recipe_env(args: argparse.Namespace, work: Path, split: str) -> dict[str, str]:
    """The recipe's environment shared by every candidate: work folder, budget, one thread, seed, split."""
    return {**os.environ, "WORK": str(work), "HOURS": str(args.hours), "THREADS": "1", "SEED": str(args.seed),
            "SPLIT": split, "NMTKIT_DATA": args.data}


def trained_precision(env: dict[str, str]) -> str:
    """What the candidate trained in: its ``AMP``, or what ``--amp auto`` picks on this CPU."""
    from nmtkit.utils.amp import cpu_has_native_bf16

    amp = env.get("AMP", "auto")
    return amp if amp != "auto" else ("bf16" if cpu_has_native_bf16() else "none")


def run_candidates(args: argparse.Namespace, work: Path, candidates: dict[str, dict[str, str]]) -> dict[str, bl.Run]:
    """The recipe for every candidate, ``len(cores)`` at a time; the first preprocesses the data,
    which the others then share (they start once its data directory is written)."""
    cores = sorted(os.sched_getaffinity(0))
    base = recipe_env(args, work, "valid")
    labels = list(candidates)
    runs: dict[str, bl.Run] = {}
    first_done = threading.Event()  # the preprocessing candidate ended (so a failed one cannot leave the others waiting)

    def one(k: int, wave: list[str]) -> None:
        label = wave[k]
        env = {**base, **candidates[label], "RUN": label}
        if k > 0:
            while not (work / "data" / "meta.json").exists():
                if first_done.is_set():
                    raise SystemExit(f"{work / 'data'}: not preprocessed (see {work / (wave[0] + '.log')})")
                time.sleep(2)
        try:
            runs[label] = bl.run_cmd(["taskset", "-c", str(cores[k % len(cores)]), "bash", RECIPE], work / f"{label}.log", env=env)
        finally:
            if k == 0:
                first_done.set()

    for start in range(0, len(labels), len(cores)):
        wave = labels[start:start + len(cores)]
        bl.in_parallel(lambda k: one(k, wave), len(wave))
    return runs


def test_chosen(args: argparse.Namespace, work: Path, candidates: dict[str, dict[str, str]]) -> None:
    """test2016 of the candidate chosen on valid (one model) and of all candidates ensembled (two)."""
    scores = {label: valid_scores(work, label) for label in candidates}
    choice = max(candidates, key=lambda label: scores[label]["avg"])
    raw = Path(args.data) / "multi30k"
    env = {**recipe_env(args, work, "test2016"), **candidates[choice], "RUN": choice}
    load_before = bl.uptime_line()
    commands = [bl.run_cmd(["bash", RECIPE], work / f"{choice}.test2016.log", env=env).shell()]
    ensemble = "+".join(candidates)
    paths = ":".join(str(work / label / "checkpoint_avg.pt") for label in candidates)
    for split in ("valid", "test2016"):
        hyp = work / f"{split}.ensemble-{ensemble}.hyp.de"
        cmd = [bl.nmtkit_bin("nmtkit-translate"), "--path", paths, "--beam", "5", "--batch-size", "64", "--threads", "1"]
        if not hyp.exists():
            bl.run_cmd(cmd, work / f"ensemble.{split}.log", stdin=raw / f"{split}.en", stdout=hyp)
        commands.append(f"{shlex.join(cmd)} < {raw / f'{split}.en'} > {hyp}")
    load_after = bl.uptime_line()
    ref = raw / "test2016.de"
    wall = {label: read_log(work / label / "train_log.jsonl")["train_wall_s"] for label in candidates}
    averaged = next(work.glob(f"test2016.{choice}-avg*.hyp.de"), None)
    if averaged is None:
        raise SystemExit(f"{work}: no test2016 translation of {choice}'s average (see {work / (choice + '.test2016.log')})")
    systems = [("single", choice, work / f"test2016.{choice}-best.hyp.de"), ("averaged", choice, averaged),
               ("ensemble", ensemble, work / f"test2016.ensemble-{ensemble}.hyp.de")]
    rows, records = [], []
    for system, label, hyp in systems:
        amp = "+".join(sorted({trained_precision(candidates[part]) for part in label.split("+")}))
        bleu, chrf = score(hyp, ref)
        lc = lowercased_tokenized_bleu(hyp, ref, "de")
        arch = "+".join(candidates[part]["ARCH"] for part in label.split("+"))
        hours = max(wall[part] for part in label.split("+")) / 3600
        rows.append([system, label, arch, f"{bleu:.2f}", f"{lc:.2f}", f"{chrf:.2f}", f"{hours:.2f}"])
        records.append({"system": system, "toolkit": f"nmtkit-{'fp32' if amp == 'none' else amp}", "amp": amp, "arch": arch,
                        "candidates": label, "seed": args.seed,
                        "settings": {part: candidates[part] for part in label.split("+")},
                        "bleu": round(bleu, 2), "bleu_lc_tok": round(lc, 2), "chrf": round(chrf, 2),
                        "train_wall_s": round(hours * 3600), "chosen_on": "valid (recipe_choice)"})
    valid_ens, _ = score(work / f"valid.ensemble-{ensemble}.hyp.de", raw / "valid.de")
    table = bl.md_table(["system", "candidate(s)", "arch", "BLEU", "BLEU (lowercased, Moses-tokenized)", "chrF", "train h"], rows)
    body = (f"The candidate chosen on valid (**{choice}**, valid BLEU of its average {scores[choice]['avg']:.2f}) and the "
            f"ensemble of every candidate's average (valid BLEU {valid_ens:.2f}), each model trained {args.hours:g} h on one "
            f"core (side by side) by examples/multi30k/run.sh, in the precision it picks (--amp auto); test2016 translated "
            f"once, beam 5, scored with sacreBLEU (cased, detokenized) and chrF2.\n\n{table}\n")
    print("\n" + table)
    if args.record:
        bl.append_results(bl.section("quality: Multi30k en-de test2016, the recipe set-up chosen on valid", bl.machine_info(),
                                     load_before, load_after, bl.software_line({}), body, commands))
        bl.append_jsonl(records, {"bench": "quality", "pair": "en-de", "set": "test2016",
                                  "load": {"before": load_before, "after": load_after}})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_common_args(ap)
    ap.add_argument("--candidates", nargs="+", required=True, metavar="LABEL:VAR=VALUE,...")
    ap.add_argument("--hours", type=float, default=2.0, help="training wall time of each candidate (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--phase", choices=["choose", "test"], default="choose",
                    help="choose: train the candidates and score valid; test: once chosen, test2016 of the choice and of "
                         "the candidates' ensemble (default: %(default)s)")
    args = ap.parse_args()
    candidates = dict(parse_candidate(c) for c in args.candidates)
    work = Path(args.work)
    bl.check_outside_repo(work)
    bl.check_raw_data(args.data)
    if args.phase == "test":
        return test_chosen(args, work, candidates)
    work.mkdir(parents=True, exist_ok=True)
    load_before = bl.uptime_line()
    runs = run_candidates(args, work, candidates)
    load_after = bl.uptime_line()
    scores = {label: valid_scores(work, label) for label in candidates}
    choice = max(candidates, key=lambda label: scores[label]["avg"])
    rows = []
    records = []
    for label, env in candidates.items():
        log = work / label / "train_log.jsonl"
        events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
        updates = max((e.get("update", 0) for e in events), default=0)
        setting = ", ".join(f"{k}={v}" for k, v in env.items())
        rows.append([label + (" (chosen)" if label == choice else ""), setting, f"{updates:,}", f"{scores[label]['best']:.2f}",
                     f"{scores[label]['avg']:.2f}", f"{runs[label].wall / 60:.0f}"])
        records.append({"candidate": label, "setting": env, "updates": updates, "hours": args.hours, "seed": args.seed,
                        "valid_bleu_best": scores[label]["best"], "valid_bleu_avg": scores[label]["avg"],
                        "chosen": label == choice})
    table = bl.md_table(["candidate", "recipe variables", "updates", "valid BLEU, best checkpoint", "valid BLEU, average",
                         "recipe wall min"], rows)
    print("\n" + table)
    if not args.record:
        return
    body = (f"examples/multi30k/run.sh with SPLIT=valid, seed {args.seed}, {args.hours:g} h of training on one core each "
            f"(side by side); valid translated with beam 5 and scored with sacreBLEU (cased, detokenized); the choice is the "
            f"highest valid BLEU of the averaged checkpoints: **{choice}**. test2016 was not translated.\n\n{table}\n")
    bl.append_results(bl.section("Multi30k recipe: the set-up chosen on valid", bl.machine_info(), load_before, load_after,
                                 bl.software_line({}), body, [r.shell() for r in runs.values()]))
    bl.append_jsonl(records, {"bench": "recipe_choice", "pair": "en-de", "set": "valid",
                              "load": {"before": load_before, "after": load_after}})


if __name__ == "__main__":
    main()
