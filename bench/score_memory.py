#!/usr/bin/env python3
"""Peak memory of ``nmtkit-score`` (default metrics: BLEU and chrF) on a ~1M-line synthetic corpus.

Why: scoring 1,052,731 lines (50 MB) grew past 11 GB and died in sacrebleu's chrF reference cache;
nmtkit now sums sufficient statistics chunk by chunk (``nmtkit.evaluate.metrics.CorpusAccumulator``),
so the peak should stay near what one chunk and the interpreter need, whatever the corpus size.

The system output and reference are generated (seeded) in a temporary folder outside the repository;
the command runs as a subprocess and its peak RSS is wait4's ``ru_maxrss`` (benchlib.run_cmd).

The peer is sacreBLEU's own command line on the same files, the same metrics (``sacrebleu REF -i
SYS -m bleu chrf -b``), back to back in the same invocation, under an address-space cap
(``--peer-cap-gib``, ``prlimit``) so that the blow-up this suite was written for cannot take the
machine: a run stopped by the cap is recorded as such.  Both scores are compared: nmtkit's chunked
sums must give sacreBLEU's figures.

``--record`` (from a committed tree only) appends a row to bench/results.jsonl and writes the
run's report to WORK/logs.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from pathlib import Path

import benchlib as bl

WORDS = ("the a of and to in is was for on that with as by at from his her it an were are which this be "
         "man woman dog cat house city river street car bike child children ball water red blue green small "
         "large old young two three walks runs sits plays stands looks holds wears rides eats").split()


def write_corpus(folder: Path, lines: int, seed: int) -> tuple[Path, Path]:
    """``sys.txt`` and ``ref.txt``: about 50 bytes a line; the system output is the reference with
    about one word in six replaced, dropped or added, so both metrics have real work to do."""
    rng = random.Random(seed)
    sys_path, ref_path = folder / "sys.txt", folder / "ref.txt"
    with open(sys_path, "w", encoding="utf-8") as fs, open(ref_path, "w", encoding="utf-8") as fr:
        for _ in range(lines):
            ref = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
            hyp = []
            for w in ref:
                r = rng.random()
                if r < 0.06:
                    continue
                hyp.append(rng.choice(WORDS) if r < 0.12 else w)
                if r > 0.96:
                    hyp.append(rng.choice(WORDS))
            fr.write(" ".join(ref).capitalize() + " .\n")
            fs.write(" ".join(hyp).capitalize() + " .\n")
    return sys_path, ref_path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=1_052_731, help="corpus size in lines (default: %(default)s, the report's)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--record", action=bl.RecordFromCommit, nargs=0, default=False,
                    help="append to bench/RESULTS.md and bench/results.jsonl (only from a committed tree)")
    ap.add_argument("--peer-cap-gib", type=float, default=16.0,
                    help="address-space cap of the sacreBLEU run (default: %(default)s GiB; 0: no peer run)")
    args = ap.parse_args()
    load_before = bl.uptime_line()
    with tempfile.TemporaryDirectory(prefix="nmtkit-score-memory-") as tmp:
        folder = Path(tmp)
        sys_path, ref_path = write_corpus(folder, args.lines, args.seed)
        mb = (sys_path.stat().st_size + ref_path.stat().st_size) / 2**20
        # this checkout's nmtkit, whatever is installed
        env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(bl.REPO), os.environ.get("PYTHONPATH")]))}
        cmd = [sys.executable, "-m", "nmtkit.cli.score", "--sys", sys_path, "--ref", ref_path]
        run = bl.run_cmd(cmd, folder / "score.log", stdout=folder / "scores.tsv", env=env)
        scores = {line.split("\t")[1]: float(line.split("\t")[2])
                  for line in (folder / "scores.tsv").read_text(encoding="utf-8").splitlines()}
        peer = sacrebleu_run(folder, sys_path, ref_path, args.peer_cap_gib) if args.peer_cap_gib > 0 else {}
    load_after = bl.uptime_line()
    body = (f"nmtkit-score, default metrics (BLEU, chrF), on {args.lines:,} synthetic lines "
            f"({mb:.0f} MB system output + reference, seed {args.seed}): "
            f"peak RSS {run.maxrss_mb:,.0f} MB, {run.wall:.0f} s wall, {run.cpu:.0f} s CPU; "
            + ", ".join(f"{k} {v:.2f}" for k, v in scores.items()) + ".\n" + peer_line(peer, scores))
    print("\n" + body)
    if args.record:
        shown = ["python -m nmtkit.cli.score --sys sys.txt --ref ref.txt  # bench/score_memory.py "
                 f"--lines {args.lines} --seed {args.seed}"]
        bl.append_results(bl.section("score: peak memory on a large corpus", bl.machine_info(), load_before,
                                     load_after, bl.software_line({}), body, shown))
        bl.append_jsonl([{"lines": args.lines, "mb": round(mb, 1), "metrics": "bleu,chrf", "maxrss_mb": round(run.maxrss_mb, 1),
                          "wall_s": round(run.wall, 1), "cpu_s": round(run.cpu, 1), "scores": scores, **peer}],
                        {"bench": "score_memory", "load": {"before": load_before, "after": load_after}})


def sacrebleu_run(folder: Path, sys_path: Path, ref_path: Path, cap_gib: float) -> dict:
    """sacreBLEU's command line on the same files and metrics, under an address-space cap ->
    the peer fields of the record (``peer_scores`` empty and ``peer_failure`` set when it did not
    finish: the cap (a MemoryError or a signal) or any other error, in the log's last line)."""
    import json
    from importlib.metadata import version

    cap = str(int(cap_gib * 2**30))
    cmd = ["prlimit", f"--as={cap}", sys.executable, "-m", "sacrebleu", ref_path, "-i", sys_path, "-m", "bleu", "chrf",
           "-f", "json", "-w", "4"]
    run = bl.run_cmd(cmd, folder / "sacrebleu.log", stdout=folder / "sacrebleu.json", check=False)
    peer = {"peer": f"sacrebleu {version('sacrebleu')}", "peer_cap_gib": cap_gib, "peer_rc": run.rc,
            "peer_maxrss_mb": round(run.maxrss_mb, 1), "peer_wall_s": round(run.wall, 1), "peer_cpu_s": round(run.cpu, 1),
            "peer_scores": {}}
    try:  # one object per metric, each named: no reliance on the order sacreBLEU prints them in
        peer["peer_scores"] = {m["name"]: float(m["score"]) for m in json.loads((folder / "sacrebleu.json").read_text(encoding="utf-8"))}
    except (ValueError, KeyError, TypeError):
        log = (folder / "sacrebleu.log").read_text(encoding="utf-8", errors="replace").strip().splitlines()
        capped = run.rc < 0 or any(m in line for line in log for m in ("MemoryError", "Cannot allocate memory", "out of memory"))
        peer["peer_failure"] = f"its {cap_gib:g} GiB address-space cap" if capped else (log[-1] if log else f"status {run.rc}")
    return peer


def peer_line(peer: dict, scores: dict) -> str:
    """The peer's sentence of the report, and whether both tools give the same scores (nmtkit
    prints 2 decimals, sacreBLEU 4 here: a tie of rounding differs by 0.005)."""
    if not peer:
        return ""
    if not peer["peer_scores"]:
        return (f"{peer['peer']} (`sacrebleu -m bleu chrf`) did not finish (status {peer['peer_rc']}; "
                f"{peer.get('peer_failure', '?')}) after {peer['peer_wall_s']:.0f} s at {peer['peer_maxrss_mb']:,.0f} MB.\n")
    same = all(abs(v - scores.get(k, float("nan"))) <= 0.0051 for k, v in peer["peer_scores"].items())
    return (f"{peer['peer']} on the same files: peak RSS {peer['peer_maxrss_mb']:,.0f} MB, {peer['peer_wall_s']:.0f} s wall; "
            + ", ".join(f"{k} {v:.2f}" for k, v in peer["peer_scores"].items())
            + (" (the same scores)" if same else " (scores DIFFER from nmtkit's)") + ".\n")


if __name__ == "__main__":
    main()
