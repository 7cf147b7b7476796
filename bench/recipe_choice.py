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

    python bench/recipe_choice.py --work /root/m30k-choice --hours 2 --record \\
        --candidates tiny8k:ARCH=transformer_tiny,MAX_UPDATE=8000 tiny16k:ARCH=transformer_tiny,MAX_UPDATE=16000
"""
from __future__ import annotations

import argparse
import json
import os
import threading
import time
from pathlib import Path

import benchlib as bl

RECIPE = bl.REPO / "examples" / "multi30k" / "run.sh"
#: The recipe's variables a candidate may set.
VARIABLES = ("ARCH", "MAX_UPDATE", "AVG", "AMP")


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
        found["avg" if "-avg" in name else "best"] = bleu
    if set(found) != {"best", "avg"}:
        raise SystemExit(f"{work / 'scores.txt'}: no valid scores of {label} (see {work / (label + '.log')})")
    return found


def run_candidates(args: argparse.Namespace, work: Path, candidates: dict[str, dict[str, str]]) -> dict[str, bl.Run]:
    """The recipe for every candidate, ``len(cores)`` at a time; the first preprocesses the data,
    which the others then share (they start once its data directory is written)."""
    cores = sorted(os.sched_getaffinity(0))
    base = {**os.environ, "WORK": str(work), "HOURS": str(args.hours), "THREADS": "1", "SEED": str(args.seed),
            "SPLIT": "valid", "NMTKIT_DATA": args.data}
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_common_args(ap)
    ap.add_argument("--candidates", nargs="+", required=True, metavar="LABEL:VAR=VALUE,...")
    ap.add_argument("--hours", type=float, default=2.0, help="training wall time of each candidate (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    candidates = dict(parse_candidate(c) for c in args.candidates)
    work = Path(args.work)
    bl.check_outside_repo(work)
    bl.check_raw_data(args.data)
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
