"""One entry for every benchmark: ``python -m bench run SUITE [--record] [options]``.

Each suite measures nmtkit and its peers on this host in one invocation (side by side or back to
back as the suite requires), by running the suite's scripts in order with the common options
(``--work``, ``--data``, ``--peers``, ``--record``) and, after ``--``, options for every step.
``--record`` is refused at once on a tree that is not a commit (benchlib.uncommitted_changes), and
on a host that has not been probed (``python -m bench probe``: every speed record gives its share of
the host's peak).

    python -m bench probe                          # once per host: fingerprint + one-thread peaks
    python -m bench run train-speed --record       # and preprocess, quality-per-hour, translate-speed,
                                                   #     score-memory, aer, recipe, gpu
    python -m bench run train-speed --smoke        # tiny settings: checks the pipeline, records nothing
    python -m bench plan SUITE                     # the steps a suite runs, without running them
    python -m bench report                         # regenerate bench/RESULTS.md from the records
    python -m bench records [--fix]                # check results.jsonl: repeated runs, hand-written lines
    python -m bench peers                          # each peer's set-up and where it comes from
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the scripts import each other as top-level modules (benchlib, flops, ...)
    sys.path.insert(0, str(HERE))

#: suite -> steps: (module, argv); "{work}" is the suite's work folder.  The defaults reproduce
#: every headline of the suite; ``SMOKE`` adds tiny settings per module.
WU_CANDIDATES = ["--candidates", "wu8k:ARCH=transformer_tiny,MAX_UPDATE=8000,AVG=10,TRAIN_ARGS=--update-freq 2",
                 "tiny16k-avg10:ARCH=transformer_tiny,MAX_UPDATE=16000,AVG=10,UPDATE_FREQ=1"]
SUITES: dict[str, dict] = {
    "preprocess": {"work": "/root/nmtkit-bench", "steps": [("preprocess", [])]},
    "train-speed": {"work": "/root/nmtkit-bench", "needs": "preprocess", "steps": [
        ("train_speed", ["--peer", "opennmt", "--arch", "luong_small", "--amp", "none", "--threads", "1"]),
        ("train_speed", ["--peer", "opennmt", "--arch", "luong_small", "--amp", "bf16", "--threads", "1"]),
        ("train_speed", ["--peer", "marian", "--arch", "rnnsearch_small", "--amp", "none", "--threads", "1", "--max-update", "250"]),
        ("train_speed", ["--peer", "marian", "--arch", "rnnsearch_small", "--amp", "bf16", "--threads", "1", "--max-update", "250"]),
        # the 2-thread figures (a quiet 2-core machine: nothing else may run)
        ("train_speed", ["--peer", "opennmt", "--arch", "luong_small", "--amp", "none", "--threads", "2"]),
        ("train_speed", ["--peer", "opennmt", "--arch", "luong_small", "--amp", "bf16", "--threads", "2"]),
        ("train_speed", ["--peer", "marian", "--arch", "rnnsearch_small", "--amp", "none", "--threads", "2", "--max-update", "250"]),
        ("train_speed", ["--peer", "marian", "--arch", "rnnsearch_small", "--amp", "bf16", "--threads", "2", "--max-update", "250"]),
        # the Transformer against fairseq's at Wu et al.'s tiny shape, 4096-token batches
        *[("train_speed", ["--peer", "fairseq", "--arch", "transformer_tiny", "--max-tokens", "4096", "--amp", amp,
                           "--threads", threads, "--max-update", "150"]) for threads in ("1", "2") for amp in ("none", "bf16")],
    ]},
    "quality-per-hour": {"work": "/root/qph", "steps": [
        # the same tuning budget on valid for every system (4 variants x 15 min each), then 2 seeds x 1 h each
        ("quality_per_hour", ["--phase", "tune", "--systems", "nmtkit-fp32", "nmtkit-bf16", "opennmt", "marian", "fairseq",
                              "--tune-hours", "0.25"]),
        ("quality_per_hour", ["--systems", "nmtkit-fp32", "nmtkit-bf16", "opennmt", "marian", "fairseq", "--seeds", "1", "2",
                              "--hours", "1"]),
        ("quality_per_hour", ["--phase", "report"]),
    ]},
    # the Transformers (nmtkit transformer_tiny; fairseq's and OpenNMT-py's at the same shape, each with its recipe),
    # 2 seeds x 1 h: 3 waves of 2 runs side by side (finished runs are kept, so it may span sessions); a WORK of its
    # own since the Xavier fix of fc22460 (/root/qph-transformer holds the runs trained before it); the waves are
    # nmtkit beside fairseq (seed 1, then seed 2), then OpenNMT-py's two seeds
    "transformer-per-hour": {"work": "/root/qph-transformer3", "steps": [
        ("quality_per_hour", ["--systems", "nmtkit-transformer", "fairseq-transformer", "opennmt-transformer",
                              "--seeds", "1", "2", "--hours", "1"]),
        ("quality_per_hour", ["--phase", "report"]),
    ]},
    # their translation speed: nmtkit's paths (int8 with a shortlist chosen on valid too), fairseq-interactive,
    # OpenNMT-py's onmt_translate and CTranslate2 on the fairseq model
    "transformer-translate-speed": {"work": "/root/qph-transformer3", "needs": "transformer-per-hour", "steps": [
        ("shortlist_valid", ["--nmtkit-run", "nmtkit-transformer"]),
        ("translate_speed", ["--nmtkit-run", "nmtkit-transformer", "--threads", "1", "--repeat", "3"]),
    ]},
    "translate-speed": {"work": "/root/qph", "needs": "quality-per-hour", "steps": [
        ("shortlist_valid", []),
        ("translate_speed", ["--threads", "1", "2", "--repeat", "3"]),
    ]},
    # the recurrent translation-speed pair within one session (the full suite above needs the ~10 h
    # quality-per-hour run on the same host): nmtkit-fp32 and OpenNMT-py at luong_m30k's size, trained
    # side by side (one core each) for the same half hour, then timed alone; records say 0.5 h each
    "translate-speed-session": {"work": "/root/qph-tspeed", "steps": [
        ("quality_per_hour", ["--systems", "nmtkit-fp32", "opennmt", "--seeds", "1", "--hours", "0.5"]),
        ("shortlist_valid", []),
        ("translate_speed", ["--threads", "1", "--repeat", "3"]),
    ]},
    "score-memory": {"steps": [("score_memory", [])]},
    # the configuration of the recorded AER runs: all 310,661 pairs, rnnsearch_small both directions,
    # 6 rounds of 20 minutes, then 2 rounds of guided models (eflomal's links); steps are cached in WORK
    "aer": {"work": "/root/aer", "steps": [("aer_hansards", ["--max-train", "0", "--arch", "rnnsearch_small", "--rounds", "6",
                                                             "--train-minutes", "20", "--guided-rounds", "2"])]},
    # the Transformer on the same Hansards data (its own WORK: its steps would take the recurrent ones' names):
    # plain models read at every decoder layer (the default layer is chosen on these dev pairs), then guided
    # ones (Garg et al. 2019: eflomal's links supervise the alignment layer's cross-attention); 2 plain rounds
    # (enough to rank the layers) leave the guided models 3, all in a 3-hour session
    "aer-transformer": {"work": "/root/aer-transformer", "steps": [("aer_hansards", [
        "--max-train", "0", "--arch", "transformer_tiny", "--batch-size", "0", "--train-args", "--max-tokens 4096",
        "--preprocess-args=--joined-dictionary",  # transformer_tiny ties all embeddings ("=": a value that looks like a flag)
        "--rounds", "2", "--train-minutes", "20", "--guided-rounds", "3", "--guided-args", "--alignment-heads 1",
        "--alignment-layers", "0", "1", "2", "3"])]},
    # the guided Transformer with Garg et al.'s full target context (section 4.2) at the alignment layer: only the
    # guided models (the plain ones and eflomal's figures are aer-transformer's), 3 rounds of 20 minutes
    "aer-transformer-full": {"work": "/root/aer-transformer-full", "steps": [("aer_hansards", [
        "--max-train", "0", "--arch", "transformer_tiny", "--batch-size", "0", "--train-args", "--max-tokens 4096",
        "--preprocess-args=--joined-dictionary", "--rounds", "0", "--train-minutes", "20", "--guided-rounds", "3",
        "--guided-args", "--alignment-heads 1 --full-context-alignment", "--alignment-layers", "0", "1", "2", "3"])]},
    # the default alignment layer, chosen on these dev pairs (issue 36): aer-transformer-full supervises and reads
    # the default (-2, Garg et al.'s penultimate layer); this one the last layer, otherwise the same
    "aer-transformer-last-layer": {"work": "/root/aer-transformer-last", "steps": [("aer_hansards", [
        "--max-train", "0", "--arch", "transformer_tiny", "--batch-size", "0", "--train-args", "--max-tokens 4096",
        "--preprocess-args=--joined-dictionary", "--rounds", "0", "--train-minutes", "20", "--guided-rounds", "3",
        "--guided-args", "--alignment-heads 1 --full-context-alignment --alignment-layer -1"])]},
    # the Transformer set-up of the Multi30k recipe, chosen on valid (2 h each, side by side; test2016 untouched):
    # Wu et al.'s 8,000 updates take one core about an hour now: the 2 h go to more updates of their tiny
    # shape or to the wider transformer_m30k
    "recipe-choice": {"work": "/root/m30k-choice", "steps": [("recipe_choice", [
        "--hours", "2", "--candidates", "tiny16k:ARCH=transformer_tiny,MAX_UPDATE=16000,AVG=5,UPDATE_FREQ=1",
        "m30k:ARCH=transformer_m30k,MAX_UPDATE=16000,AVG=5,UPDATE_FREQ=1"]),
        # then test2016, once: the chosen candidate alone, and all candidates ensembled
        ("recipe_choice", ["--phase", "test", "--hours", "2", "--candidates", "tiny16k:ARCH=transformer_tiny,MAX_UPDATE=16000,AVG=5,UPDATE_FREQ=1",
                           "m30k:ARCH=transformer_m30k,MAX_UPDATE=16000,AVG=5,UPDATE_FREQ=1"])]},
    # Wu et al.'s own recipe (github LividWo/Revisit-MMT: 2 GPUs x 4,096 tokens, 8,000 updates, the last 10
    # epochs averaged) against the first choice's 16,000 updates of 4,096 with 10 averaged; then test2016 once
    # for the one chosen on valid, and the two tiny models ensembled (the >= 42 try of issue 36)
    "recipe-choice-wu": {"work": "/root/m30k-choice-wu", "steps": [
        ("recipe_choice", ["--hours", "2", *WU_CANDIDATES]), ("recipe_choice", ["--phase", "test", "--hours", "2", *WU_CANDIDATES])]},
    # the lecture's self-attention "soft match" fed to the recurrent encoder (issue 36): the recurrent recipe with
    # and without --encoder-self-attention, side by side, scored on valid only
    "encoder-self-attention": {"work": "/root/m30k-selfatt", "steps": [("recipe_choice", [
        "--hours", "0.5", "--candidates", "plain:ARCH=luong_m30k", "selfatt:ARCH=luong_m30k,TRAIN_ARGS=--encoder-self-attention"])]},
    # the Multi30k recipe (examples/multi30k): 2 seeds side by side for 2 h, float32 and bf16
    "recipe": {"work": "/root/m30k-recipe", "steps": [
        ("quality", ["--amp", "none", "--seeds", "1", "2", "--hours", "2"]),
        ("quality", ["--amp", "bf16", "--seeds", "1", "2", "--hours", "2"]),
    ]},
    # the Transformer recipe (Wu et al.'s, chosen on valid): 2 seeds side by side for 2 h in bf16, each single and
    # averaged, and the two averages as an ensemble (issue 36: >= 41 for one model, >= 42 for two)
    "recipe-transformer": {"work": "/root/m30k-recipe-transformer", "steps": [
        ("quality", ["--arch", "transformer_tiny", "--amp", "bf16", "--seeds", "1", "2", "--hours", "2"]),
    ]},
    # on a CUDA machine (through the device tool: bench/gpu_run.sh is the whole call there), on the
    # quality-per-hour data; measure writes files, report scores and records them
    "gpu": {"work": "/root/qph", "needs": "quality-per-hour (its data directory)", "steps": [
        ("gpu_speed", ["measure", "--data", "{work}/data", "--test", "{data}/multi30k/test2016.en", "--out-dir", "{work}/gpu",
                       "--commit", "{commit}"]),
        ("gpu_speed", ["report", "--from", "{work}/gpu", "--ref", "{data}/multi30k/test2016.de"]),
    ]},
}

#: Steps that measure only and never take --record (the records are written by a later step).
NO_RECORD = {("gpu_speed", "measure")}

#: Tiny settings per module for ``--smoke`` (a pipeline check in seconds to minutes, nothing recorded).
SMOKE = {
    "train_speed": ["--max-update", "110"],  # two log windows of 50 updates: the steady-state rate needs both
    "quality_per_hour": ["--hours", "0.01", "--seeds", "1", "--tune-hours", "0.005"],
    "translate_speed": ["--repeat", "1"],
    "score_memory": ["--lines", "2000"],
    "preprocess": ["--bpe-merges", "500"],
    "aer_hansards": ["--max-train", "2000", "--rounds", "1", "--train-minutes", "0.5", "--guided-rounds", "0"],
    "quality": ["--hours", "0.01", "--seeds", "1"],
    # 0.02 h: one epoch of transformer_test, so that there is a checkpoint to average
    "recipe_choice": ["--hours", "0.02", "--candidates", "a:ARCH=transformer_test,AVG=1",
                      "b:ARCH=transformer_test,MAX_UPDATE=200,AVG=1"],
}

#: Modules whose argument parser has no --work/--data/--peers (benchlib.add_common_args).
NO_COMMON = {"score_memory", "gemm_speed", "gpu_speed"}


def plan(suite: str, work: str | None, common: list[str], extra: list[str], smoke: bool) -> list[tuple[str, list[str]]]:
    """The steps of ``suite`` as (module, argv)."""
    import benchlib as bl

    spec = SUITES[suite]
    work = work or spec.get("work", "/root/nmtkit-bench")
    data = common[common.index("--data") + 1] if "--data" in common else bl.default_data()
    fill = {"{work}": work, "{data}": data, "{commit}": bl.git_commit().split(" ")[0]}
    out = []
    for module, argv in spec["steps"]:
        args = [_fill(a, fill) for a in argv]
        if module not in NO_COMMON:
            args += ["--work", work, *common]
        elif "--record" in common and (module, argv[0] if argv else "") not in NO_RECORD:
            args += ["--record"]
        if smoke:
            args += SMOKE.get(module, [])
        out.append((module, args + extra))
    return out


def parse_steps(text: str) -> set[int]:
    """``1-4,7`` -> {1, 2, 3, 4, 7}: steps of a suite, 1-based."""
    steps: set[int] = set()
    try:
        for part in text.split(","):
            first, _, last = part.partition("-")
            lo, hi = int(first), int(last or first)
            if lo < 1 or hi < lo:
                raise ValueError(part)
            steps.update(range(lo, hi + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: step numbers from 1, as 1-4,7") from None
    return steps


def _fill(arg: str, fill: dict[str, str]) -> str:
    for key, value in fill.items():
        arg = arg.replace(key, value)
    return arg


def run_step(module: str, argv: list[str]) -> None:
    print(f"\n=== python -m bench: {module} {' '.join(argv)}", flush=True)
    mod = importlib.import_module(module)
    old = sys.argv
    sys.argv = [f"python -m bench ({module})", *argv]
    try:
        mod.main()
    finally:
        sys.argv = old


def refuse_record(smoke: bool, suite: str = "") -> None:
    """--record: a committed tree and a probed host, checked before anything runs."""
    import benchlib as bl
    import host

    if smoke:
        raise SystemExit("--smoke runs tiny settings: it never records")
    changed = bl.uncommitted_changes()
    if changed:
        raise SystemExit(f"--record needs a committed tree; uncommitted: {', '.join(changed)}")
    fp = host.fingerprint()
    if suite != "gpu" and not host.cached_peak(fp["id"]):
        raise SystemExit(f"--record: this host ({fp['label']}, id {fp['id']}) has no probe in bench/hosts.jsonl; "
                         "run `python -m bench probe` first (and commit hosts.jsonl with the records)")


def records_command(argv: list[str]) -> None:
    """``python -m bench records [--fix]``: repeated runs, hand-written lines and hosts of
    results.jsonl (bench/records.py); ``--fix`` rewrites it and regenerates RESULTS.md
    (bench/report.py).  Here, above both, so that the record layer never imports the report."""
    from collections import Counter

    import records
    import report

    ap = argparse.ArgumentParser(prog="python -m bench records", description=(records.__doc__ or "").split("\n")[0])
    ap.add_argument("--fix", action="store_true", help="rewrite results.jsonl and results_archive.jsonl, regenerate RESULTS.md")
    args = ap.parse_args(argv)
    kept, archived, dropped = records.split(records.read(records.RESULTS_JSONL))
    print(f"{len(kept)} records; hand-written: {len(archived)} {dict(Counter(r['bench'] for r in archived))}; "
          f"repeated runs: {len(dropped)} {dict(Counter(r['bench'] for r in dropped))}")
    hosts = Counter(records.host_label(r) for r in kept)
    print("hosts: " + "; ".join(f"{h}: {n}" for h, n in hosts.most_common()))
    if args.fix:
        print(records.fix())
        report.main([])
    elif archived or dropped:
        raise SystemExit("results.jsonl needs `python -m bench records --fix`")


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[: argv.index("--")]
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("run", "plan"):
        p = sub.add_parser(name, help="run a suite" if name == "run" else "print a suite's steps")
        p.add_argument("suite", choices=sorted(SUITES))
        p.add_argument("--record", action="store_true", help="append the records (committed tree and probed host only)")
        p.add_argument("--work", help="work folder (default: the suite's)")
        p.add_argument("--data", help="folder holding multi30k/ (default: $NMTKIT_DATA or ../shared/data)")
        p.add_argument("--peers", help="peer venvs (default: $NMTKIT_PEERS or ~/nmt-peers)")
        p.add_argument("--smoke", action="store_true", help="tiny settings: a pipeline check, never recorded")
        p.add_argument("--steps", type=parse_steps, help="only these steps, numbered as `plan` prints them: "
                       "e.g. 1-4,7 (a suite longer than the time left; each step writes its own records)")
    for name, help_ in (("probe", "fingerprint this host and measure its one-thread peaks (writes bench/hosts.jsonl)"),
                        ("report", "regenerate bench/RESULTS.md"), ("records", "check (or --fix) bench/results.jsonl"),
                        ("peers", "the peers' set-ups and their sources")):
        sub.add_parser(name, help=help_, add_help=False)
    args, rest = ap.parse_known_args(argv)
    if args.cmd == "records":
        records_command(rest + extra)
        return
    if args.cmd in ("probe", "report"):
        module = {"probe": "host"}.get(args.cmd, args.cmd)
        importlib.import_module(module).main(rest + extra)
        return
    if args.cmd == "peers":
        import peers

        for suite in sorted({s.suite for s in peers.SETUPS}):
            print(f"{suite}:\n" + "\n".join(peers.report_lines(suite)) + "\n")
        return
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)} (options for every step go after --)")
    common = [*(["--data", args.data] if args.data else []), *(["--peers", args.peers] if args.peers else []),
              *(["--record"] if args.record else [])]
    steps = list(enumerate(plan(args.suite, args.work, common, extra, args.smoke), 1))
    if args.steps:
        if max(args.steps) > len(steps):
            ap.error(f"--steps: {args.suite} has {len(steps)} steps")
        steps = [(k, step) for k, step in steps if k in args.steps]
    if args.cmd == "plan":
        if SUITES[args.suite].get("needs"):
            print(f"# needs: {SUITES[args.suite]['needs']}")
        for k, (module, a) in steps:
            print(f"{k:2d}  python bench/{module}.py {' '.join(a)}")
        return
    if args.record:
        refuse_record(args.smoke, args.suite)
    for _, (module, a) in steps:
        run_step(module, a)


if __name__ == "__main__":
    main()
