"""Generate bench/RESULTS.md from bench/results.jsonl and bench/hosts.jsonl (``python -m bench report``).

Nothing here is measured and nothing in RESULTS.md is typed by hand: every figure is copied from
a record, with its host, date and commit.  Layout:

* the hosts (fingerprint label, the CPU flags that choose kernels, the probed one-thread peaks);
* "At a glance" (bench/glance.py): the newest like-for-like and fast-path figure of each kind;
* one short section per bench kind, the newest host first, a host column in every table; of the
  records that measure the same thing on the same host only the newest is shown, the superseded
  ones are counted (they stay in results.jsonl);
* how to re-measure every headline (one command per suite).

Full reports of each run (load, software, every command) are in the run's log file, named by
each record's ``log`` field relative to the run's work folder; the hand-appended report before
generation is kept in bench/history/.  The file stays under ``MAX_LINES``.
"""
from __future__ import annotations

import statistics
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Optional

HERE = Path(__file__).resolve().parent
RESULTS_MD = HERE / "RESULTS.md"
RESULTS_UNPROBED_MD = HERE / "RESULTS-unprobed-hosts.md"
MAX_LINES = 400


def _f(x: object, fmt: str = ",.1f") -> str:
    return format(x, fmt) if isinstance(x, (int, float)) and not isinstance(x, bool) else ("" if x is None else str(x))


def stamp(r: dict) -> str:
    """Date and the whole commit field (an "uncommitted" note is never cut off)."""
    return f"{str(r.get('date', '?'))[:16]} @ {r.get('commit', '?')}"


def table(header: list[str], rows: list[list[object]]) -> str:
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out += ["| " + " | ".join(str(c).replace("|", "/") for c in row) + " |" for row in rows]
    return "\n".join(out)


def host_of(r: dict) -> str:
    import records

    return records.host_label(r)


#: One section per bench kind: (title, key fields that say *what* was measured, columns).
Column = tuple[str, Callable[[dict], object]]


def _peer(r: dict) -> str:
    return str(r.get("peer", ""))


def _with_net(whole: object, net: object) -> str:
    """``whole (net)``, or what of it is known."""
    if whole is None:
        return ""
    return _f(whole) + (f" ({_f(net)})" if net is not None else "")


def _recipe_arch(r: dict) -> str:
    """A recipe record's preset (``KEY_DEFAULTS`` for the records that name none)."""
    return r.get("arch") or KEY_DEFAULTS[("quality", "arch")]


def _share(r: dict) -> str:
    s = r.get("share_of_peak")
    if isinstance(s, (int, float)):
        return f"{s:.0%}"
    probed = isinstance(r.get("host"), dict) and r["host"].get("peak_gflops")
    return "n/a" if probed else "n/a (no probe)"


def _translate_models(r: dict) -> str:
    """The two models of a translation-speed row, and how long each trained where that is recorded
    (quality differs with training time, so speed rows are like for like only at equal hours)."""
    names = (r.get("model") or r.get("arch") or "recipe model (arch not recorded)") + (
        f" / {r['peer_model']}" if r.get("peer_model") not in (None, r.get("model")) else "")
    hours = [h for h in (r.get("train_hours"), r.get("peer_train_hours")) if h is not None]
    if not hours:
        return names
    return names + (f" ({_f(hours[0], 'g')} h each)" if len(set(hours)) == 1 else
                    " (" + " / ".join(f"{_f(h, 'g')} h" for h in hours) + ")")


SECTIONS: list[tuple[str, str, tuple[str, ...], list[Column]]] = [
    ("train_speed", "Training speed (CPU): target tokens/s after update 50",
     ("system", "arch", "threads", "batch", "peer"),
     [("system", lambda r: r.get("system", "nmtkit-fp32")), ("arch", lambda r: r.get("arch")), ("batch", lambda r: r.get("batch")),
      ("threads", lambda r: r.get("threads")),
      ("nmtkit tok/s", lambda r: _f(r.get("nmtkit", r.get("nmtkit_tok_s")), ",.0f")), ("peer", _peer),
      ("peer tok/s", lambda r: _f(r.get("peer_value", r.get("peer_tok_s")), ",.0f")),
      ("ratio", lambda r: _f(r.get("ratio", r.get("ratio_vs_opennmt")), ".2f")), ("share of peak", _share)]),
    ("translate_speed", "Translation speed (CPU): test2016, beam 5, sentences/s of the whole command (net of start-up)",
     ("system", "peer", "comparison", "threads", "model"),
     [("nmtkit path", lambda r: r.get("system")), ("models", _translate_models),
      ("threads", lambda r: r.get("threads")),
      ("sent/s (net)", lambda r: _with_net(r.get("sent_s", r.get("nmtkit_sent_s")), r.get("sent_s_net"))),
      ("BLEU", lambda r: _f(r.get("bleu"), ".2f")), ("share of peak", _share),
      ("against", lambda r: r.get("peer") or ("OpenNMT-py" if "peer_sent_s" in r else "-")),
      ("its sent/s (net)", lambda r: _with_net(r.get("peer_value", r.get("peer_sent_s")), r.get("peer_sent_s_net"))),
      ("its BLEU", lambda r: _f(r.get("peer_bleu", r.get("bleu_opennmt")), ".2f")),
      ("its share", lambda r: f"{r['peer_share_of_peak']:.0%}" if isinstance(r.get("peer_share_of_peak"), (int, float)) else "n/a"),
      ("ratio", lambda r: _f(r.get("ratio", r.get("ratio_vs_opennmt")), ".2f"))]),
    ("quality_per_hour", "Quality per CPU-hour: test2016 beam 5 after 1 h on one core",
     ("system", "seed"),
     [("system", lambda r: r.get("system")), ("seed", lambda r: r.get("seed", 1)), ("BLEU", lambda r: _f(r.get("bleu"), ".2f")),
      ("chrF", lambda r: _f(r.get("chrf"), ".2f")), ("train h", lambda r: _f((r.get("train_wall_s") or 0) / 3600, ".2f")),
      ("trained beside", lambda r: r.get("trained_beside", ""))]),
    ("quality_per_hour_significance", "Quality per CPU-hour: nmtkit's best against the best peer (paired bootstrap, sacrebleu)",
     ("system", "peer"),
     [("system", lambda r: r.get("system")), ("BLEU mean ± sd", lambda r: f"{_f(r.get('bleu_mean'), '.2f')} ± {_f(r.get('bleu_sd'), '.2f')}"),
      ("chrF mean ± sd", lambda r: f"{_f(r.get('chrf_mean'), '.2f')} ± {_f(r.get('chrf_sd'), '.2f')}"), ("best peer", lambda r: r.get("peer")),
      ("its BLEU / chrF", lambda r: f"{_f(r.get('peer_bleu_mean'), '.2f')} / {_f(r.get('peer_chrf_mean'), '.2f')}"),
      ("p (BLEU; chrF) per seed", lambda r: "; ".join(f"seed {t['seed']}: {t['BLEU']['p']:.3f}, {t['chrF']['p']:.3f}"
                                                      for t in r.get("tests", [])))]),
    ("quality", "Recipe quality (examples/multi30k): test2016 (BLEU: cased, detokenized; lc-tok: lowercased, "
     "Moses-tokenized, the form of Wu et al.'s 41.02)",
     ("pair", "toolkit", "arch", "system", "seed"),
     [("pair", lambda r: r.get("pair")), ("arch", _recipe_arch),
      ("system", lambda r: f"{r.get('toolkit', 'nmtkit-fp32')} {r.get('system')}"),
      ("seed(s)", lambda r: r.get("seed", r.get("seeds", ""))), ("BLEU", lambda r: _f(r.get("bleu"), ".2f")),
      ("lc-tok", lambda r: _f(r.get("bleu_lc_tok"), ".2f")),
      ("chrF", lambda r: _f(r.get("chrf"), ".2f")), ("train h", lambda r: _f((r.get("train_wall_s") or 0) / 3600, ".2f"))]),
    ("recipe_choice", "Recipe set-ups compared on valid (examples/multi30k, SPLIT=valid; beam 5, cased sacreBLEU)",
     ("candidate", "setting", "hours", "seed"),
     [("candidate", lambda r: r.get("candidate") + (" (chosen)" if r.get("chosen") else "")),
      ("recipe variables", lambda r: ", ".join(f"{k}={v}" for k, v in (r.get("setting") or {}).items())),
      ("updates", lambda r: _f(r.get("updates"), ",")), ("train h", lambda r: r.get("hours")),
      ("valid BLEU best", lambda r: _f(r.get("valid_bleu_best"), ".2f")),
      ("valid BLEU average", lambda r: _f(r.get("valid_bleu_avg"), ".2f"))]),
    ("aer", "AER: Canadian Hansards En-Fr dev (100 gold pairs; alignment error rate, lower is better; "
     "a model read at each decoder layer: its grow-diag-final-and)",
     ("system", "arch", "guided_args", "alignment_layer", "symmetrization", "align_shift", "links_from"),
     [("system", lambda r: f"{r.get('system')} {r.get('arch', '')}".strip()
       + (f" `{r['guided_args']}`" if r.get("guided_args") else "")
       + (f", layer {r['alignment_layer']}" if "alignment_layer" in r else "")), ("links", lambda r: r.get("links_from", "")),
      ("symmetrization", lambda r: r.get("symmetrization")), ("shift", lambda r: r.get("align_shift", "")),
      ("round", lambda r: r.get("round", "")), ("train s", lambda r: r.get("train_wall_s")), ("AER", lambda r: _f(r.get("aer"), ".3f"))]),
    ("shortlist_valid", "CPU fast paths on valid (the tuning set)",
     ("system", "threads", "model"),
     [("path", lambda r: r.get("system")), ("model", lambda r: r.get("model")), ("sent/s", lambda r: _f(r.get("sent_s"))),
      ("BLEU", lambda r: _f(r.get("bleu"), ".2f")), ("chrF", lambda r: _f(r.get("chrf"), ".2f"))]),
    ("gemm_speed", "float32 products, 1 thread: MKL against oneDNN (GFLOP/s)",
     ("shape", "threads"),
     [("shape", lambda r: r.get("shape")), ("MKL", lambda r: r.get("mkl_gflops")), ("oneDNN", lambda r: r.get("onednn_gflops")),
      ("ratio", lambda r: r.get("ratio")), ("share of peak", _share)]),
    ("guided_m30k", "Guided alignment on Multi30k (test2016 BLEU, --replace-unk)",
     ("system", "replace_unk", "unk_from"),
     [("system", lambda r: r.get("system")), ("replace unk", lambda r: r.get("replace_unk")), ("from", lambda r: r.get("unk_from", "")),
      ("BLEU", lambda r: _f(r.get("bleu"), ".2f")), ("unk left", lambda r: r.get("unk_left"))]),
    ("preprocess", "Preprocessing speed, Multi30k En-De (wall s; ratio = wall / nmtkit's, >1: nmtkit faster)", ("system", "step"),
     [("system", lambda r: r.get("system")), ("step", lambda r: r.get("step")), ("wall s", lambda r: _f(r.get("wall_s"))),
      ("pairs/s", lambda r: _f(r.get("pairs_s"), ",.0f")), ("ratio", lambda r: _f(r.get("ratio"), ".2f"))]),
    ("score_memory", "nmtkit-score peak memory (BLEU + chrF), beside sacreBLEU's command line on the same files", ("lines", "metrics"),
     [("lines", lambda r: _f(r.get("lines"), ",")), ("peak RSS MB", lambda r: _f(r.get("maxrss_mb"), ",.0f")),
      ("wall s", lambda r: _f(r.get("wall_s"), ".0f")), ("peer", lambda r: r.get("peer", "")),
      ("peer peak RSS MB", lambda r: _f(r.get("peer_maxrss_mb"), ",.0f") if r.get("peer") else ""),
      ("peer wall s", lambda r: (_f(r.get("peer_wall_s"), ".0f") + ("" if r.get("peer_scores") else f" (did not finish: {r.get('peer_failure', '?')})"))
       if r.get("peer") else "")]),
    ("gpu_train_speed", "GPU training speed: target tokens/s", ("system", "amp", "arch", "max_tokens", "batch_size"),
     [("system", lambda r: r.get("system", "nmtkit-eager")), ("arch", lambda r: r.get("arch")), ("amp", lambda r: r.get("amp")),
      ("tok/s", lambda r: _f(r.get("tok_s"), ",.0f")), ("peak GiB", lambda r: _f(r.get("peak_mem_gib"), ".1f"))]),
    ("gpu_translate_speed", "GPU translation speed: test2016 beam 5, sentences/s in process",
     ("system", "amp", "arch", "compile", "model"),
     [("system", lambda r: r.get("system", "nmtkit-eager")), ("arch", lambda r: r.get("arch")), ("amp", lambda r: r.get("amp")),
      ("sent/s", lambda r: _f(r.get("sent_s"), ",.0f")), ("BLEU", lambda r: _f(r.get("bleu"), ".2f")),
      ("ratio vs eager", lambda r: _f(r.get("ratio_vs_eager"), ".2f"))]),
    ("gpu_translate_command", "GPU translation as a command (start-up included)", ("system", "amp", "arch", "model"),
     [("system", lambda r: r.get("system")), ("sent/s", lambda r: _f(r.get("sent_s"), ",.0f")), ("seconds", lambda r: r.get("seconds")),
      ("BLEU", lambda r: _f(r.get("bleu"), ".2f"))]),
]

#: Key values of records written before the field existed (train_speed records before bf16 were float32).
#: A field's value in records written before the field was: train-speed rows without a system were
#: nmtkit float32; recipe rows without an arch came before the recipe took ``ARCH`` (88fb3f3), when
#: examples/multi30k/run.sh trained only ``luong_m30k``.
KEY_DEFAULTS = {("train_speed", "system"): "nmtkit-fp32", ("quality", "arch"): "luong_m30k"}

#: One command per suite re-measures every headline of that kind on the current host.
REMEASURE = [
    ("(once per host)", "python -m bench probe"),
    ("preprocess", "python -m bench run preprocess --record"),
    ("train-speed", "python -m bench run train-speed --record"),
    ("quality-per-hour", "python -m bench run quality-per-hour --record      # hours: 2 seeds x 5 systems, 2 at a time"),
    ("translate-speed", "python -m bench run translate-speed --record       # after quality-per-hour, alone"),
    ("translate-speed-session", "python -m bench run translate-speed-session --record  # ~1 h: nmtkit and OpenNMT-py 0.5 h each side by side, then timed alone"),
    ("transformer-per-hour", "python -m bench run transformer-per-hour --record  # 3 Transformers x 2 seeds x 1 h, 2 at a time"),
    ("transformer-translate-speed", "python -m bench run transformer-translate-speed --record  # after it, alone"),
    ("score-memory", "python -m bench run score-memory --record"),
    ("aer", "python -m bench run aer --record                   # ~3 h: 6 x 20 min + 2 guided rounds, both directions"),
    ("aer-transformer", "python -m bench run aer-transformer --record       # ~2 h: 2 x 20 min, every layer read, + 3 guided rounds"),
    ("aer-transformer-full", "python -m bench run aer-transformer-full --record  # ~1.2 h: 3 guided rounds with full target context"),
    ("aer-transformer-last-layer", "python -m bench run aer-transformer-last-layer --record  # ~1.2 h: the same, the last layer guided"),
    ("recipe-choice", "python -m bench run recipe-choice --record         # 2 h: the recipe's Transformer set-ups on valid"),
    ("recipe-choice-wu", "python -m bench run recipe-choice-wu --record      # 2 h: Wu et al.'s batches and averaging, on valid, then test2016"),
    ("recipe", "python -m bench run recipe --record                # 2 x 2 h: the Multi30k recipe, float32 then bf16"),
    ("recipe-transformer", "python -m bench run recipe-transformer --record    # 2 h: the Transformer recipe, 2 seeds and their ensemble"),
    ("encoder-self-attention", "python -m bench run encoder-self-attention --record  # 0.5 h: the lecture's soft match, on valid"),
    ("gpu", "python -m bench run gpu --record                   # on a CUDA machine (device tool)"),
]


def newest_by_host(records: list[dict], bench: str, key: tuple[str, ...]) -> tuple[list[tuple[str, list[dict]]], int]:
    """[(host, newest record per key, in first-seen key order)], hosts newest first; and how many
    superseded records were folded away."""
    by_host: "OrderedDict[str, OrderedDict[str, dict]]" = OrderedDict()
    folded = 0
    for r in records:
        if r.get("bench") != bench:
            continue
        h = host_of(r)
        k = repr(tuple(str(r.get(f, KEY_DEFAULTS.get((bench, f)))) for f in key))
        group = by_host.setdefault(h, OrderedDict())
        if k in group:
            folded += 1
        group[k] = r
    order = sorted(by_host, key=lambda h: max(str(r.get("date", "")) for r in by_host[h].values()), reverse=True)
    return [(h, list(by_host[h].values())) for h in order], folded


def seeds_summary(records: list[dict]) -> list[list[object]]:
    """Quality per hour on the newest host: mean and spread over seeds per system."""
    groups: "OrderedDict[tuple[str, str], list[dict]]" = OrderedDict()
    for r in records:
        if r.get("bench") == "quality_per_hour":
            groups.setdefault((host_of(r), r["system"]), []).append(r)
    rows = []
    for (h, system), rs in groups.items():
        seeds = {r.get("seed", 1): r for r in rs}  # newest per seed
        b = [r["bleu"] for r in seeds.values()]
        c = [r["chrf"] for r in seeds.values()]
        spread = lambda xs: f" ± {statistics.stdev(xs):.2f}" if len(xs) > 1 else " (1 seed)"  # noqa: E731
        rows.append([h, system, len(seeds), f"{statistics.mean(b):.2f}{spread(b)}", f"{statistics.mean(c):.2f}{spread(c)}"])
    return rows


def hosts_table(hosts: list[dict], records: list[dict]) -> str:
    import host as host_mod

    newest: "OrderedDict[str, dict]" = OrderedDict()
    for h in hosts:
        newest[h["id"]] = h
    rows = []
    for h in sorted(newest.values(), key=lambda x: x.get("date", ""), reverse=True):
        p = h.get("peak") or {}
        rows.append([h.get("label") or host_mod.label(h), h["id"], " ".join(h.get("flags", [])), h.get("torch"),
                     _f((p.get("fp32") or {}).get("gflops")), _f((p.get("bf16") or {}).get("gflops")), str(h.get("date", ""))[:16]])
    counts: dict[str, int] = {}
    for r in records:
        counts[host_of(r)] = counts.get(host_of(r), 0) + 1
    text = table(["host", "id", "flags", "torch", "fp32 peak GFLOP/s (1 thread)", "bf16 peak", "probed"], rows) if rows else \
        "No host probed yet (`python -m bench probe`): records carry no share of peak until one is."
    return text + "\n\nRecords per host: " + "; ".join(f"{h}: {n}" for h, n in counts.items()) + "."


def render(records: list[dict], hosts: list[dict]) -> str:
    """RESULTS.md: the probed hosts' and the GPUs' records (their figures can be read against a known peak)."""
    import glance
    import records as records_mod

    known = [r for r in records if records_mod.known_host(r)]
    others = len(records) - len(known)
    parts = [
        "# nmtkit benchmark results",
        "",
        "Generated by `python -m bench report` from `bench/results.jsonl` (every figure is a record's, with its host, "
        "date and commit); do not edit by hand. How each suite measures: bench/README.md. A run's full report (load, "
        "software, every command) is the log its records name (`log`, relative to the run's `--work`). "
        "The hand-appended report kept before generation: [history/RESULTS-until-2026-11-27.md](history/RESULTS-until-2026-11-27.md); "
        "hand-written records: `results_archive.jsonl`.",
        "",
        f"This file has the records of probed hosts (their one-thread peak is known) and of GPUs. The {others} records "
        f"of hosts that were never probed (named \"AMD EPYC\", some with family and model) are in [{RESULTS_UNPROBED_MD.name}]"
        f"({RESULTS_UNPROBED_MD.name}): their figures do not travel to this CPU.",
        "",
        "## Hosts",
        "",
        hosts_table(hosts, records),
        "",
        glance.glance(known).strip(),
        "",
        *sections(known),
        "## Re-measuring every headline", "", "On a quiet machine, from a committed tree (each command refuses "
        "`--record` otherwise), in this order:", "", "```", *[f"{cmd}" for _, cmd in REMEASURE], "```", "",
    ]
    return "\n".join(parts)


def render_unprobed(records: list[dict]) -> str:
    """The records of hosts that were never probed, kept apart so RESULTS.md reads as this CPU's figures."""
    import records as records_mod

    unprobed = [r for r in records if not records_mod.known_host(r)]
    dates = sorted(str(r.get("date", ""))[:10] for r in unprobed if r.get("date"))
    span = f" ({dates[0]} to {dates[-1]})" if dates else ""
    parts = ["# nmtkit benchmark results from unprobed hosts", "",
             "Generated by `python -m bench report` with [RESULTS.md](RESULTS.md); do not edit by hand. These records "
             f"come from machines that were never probed{span}: their CPU is known as \"AMD EPYC\", at most with its "
             "family and model, and its peak is not known, so no figure here may be read as the current host's. "
             "RESULTS.md's last section has the command that re-measures each on a probed host.", "",
             *sections(unprobed)]
    return "\n".join(parts)


#: Records a section leaves to results.jsonl (and the run's log): a model read at every decoder
#: layer shows its grow-diag-final-and per layer, not each direction as well.
HIDDEN: dict[str, Callable[[dict], bool]] = {
    "aer": lambda r: "alignment_layer" in r and r.get("symmetrization") != "grow-diag-final-and",
}


def sections(records: list[dict]) -> list[str]:
    """One table per bench kind, newest host first, superseded records counted."""
    parts: list[str] = []
    for bench, title, key, cols in SECTIONS:
        hidden = HIDDEN.get(bench, lambda r: False)
        groups, folded = newest_by_host([r for r in records if not hidden(r)], bench, key)
        if not groups:
            continue
        parts += [f"## {title}", ""]
        if bench == "quality_per_hour":
            parts += ["Mean and spread (sample standard deviation) over seeds, newest record per seed:", "",
                      table(["host", "system", "seeds", "BLEU", "chrF"], seeds_summary(records)), ""]
        rows = [[h, *[_f(fn(r), "") if not isinstance(fn(r), str) else fn(r) for _, fn in cols], stamp(r)]
                for h, rs in groups for r in rs]
        parts += [table(["host", *[c for c, _ in cols], "recorded"], rows), ""]
        if folded:
            parts += [f"{folded} older record(s) of the same measurements on the same host are superseded (in results.jsonl).", ""]
    return parts


def compact(text: str, max_lines: int = MAX_LINES) -> str:
    """Keep the file under ``max_lines``: the longest tables lose their oldest hosts' rows first."""
    lines = text.splitlines()
    if len(lines) <= max_lines:
        return text
    raise SystemExit(f"RESULTS.md would be {len(lines)} lines (> {max_lines}): tighten report.SECTIONS' keys")


def main(argv: Optional[list[str]] = None) -> str:
    import argparse

    import host
    import records

    ap = argparse.ArgumentParser(prog="python -m bench report", description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="fail if RESULTS.md is not what the records generate")
    args = ap.parse_args(argv)
    recs = records.read(records.RESULTS_JSONL)
    text = compact(render(recs, host.read_hosts()))
    files = {RESULTS_MD: text, RESULTS_UNPROBED_MD: render_unprobed(recs)}
    if args.check:
        for path, want in files.items():
            if not path.is_file() or path.read_text(encoding="utf-8") != want:
                raise SystemExit(f"bench/{path.name} is stale: run `python -m bench report`")
        return text
    from nmtkit.utils.textio import atomic_write

    for path, want in files.items():
        with atomic_write(path) as fh:
            fh.write(want)
        print(f"wrote {path} ({len(want.splitlines())} lines)")
    return text


if __name__ == "__main__":
    main()
