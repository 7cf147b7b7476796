#!/usr/bin/env python3
"""The "At a glance" block at the top of bench/RESULTS.md, from bench/results.jsonl.

Why generated: the summary used to be typed by hand and went stale (a fast path stood where a like-for-like
figure belonged).  Every figure here is copied from the newest record of its kind, with its date and
commit, and like-for-like rows (float32 against float32) come before the fast paths.  Nothing is
measured here.  bench/report.py puts the block into RESULTS.md (``python -m bench report``); this
module only reads records (bench/records.py) and never imports the report back.
"""
from __future__ import annotations

from typing import Iterable, Optional

from mdtable import md_table, ratio

START, END = "<!-- glance:start (written by bench/glance.py) -->", "<!-- glance:end -->"


def latest(records: list[dict], **match: object) -> Optional[dict]:
    """The last record whose fields equal ``match`` (results.jsonl is in recording order)."""
    found = [r for r in records if all(r.get(k) == v for k, v in match.items())]
    return found[-1] if found else None


def stamp(r: dict) -> list[str]:
    """The host and the recording stamp of a row: the whole commit field, so a note such as
    "(nmtkit/ has uncommitted changes)" is never cut off."""
    import records

    return [records.host_label(r), f"{str(r.get('date', '?'))[:16]} @ {r.get('commit', '?')}"]


def train_rows(records: list[dict]) -> Iterable[list[str]]:
    for system, label in (("nmtkit-fp32", "like for like: float32 vs float32"), ("nmtkit-bf16", "fast path: bf16 autocast vs float32")):
        for peer in ("fairseq", "OpenNMT-py", "Marian"):
            for threads in (1, 2):
                found = [r for r in records if r.get("bench") == "train_speed" and r.get("system") == system
                         and r.get("threads") == threads and str(r.get("peer", "OpenNMT-py")).startswith(peer)]
                if found:
                    r = found[-1]
                    yield [f"train {r['arch']}, batch {r.get('batch', '64 sentences')}, {threads} thread(s), {label}",
                           f"{r['nmtkit']:,.0f} tgt tok/s steady", f"{r['peer']} {r.get('peer_value', 0):,.0f}", f"{r.get('ratio', float('nan')):.2f}x", *stamp(r)]


def decode_rows(records: list[dict]) -> Iterable[list[str]]:
    for system in ("nmtkit-fp32", "nmtkit-bf16", "nmtkit-int8", "nmtkit-int8+shortlist"):
        for threads in (1, 2):
            found = [r for r in records if r.get("bench") == "translate_speed" and r.get("system") == system
                     and r.get("threads") == threads and "sent_s" in r and "peer" not in r]
            if found:
                r = found[-1]
                yield [f"translate test2016 beam 5, {threads} thread(s), recipe model {r.get('arch') or '(arch not recorded)'}, {system[7:]}",
                       f"{r['sent_s']:.1f} sent/s ({r['sent_s_net']:.1f} net of start-up), BLEU {r['bleu']:.2f}",
                       f"float32 BLEU {r['bleu_fp32']:.2f}" if r.get("bleu_fp32") is not None else "", "", *stamp(r)]


def peer_decode_rows(records: list[dict], fast: bool) -> Iterable[list[str]]:
    """Translation against the peers on the quality-per-hour models: float32 pairs, or the fast-path pairs."""
    for threads in (1, 2):
        newest: dict[str, dict] = {}
        for r in records:
            if r.get("bench") == "translate_speed" and r.get("threads") == threads and "comparison" in r:
                # one row per fast path against nmtkit's own float32; the newest pair of each other
                # comparison, per pair of models (the recurrent ones and the Transformers are two headlines)
                own = r["comparison"] == "fast path against nmtkit's own float32"
                newest[r["comparison"] + r["peer"] + (r["system"] if own else "") + r.get("model", "") + r.get("peer_model", "")] = r
        for r in newest.values():
            if (r["comparison"] == "like for like, float32") == fast:
                continue
            yield [f"translate test2016 beam 5, {threads} thread(s), {r['comparison']} (quality-per-hour models"
                   + (f": {r['model']} / {r.get('peer_model', r['model'])})" if r.get("model") else ")"),
                   f"{r['system']} {r['sent_s']:.1f} sent/s ({r['sent_s_net']:.1f} net), BLEU {r['bleu']:.2f}",
                   f"{r['peer']} {r['peer_value']:.1f} sent/s ({r['peer_sent_s_net']:.1f} net), BLEU {r['peer_bleu']:.2f}",
                   f"{r['ratio']:.2f}x", *stamp(r)]


def hour_rows(records: list[dict]) -> Iterable[list[str]]:
    """The newest report of each system: the mean over its seeds (records of one report share their date)."""
    import statistics

    qph = [r for r in records if r.get("bench") == "quality_per_hour"]
    newest = {r["system"]: r for r in qph}
    for system in ("nmtkit-fp32", "nmtkit-bf16", "opennmt", "marian", "fairseq", "nmtkit-transformer", "fairseq-transformer",
                   "opennmt-transformer"):
        if system in newest:
            r = newest[system]
            batch = list({x.get("seed", 1): x for x in qph if x["system"] == system and x.get("date") == r.get("date")}.values())
            b, c = [x["bleu"] for x in batch], [x["chrf"] for x in batch]
            if len(batch) > 1:
                score = (f"BLEU {statistics.mean(b):.2f} ± {statistics.stdev(b):.2f}, chrF {statistics.mean(c):.2f} ± "
                         f"{statistics.stdev(c):.2f} ({len(batch)} seeds)")
            else:
                score = f"BLEU {r['bleu']:.2f}, chrF {r['chrf']:.2f} (1 seed)"
            yield [f"quality per CPU-hour: {system}, {r['train_wall_s'] / 3600:.2f} h on one core, test2016 beam 5",
                   score, "", "", *stamp(r)]


def run_toolkit(records: list[dict], r: dict) -> str:
    """The toolkit (and so the precision) of a recipe record.  Ensemble records written before
    they carried one take it from the single-model records of the same run (same date and commit);
    records older than bf16 training were float32."""
    if "toolkit" in r:
        return r["toolkit"]
    same_run = {o["toolkit"] for o in records if o.get("bench") == "quality" and "toolkit" in o
                and o.get("date") == r.get("date") and o.get("commit") == r.get("commit")}
    return same_run.pop() if len(same_run) == 1 else "nmtkit-fp32"


def quality_rows(records: list[dict]) -> Iterable[list[str]]:
    """The newest run of each model, precision and system (single, averaged, ensemble); a run of
    several seeds gives each seed's BLEU and their mean, not only the last seed's row."""
    quality = [r for r in records if r.get("bench") == "quality" and r.get("pair") == "en-de"]
    seen = set()
    for r in reversed(quality):
        # records without an arch came before the recipe took ARCH
        key = (r.get("arch") or "luong_m30k", run_toolkit(records, r), r.get("system"))
        if key in seen:
            continue
        seen.add(key)
        run = [x for x in quality if x.get("date") == r.get("date") and x.get("commit") == r.get("commit")
               and (x.get("arch") or "luong_m30k", run_toolkit(records, x), x.get("system")) == key]
        wall = f", {r['train_wall_s'] / 3600:.2f} h of training" if r.get("train_wall_s") else ""
        yield [f"Multi30k en-de test2016, recipe {key[0]}, {key[1][7:]}, {key[2]}{wall}", _seed_scores(run), "", "", *stamp(r)]


def _seed_scores(run: list[dict]) -> str:
    """BLEU, chrF and lc-tok BLEU of one record, or of each seed and their mean."""
    def fmt(field: str, rows: list[dict]) -> str:
        vals = [x[field] for x in rows]
        if len(vals) == 1:
            return f"{vals[0]:.2f}"
        return f"{sum(vals) / len(vals):.2f} (seeds {', '.join(f'{v:.2f}' for v in vals)})"

    run = sorted(run, key=lambda x: x.get("seed", 0))
    lc = [x for x in run if x.get("bleu_lc_tok") is not None]
    mean = "mean " if len(run) > 1 else ""
    return (f"{mean}BLEU {fmt('bleu', run)}, chrF {fmt('chrf', run)}"
            + (f", lc-tok BLEU {fmt('bleu_lc_tok', lc)}" if len(lc) == len(run) else ""))


def aer_rows(records: list[dict]) -> Iterable[list[str]]:
    """Hansards dev AER: each nmtkit system's best reading (symmetrization, layer) after its last
    round in its newest run, beside eflomal's newest grow-diag-final-and on the same host (issue 36's mark)."""
    import records as records_mod

    aer = [r for r in records if r.get("bench") == "aer"]
    newest: dict[tuple, list[dict]] = {}
    for r in aer:
        if str(r.get("system", "")).startswith("nmtkit"):
            key = (r["system"], r.get("arch"), r.get("guided_args", ""))
            if key not in newest or r.get("date") != newest[key][0].get("date"):
                newest[key] = []
            newest[key].append(r)
    for (system, arch, guided_args), rs in newest.items():
        last = max(r.get("round", 0) for r in rs)
        best = min((r for r in rs if r.get("round", 0) == last), key=lambda r: r["aer"])
        ef = latest([r for r in aer if records_mod.host_label(r) == records_mod.host_label(best)], system="eflomal",
                    symmetrization="grow-diag-final-and")
        how = ", ".join(str(x) for x in (best.get("symmetrization"), best.get("links_from"),
                                         f"layer {best['alignment_layer']}" if "alignment_layer" in best else None) if x)
        variant = f" `{guided_args}`" if guided_args else ""
        yield [f"AER Hansards En-Fr dev (lower is better), {system} {arch}{variant}, round {last}, "
               f"{best.get('train_wall_s', 0) / 60:.0f} min",
               f"AER {best['aer']:.3f} ({how})", f"eflomal grow-diag-final-and {ef['aer']:.3f}" if ef else "", "", *stamp(best)]


def other_rows(records: list[dict]) -> Iterable[list[str]]:
    r = latest(records, bench="score_memory")
    if r is not None:
        done = bool(r.get("peer_scores"))
        peer = (f"{r['peer']} {r['peer_maxrss_mb']:,.0f} MB, {r['peer_wall_s']:.0f} s"
                + ("" if done else f" (did not finish: {r.get('peer_failure', 'status ' + str(r.get('peer_rc')))})")) if r.get("peer") else ""
        # a peer stopped early had not reached its peak: the ratio is then only a lower bound
        ratio = (f"{'' if done else '>= '}{r['peer_maxrss_mb'] / r['maxrss_mb']:.1f}x less memory"
                 if r.get("peer") and r.get("maxrss_mb") else "")
        yield [f"nmtkit-score, {r['lines']:,} lines, BLEU + chrF", f"peak RSS {r['maxrss_mb']:.0f} MB, {r['wall_s']:.0f} s", peer, ratio,
               *stamp(r)]
    yield from gpu_rows(records)


def gpu_rows(records: list[dict]) -> Iterable[list[str]]:
    """The newest GPU records: training against the plain PyTorch peer (eager like for like, then
    ``--cuda-graphs``), translation against nmtkit's own eager search; older records (no
    ``system`` field, 2026-11-23) as they were."""
    for amp in ("none", "bf16"):
        prec = "float32" if amp == "none" else "bf16"
        peer = latest(records, bench="gpu_train_speed", system="plain-lstmcell", amp=amp)
        for system, label in (("nmtkit-eager", "like for like, eager"), ("nmtkit-graphs", "fast path, --cuda-graphs")):
            r = latest(records, bench="gpu_train_speed", system=system, amp=amp)
            if r is not None and peer is not None and "tok_s" in r:
                yield [f"GPU training luong_wmt_en_de, {prec}, {label} ({r['device']})", f"{r['tok_s']:,.0f} tgt tok/s",
                       f"plain PyTorch LSTMCell loop {peer['tok_s']:,.0f}", ratio(r["tok_s"], peer["tok_s"]), *stamp(r)]
    for amp in ("none", "bf16"):
        eager = latest(records, bench="gpu_translate_speed", system="nmtkit-eager", amp=amp)
        graphs = latest(records, bench="gpu_translate_speed", system="nmtkit-graphs", amp=amp)
        if eager is not None and graphs is not None and "sent_s" in graphs and graphs["commit"] == eager["commit"]:
            yield [f"GPU translation test2016, beam 5, {'float32' if amp == 'none' else 'bf16'}, --cuda-graphs, "
                   f"{graphs['arch']} ({graphs['device']})", f"{graphs['sent_s']:,.0f} sent/s, BLEU {graphs['bleu']:.2f}",
                   f"nmtkit eager {eager['sent_s']:,.0f}, BLEU {eager['bleu']:.2f}", ratio(graphs["sent_s"], eager["sent_s"]),
                   *stamp(graphs)]
    for metric, field, unit in (("gpu_train_speed", "tok_s", "tgt tok/s"), ("gpu_translate_speed", "sent_s", "sent/s")):
        for amp in ("none", "bf16"):  # the first GPU records: eager float32 and bf16 (torch.compile rows were slower)
            r = latest([x for x in records if "system" not in x], bench=metric, amp=amp,
                       **({"compile": False} if metric == "gpu_translate_speed" else {}))
            if r is not None:
                what = f"{metric.replace('_', ' ')}, {'float32' if amp == 'none' else 'bf16'} ({r.get('device', '?')})"
                bleu = f", BLEU {r['bleu']:.2f}" if "bleu" in r else ""
                yield [what, f"{r[field]:,.0f} {unit}{bleu}", "", "", *stamp(r)]


def glance(records: list[dict]) -> str:
    rows = [*train_rows(records), *peer_decode_rows(records, fast=False), *hour_rows(records), *peer_decode_rows(records, fast=True),
            *decode_rows(records), *quality_rows(records), *aer_rows(records), *other_rows(records)]
    return (f"{START}\nAt a glance: the newest record of each kind (like for like first, then fast paths; each row names its host; "
            "the sections below have every host's newest records).\n\n"
            + md_table(["what", "nmtkit", "peer", "ratio (>1: nmtkit faster)", "host", "recorded"], rows) + f"\n{END}\n")


if __name__ == "__main__":
    raise SystemExit("bench/glance.py renders one block of RESULTS.md; regenerate the whole file with `python -m bench report`")
