"""Record hygiene for bench/results.jsonl: one line per run, written by a script, naming its host.

* **Run key** (``run_key``): a record's fields except when and at which commit it was stamped
  (``date``, ``commit``, ``load``, ``host``, ``log``).  Two records with the same run key are
  the same measurement stamped twice (a report re-run over the same work folder, cached steps
  re-recorded under a later commit): only the first is kept, and ``benchlib.append_jsonl``
  refuses to append a second.  tests/project/test_bench_records.py keeps results.jsonl free of them.
* **Hand-written records** (``hand_written``): lines no script in any commit writes (the
  Multi30k sweep and ablation of 2026-11-23, typed in from a GPU session's output) and records
  whose fields were added by hand (the first H100 translation records: a script wrote speed and
  hypothesis file, ``bleu``/``model`` were typed in).  They live in ``results_archive.jsonl``,
  each marked ``"hand_written": REASON``, and are never shown as measurements.
* **Host of a record** (``host_label``): the fingerprint's label, or for records older than
  fingerprints what can be derived (a ``cpu`` field, a GPU ``device``), else "unknown host
  (before fingerprints)".

``python -m bench records`` checks; ``--fix`` rewrites results.jsonl (moving hand-written lines to
the archive and dropping repeated runs) and regenerates RESULTS.md.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Optional

HERE = Path(__file__).resolve().parent
RESULTS_JSONL = HERE / "results.jsonl"
ARCHIVE = HERE / "results_archive.jsonl"
#: The report as it was appended by hand, section by section, before RESULTS.md was generated:
#: each section names the machine of the records stamped with its date.
HISTORY = HERE / "history" / "RESULTS-until-2026-11-27.md"

#: Fields that say when, where and from which tree a run was stamped, not what it measured.
STAMP_FIELDS = ("date", "commit", "load", "host", "host_derived", "log")

#: bench kinds no script writes, in any commit of this repository.
NO_SCRIPT = {
    "m30k_sweep": "no script writes m30k_sweep records (bench/m30k_sweep.sh prints logs; the lines were typed in)",
    "ablation": "no script writes ablation records (bench/m30k_ablation.sh prints logs; the lines were typed in)",
}


def run_key(rec: dict) -> str:
    return json.dumps({k: v for k, v in rec.items() if k not in STAMP_FIELDS}, sort_keys=True)


def hand_written(rec: dict) -> Optional[str]:
    """Why a record was not (wholly) written by a script, or None."""
    if rec.get("hand_written"):
        return str(rec["hand_written"])
    if rec.get("bench") in NO_SCRIPT:
        return NO_SCRIPT[rec["bench"]]
    if rec.get("bench") == "gpu_translate_speed" and "hyp" in rec and ("bleu" in rec or "model" in rec):
        return ("gpu_speed.py at c55db17 wrote sent_s and the hypothesis file; bleu, bleu_fp32 and model "
                "were added by hand")
    return None


def split(records: Iterable[dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """(kept, hand-written marked for the archive, repeated runs dropped), in file order."""
    kept, archived, dropped, seen = [], [], [], set()
    for rec in records:
        why = hand_written(rec)
        if why:
            archived.append({**rec, "hand_written": why})
            continue
        key = run_key(rec)
        if key in seen:
            dropped.append(rec)
            continue
        seen.add(key)
        kept.append(rec)
    return kept, archived, dropped


def duplicates(records: Iterable[dict]) -> list[dict]:
    return split(records)[2]


def known_host(rec: dict) -> bool:
    """A GPU record, or a CPU record whose host was probed: its peak is known, so its figures can be
    read as a share of it.  The rest came from machines known only as "AMD EPYC"."""
    host = rec.get("host")
    return str(rec.get("bench", "")).startswith("gpu") or (isinstance(host, dict) and bool(host.get("peak_gflops")))


def host_label(rec: dict) -> str:
    import host

    return host.label_of_record(rec)


def read(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write(path: Path, records: list[dict]) -> None:
    from nmtkit.utils.textio import atomic_write

    with atomic_write(path) as fh:
        for rec in records:
            fh.write(json.dumps(rec) + "\n")


def history_machines(path: Path = HISTORY) -> dict[str, str]:
    """Section date -> the machine line of that section of the hand-appended report."""
    import re

    if not path.is_file():
        return {}
    found = re.findall(r"^## .*\((\d{4}-\d\d-\d\d[^)]*)\)\s*\n\n- machine: (.*)$", path.read_text(encoding="utf-8"), re.M)
    out: dict[str, str] = {}
    for date, machine in found:
        out.setdefault(date, machine.split("; RAM")[0].split("; Linux")[0].removeprefix("CPU: ").strip())
    return out


def derive_host(rec: dict, machines: dict[str, str]) -> Optional[str]:
    """For a record without a fingerprint: the machine its report section named (same date
    stamp), marked as derived; None when nothing says."""
    if rec.get("host") or rec.get("host_derived") or rec.get("cpu"):
        return None
    machine = machines.get(str(rec.get("date")))
    if machine:
        return f"{machine} (derived: report section of the same date)"
    return None


def derive_from_run(rec: dict, records: list[dict]) -> Optional[str]:
    """For a record without a fingerprint that shares its run's log with a fingerprinted record
    (one invocation wrote both, e.g. quality per hour's significance test beside its systems):
    that record's host, marked as derived; None otherwise."""
    if rec.get("host") or rec.get("host_derived") or rec.get("cpu") or not rec.get("log"):
        return None
    for other in records:
        if other is not rec and other.get("log") == rec["log"] and isinstance(other.get("host"), dict):
            return f"{host_label(other)} (derived: the records of the same run, {rec['log']})"
    return None


def fix(results: Path = RESULTS_JSONL, archive: Path = ARCHIVE) -> dict:
    """Move hand-written records to the archive, drop repeated runs, and name the host of old
    records from the hand-appended report (or of a record from the other records of its run);
    returns the counts."""
    machines = history_machines()
    kept, archived, dropped = split(read(results))
    for rec in kept:
        derived = derive_host(rec, machines) or derive_from_run(rec, kept)
        if derived:
            rec["host_derived"] = derived
    old_archive = read(archive)
    have = {run_key(r) for r in old_archive}
    write(archive, old_archive + [r for r in archived if run_key(r) not in have])
    write(results, kept)
    return {"kept": len(kept), "archived": len(archived), "dropped": len(dropped)}
