"""Shared helpers of the bench scripts: paths, timed commands, machine facts, RESULTS.md records.

Every bench script runs real command lines (nmtkit's and the peers' CLIs) in subprocesses, so
what is measured is what a user would get, start-up included.  A run is timed with wall clock,
user+system CPU (less sensitive to other jobs on a shared 2-core machine; wait4's figure, or the
per-process sum sampled from /proc when that is larger, as with worker pools never reaped) and two memory
numbers: the peak RSS of the largest single process (``wait4``) and the peak summed RSS of the
whole process tree (sampled from /proc, counts pages shared between forked workers twice).
"""
from __future__ import annotations

import argparse

import datetime as _dt
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from mdtable import md_table as md_table, ratio as ratio  # the scripts call bl.md_table and bl.ratio

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "RESULTS.md"
RESULTS_JSONL = REPO / "bench" / "results.jsonl"
#: The work folder of the running benchmark (``--work``): a run's full report and commands go to
#: ``WORK/logs/`` and its records name that log relative to it (``append_results``).
WORK = Path("/root/nmtkit-bench")
PAGE = os.sysconf("SC_PAGE_SIZE")


# -- paths ----------------------------------------------------------------------------------
def _work_path(value: str) -> str:
    """``--work``'s type: also remembers the folder for the run's log (``WORK``)."""
    global WORK
    WORK = Path(value)
    return value


def default_data() -> str:
    """``$NMTKIT_DATA`` or ``../shared/data`` relative to the repository."""
    return os.environ.get("NMTKIT_DATA", str((REPO.parent / "shared" / "data").resolve()))


def default_peers() -> str:
    """``$NMTKIT_PEERS`` or ``~/nmt-peers`` (venvs made by shared/peers/setup.sh)."""
    return os.environ.get("NMTKIT_PEERS", str(Path.home() / "nmt-peers"))


def add_common_args(ap) -> None:  # noqa: ANN001 - argparse.ArgumentParser
    """--data, --work, --peers, --record, options every script takes."""
    ap.add_argument("--data", default=default_data(), help="folder holding multi30k/ (default: $NMTKIT_DATA or ../shared/data; now %(default)s)")
    ap.add_argument("--work", default="/root/nmtkit-bench", type=_work_path,
                    help="where every output goes, outside the repo; logs in WORK/logs (default: %(default)s)")
    ap.add_argument("--peers", default=default_peers(), help="peer venvs folder (default: $NMTKIT_PEERS or ~/nmt-peers; now %(default)s)")
    ap.add_argument("--record", action=RecordFromCommit, nargs=0, default=False,
                    help="append this run's section to bench/RESULTS.md and its records to bench/results.jsonl "
                         "(refused on a tree with uncommitted changes: a record names the commit measured)")


#: Exit status of a suite step that stopped before a part that would outlast ``--deadline``
#: (EX_TEMPFAIL: rerun the same command later and it continues).
DEADLINE_EXIT = 75


def add_deadline_arg(ap) -> None:  # noqa: ANN001 - argparse.ArgumentParser
    """--deadline, for suites made of long parts (training waves, rounds) that span sessions."""
    ap.add_argument("--deadline", type=parse_deadline, metavar="HH:MM|YYYY-MM-DDTHH:MM",
                    help="start no part (a wave of runs) that would end after this local time: stop with status "
                         f"{DEADLINE_EXIT} instead, so a session's end does not kill it half-way (rerun to continue)")


def parse_deadline(text: str) -> float:
    """``HH:MM`` (local time: the next such time, so tomorrow's once today's has passed, as for a
    session that ends after midnight) or ``YYYY-MM-DDTHH:MM`` as epoch seconds."""
    try:
        if "T" in text or "-" in text:
            when = _dt.datetime.fromisoformat(text)
        else:
            hour, minute = (int(x) for x in text.split(":"))
            now = _dt.datetime.now()
            when = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
            if when <= now:
                when += _dt.timedelta(days=1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {text!r} (HH:MM or YYYY-MM-DDTHH:MM)") from None
    return when.timestamp()


def stop_before_deadline(deadline: Optional[float], seconds: float, what: str) -> None:
    """Exit with :data:`DEADLINE_EXIT` instead of starting ``what`` (about ``seconds`` long) when it
    would end after ``deadline`` (None: no deadline).  Why: a part killed half-way is redone from
    its start, so starting it only wastes the machine."""
    if deadline is None or seconds <= 0 or time.time() + seconds <= deadline:
        return
    end = time.strftime("%H:%M", time.localtime(time.time() + seconds))
    print(f"--deadline {time.strftime('%H:%M', time.localtime(deadline))}: not starting {what}, which would end "
          f"about {end}; rerun the command (with a later --deadline, or none) to continue", flush=True)
    sys.exit(DEADLINE_EXIT)


#: Files the scripts themselves write: a tree whose only changes are earlier records, the generated
#: report and the host probes is still the commit.
RECORD_FILES = ("bench/RESULTS.md", "bench/results.jsonl", "bench/hosts.jsonl", "bench/results_archive.jsonl")

#: Folders whose untracked files would run too (a new module the measured code imports).
CODE_DIRS = ("nmtkit/", "bench/")


def uncommitted_changes() -> list[str]:
    """Files that make the tree differ from HEAD: tracked files changed (records written by an
    earlier run excepted) and untracked, not ignored files under nmtkit/ or bench/."""
    out = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=all"],
                         capture_output=True, text=True, check=True).stdout
    return code_changes(out)


def code_changes(porcelain: str) -> list[str]:
    """The paths of ``git status --porcelain`` output that make a tree other than its commit: what
    the scripts write (:data:`RECORD_FILES`, and the pictures ``bench/*.png`` a report draws from
    its records, so that one suite's report does not refuse the next suite's ``--record`` in the
    same clone) and untracked files outside :data:`CODE_DIRS` do not."""
    changed = []
    for line in porcelain.splitlines():
        status, path = line[:2], line[3:].split(" -> ")[-1]
        if path in RECORD_FILES or (path.startswith("bench/") and path.count("/") == 1 and path.endswith(".png")):
            continue
        if status == "??" and not path.startswith(CODE_DIRS):
            continue
        changed.append(path)
    return changed


class RecordFromCommit(argparse.Action):
    """``--record``: refused at once (before any measuring) unless the tree is a commit and this
    host has been probed (``python -m bench probe``: records give their share of its peak)."""

    needs_probe = True

    def __call__(self, parser, namespace, values, option_string=None):  # noqa: ANN001, ANN204
        changed = uncommitted_changes()
        if changed:
            parser.error(f"--record needs a committed tree, and these files have uncommitted changes: {', '.join(changed)}")
        if self.needs_probe:
            import host

            fp = host.fingerprint()
            if not host.cached_peak(fp["id"]):
                parser.error(f"--record: this host ({fp['label']}, id {fp['id']}) has no probe in bench/hosts.jsonl; "
                             "run `python -m bench probe` first")
        setattr(namespace, self.dest, True)


class RecordFromCommitElsewhere(RecordFromCommit):
    """``--record`` of figures measured on another machine (the GPU machine's): a committed tree only."""

    needs_probe = False


def check_outside_repo(path: Path) -> None:
    """Outputs must never land in the repository (only RESULTS.md is committed)."""
    p = path.resolve()
    if p == REPO or REPO in p.parents:
        sys.exit(f"--work {path} is inside the repository {REPO}; choose a folder outside it")


# -- timed commands -------------------------------------------------------------------------
@dataclass
class Run:
    """One finished command: what ran and what it cost."""

    cmd: list[str]
    wall: float
    user: float
    sys: float
    maxrss_mb: float  # largest single process (wait4 ru_maxrss)
    tree_rss_mb: float  # peak of the summed RSS of the process tree (sampled)
    rc: int
    log: Optional[Path] = None
    extra: dict = field(default_factory=dict)

    @property
    def cpu(self) -> float:
        return self.user + self.sys

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in ("cmd", "wall", "user", "sys", "maxrss_mb", "tree_rss_mb", "rc", "extra")}
        d["log"] = str(self.log) if self.log else None
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Run":
        return cls(**{**d, "log": Path(d["log"]) if d.get("log") else None})

    def shell(self, stdin: Optional[str] = None, stdout: Optional[str] = None) -> str:
        s = shlex.join(self.cmd)
        if stdin:
            s += f" < {stdin}"
        if stdout:
            s += f" > {stdout}"
        return s


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(b")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


TICK = os.sysconf("SC_CLK_TCK")


def sample_tree(root: int, cpu_ticks: dict[int, int]) -> int:
    """Summed RSS (bytes) of ``root`` and its descendants right now; records each process's
    user+sys ticks in ``cpu_ticks`` (catches worker pools whose CPU wait4 never sees)."""
    kids = _children_map()
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/statm", "rb") as fh:
                total += int(fh.read().split()[1]) * PAGE
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
            fields = stat[stat.rfind(b")") + 2 :].split()
            cpu_ticks[pid] = int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
        todo.extend(kids.get(pid, []))
    return total


def run_cmd(
    cmd: Sequence[str],
    log: Optional[Path] = None,
    stdin: Optional[Path] = None,
    stdout: Optional[Path] = None,
    env: Optional[dict] = None,
    cwd: Optional[Path] = None,
    check: bool = True,
    poll: float = 0.25,
    quiet: bool = False,
) -> Run:
    """Run ``cmd`` to completion; stderr (and stdout unless redirected) go to ``log``."""
    cmd = [str(c) for c in cmd]
    if not quiet:
        print(f"$ {shlex.join(cmd)}" + (f" < {stdin}" if stdin else "") + (f" > {stdout}" if stdout else ""), flush=True)
    full_env = dict(os.environ, **(env or {}))
    logf = open(log, "w", encoding="utf-8") if log else subprocess.DEVNULL
    fin = open(stdin, "rb") if stdin else subprocess.DEVNULL
    fout = open(stdout, "wb") if stdout else logf
    peak = [0]
    ticks: dict[int, int] = {}
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, stdin=fin, stdout=fout, stderr=logf, env=full_env, cwd=cwd)
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], sample_tree(proc.pid, ticks))
                done.wait(poll)

        th = threading.Thread(target=sample, daemon=True)
        th.start()
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        done.set()
        th.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        for fh in (logf, fin, fout):
            if hasattr(fh, "close"):
                fh.close()
    user, system = ru.ru_utime, ru.ru_stime
    sampled = sum(ticks.values()) / TICK
    if sampled > user + system:  # children wait4 did not account for (e.g. detached worker pools)
        user = sampled - system
    run = Run(cmd, wall, user, system, ru.ru_maxrss / 1024, peak[0] / 2**20, proc.returncode, log)
    if check and run.rc != 0:
        tail = Path(log).read_text(encoding="utf-8", errors="replace")[-3000:] if log else ""
        sys.exit(f"command failed with status {run.rc}: {shlex.join(cmd)}\n{tail}")
    if not quiet:
        print(f"  -> {run.wall:.1f} s wall, {run.cpu:.1f} s CPU, peak RSS {run.maxrss_mb:.0f} MB (tree {run.tree_rss_mb:.0f} MB)", flush=True)
    return run


# -- facts about the machine and the software -------------------------------------------------
def nmtkit_bin(script: str) -> str:
    """An nmtkit console script beside the interpreter running the benchmark, as the peers' are
    run from their own environments' ``bin``: a version manager's shim on PATH (pyenv's re-execs
    bash and the ``pyenv`` command, about 0.05 s) is then not timed as nmtkit's start-up."""
    beside = Path(sys.executable).parent / script
    return str(beside) if beside.is_file() else script


def cpu_model() -> str:
    """The CPU's model name with its family and model numbers: virtual machines often show only
    "AMD EPYC", and two hosts of that name (Zen 4: family 25; Zen 5: family 26) differ 2x in
    float32 AVX-512 throughput, which every speed figure here depends on."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if not line.strip():
                break  # the first processor is enough
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or "unknown"
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name


def mem_total_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 2**20
    return float("nan")


def uptime_line() -> str:
    """``uptime`` output (load averages show how busy the shared machine was)."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "load average: " + Path("/proc/loadavg").read_text().strip()


def gpu_line() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return f"GPU: {torch.cuda.get_device_name(0)}"
    except ImportError:
        pass
    return "GPU: none (CPU-only machine; no GPU numbers)"


def machine_info() -> str:
    h = this_host()
    return (
        f"host {h.get('label')} (id {h.get('id')}; flags {' '.join(h.get('flags', []))}; "
        f"probed peak GFLOP/s {h.get('peak_gflops') or 'none: python -m bench probe'}); "
        f"CPU: {cpu_model()}, {os.cpu_count()} cores; RAM {mem_total_gib():.1f} GiB; "
        f"{platform.system()} {platform.release()}; Python {platform.python_version()}; {gpu_line()}"
    )


def git_commit() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no", "nmtkit"], capture_output=True, text=True).stdout.strip()
        return rev + (" (nmtkit/ has uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def dist_version(python: str, dist: str) -> str:
    """Version of an installed distribution, as seen by the given interpreter."""
    code = f"import importlib.metadata as m; print(m.version({dist!r}))"
    r = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return r.stdout.strip() or "?"


def software_line(peers: dict[str, tuple[str, str]]) -> str:
    """nmtkit commit and library versions; ``peers``: name -> (python, distribution)."""
    py = sys.executable
    parts = [f"nmtkit {dist_version(py, 'nmtkit')} @ {git_commit()}"]
    parts += [f"{d} {dist_version(py, d)}" for d in ("torch", "sacremoses", "subword-nmt", "sacrebleu")]
    parts += [f"{name} {dist_version(p, d)} (torch {dist_version(p, 'torch')})" for name, (p, d) in peers.items()]
    return "; ".join(parts)


# -- RESULTS.md ---------------------------------------------------------------------------------
HEADER = (
    "# nmtkit benchmark results\n\n"
    "Appended by `python bench/<script>.py --record` (see bench/README.md). Each section says\n"
    "the machine, its load while running, the software versions and the exact commands.\n"
)


def now() -> str:
    return _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")


def section(title: str, machine: str, load_before: str, load_after: str, software: str, body: str, commands: list[str]) -> str:
    """One RESULTS.md section in the common layout."""
    cmds = "\n".join(commands)
    return (
        f"\n## {title} ({now()})\n\n"
        f"- machine: {machine}\n"
        f"- load: before `{load_before}`; after `{load_after}`\n"
        f"- software: {software}\n\n"
        f"{body.rstrip()}\n\n"
        f"Commands:\n\n```\n{cmds}\n```\n"
    )


#: The log of the run being recorded, relative to ``WORK`` (set by ``append_results``, carried by
#: the records ``append_jsonl`` writes next).
LAST_LOG: Optional[str] = None


def append_results(text: str, path: Optional[Path] = None) -> str:
    """Write a run's full report (machine, load, software, tables, the exact commands) to its own
    log file, ``WORK/logs/DATE-TITLE.md``; the records of the run name it (relative to WORK).
    RESULTS.md is generated from the records (bench/report.py), never appended to."""
    global LAST_LOG
    from nmtkit.utils.textio import atomic_write

    title = re.sub(r"[^a-z0-9]+", "-", (re.search(r"^## (.*?)(?: \(|$)", text, re.M) or re.match("(.*)", "run")).group(1).lower())
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    rel = Path("logs") / f"{stamp}-{title.strip('-')[:60] or 'run'}.md"
    target = Path(path) if path is not None else WORK / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(target) as fh:
        fh.write(HEADER.splitlines()[0] + "\n" + text)
    LAST_LOG = str(rel) if path is None else str(target)
    print(f"report and commands in {target}")
    return LAST_LOG


def read_records(bench: str | None = None, path: Path = RESULTS_JSONL) -> list[dict]:
    """The records of results.jsonl in the order written (of one ``bench`` if given)."""
    import records as rec_mod

    return [r for r in rec_mod.read(path) if bench is None or r.get("bench") == bench]


def this_host(peers: Optional[str] = None) -> dict:
    """This host's fingerprint with its probed peak (bench/host.py), cached for the process."""
    global _HOST
    if _HOST is None:
        import host

        _HOST = host.host_for_record(host.fingerprint(peers or default_peers()))
    return _HOST


_HOST: Optional[dict] = None


def append_jsonl(records: list[dict], base: dict, path: Path = RESULTS_JSONL, regenerate: bool = True) -> list[dict]:
    """Append one JSON line per headline figure (``base`` fields first, then the record's own):
    results.jsonl is how results are checked, so every record carries its bench, date, commit, the
    host it ran on (fingerprint and probed peak) and the log of its run.  A record equal to one
    already there in everything but when and at which commit it was stamped is the same run and is
    not appended again (bench/records.py); RESULTS.md is regenerated afterwards."""
    import records as rec_mod

    base = {"date": now(), "commit": git_commit(), **base}
    if "host" not in base and not any("host" in r for r in records):
        base["host"] = this_host()
    if LAST_LOG and "log" not in base:
        base["log"] = LAST_LOG
    done = {rec_mod.run_key(r) for r in read_records(path=path)}
    new = []
    for r in records:
        full = {**base, **r}
        if rec_mod.run_key(full) in done:
            print(f"not appended (already recorded: the same run): {r.get('system', '')} {r.get('bench', base.get('bench', ''))}")
            continue
        done.add(rec_mod.run_key(full))
        new.append(full)
    with open(path, "a", encoding="utf-8") as fh:
        for full in new:
            fh.write(json.dumps(full) + "\n")
    print(f"appended {len(new)} record(s) to {path}")
    if regenerate and path == RESULTS_JSONL:
        import report

        report.main([])
    return new


# -- the Multi30k En-De data every script shares ---------------------------------------------------
SPLITS = {"train": "train", "valid": "valid", "test": "test2016"}  # nmtkit split name -> file prefix


def raw_prefix(data: str, split: str) -> Path:
    """``{data}/multi30k/{train,valid,test2016}`` (files PREFIX.en / PREFIX.de)."""
    return Path(data) / "multi30k" / SPLITS[split]


def check_raw_data(data: str) -> None:
    missing = [str(raw_prefix(data, s)) + f".{l}" for s in SPLITS for l in ("en", "de") if not Path(f"{raw_prefix(data, s)}.{l}").is_file()]
    if missing:
        sys.exit(f"missing Multi30k files: {', '.join(missing)} (set --data or $NMTKIT_DATA)")


def nmtkit_destdir(work: Path) -> Path:
    """The nmtkit data directory written by bench/preprocess.py (moses + joint BPE 10k)."""
    return Path(work) / "multi30k.en-de.bpe10k"


def bpe_text_dir(work: Path) -> Path:
    """Plain-text copy of exactly the BPE pieces nmtkit trained on: {train,valid,test}.{en,de}."""
    return Path(work) / "multi30k.bpe10k.txt"


def need_step1(work: Path) -> tuple[Path, Path]:
    dest, txt = nmtkit_destdir(work), bpe_text_dir(work)
    if not (dest / "meta.json").is_file() or not (txt / "train.en").is_file():
        sys.exit(f"{dest} or {txt} missing: run `python bench/preprocess.py --work {work}` first")
    return dest, txt


def count_lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


# -- OpenNMT-py ---------------------------------------------------------------------------------------
ONMT_ENV = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}  # torch>=2.6 + OpenNMT 3.5.1 checkpoints (shared/peers/README.md)


def onmt_data_header(writer: str, txt: Path, out: Path, seed: int, valid: bool) -> str:
    """The start of every OpenNMT-py config here: where its data, vocabularies and model go
    (``out``, made), the BPE text of ``txt`` (``train``, and ``valid`` when ``valid``), the seed."""
    out.mkdir(parents=True, exist_ok=True)
    valid_part = f"  valid:\n    path_src: {txt}/valid.en\n    path_tgt: {txt}/valid.de\n" if valid else ""
    return (f"# written by bench/{writer}\nsave_data: {out}/data\nsrc_vocab: {out}/vocab.en\ntgt_vocab: {out}/vocab.de\n"
            f"overwrite: true\nseed: {seed}\ndata:\n  corpus_1:\n    path_src: {txt}/train.en\n    path_tgt: {txt}/train.de\n"
            f"{valid_part}model_type: text\n")


def onmt_luong_yaml(
    path: Path, txt: Path, out: Path, steps: int, batch_size: int, embed: int = 256, hidden: int = 256, layers: int = 2,
    dropout: float = 0.2, valid: bool = False, valid_steps: int = 0, save_steps: int = 0, keep: int = -1, seed: int = 1,
    param_init: float = 0.1, batch_type: str = "sents", report_every: int = 50, gpu: bool = False, fp16: bool = False,
) -> Path:
    """OpenNMT-py config matching nmtkit's luong_* presets: unidirectional LSTM encoder/decoder,
    global attention with the 'general' score, input feeding, uniform init U(-param_init, param_init)
    (OpenNMT-py 3.5.1 has no "torch default" init: param_init 0 demands glorot), Adam, clip 5,
    loss normalized per target token like nmtkit (OpenNMT's default is per sentence); ``gpu``: on
    GPU 0, ``fp16``: its mixed precision (as :func:`onmt_transformer_yaml`)."""
    path.write_text(
        onmt_data_header("benchlib.py:onmt_luong_yaml", txt, out, seed, valid) + f"""encoder_type: rnn
decoder_type: rnn
rnn_type: LSTM
enc_layers: {layers}
dec_layers: {layers}
word_vec_size: {embed}
hidden_size: {hidden}
global_attention: general
global_attention_function: softmax
input_feed: 1
bridge: false
dropout: [{dropout}]
param_init: {param_init}
world_size: 1
gpu_ranks: [{0 if gpu else ''}]
model_dtype: {'fp16' if fp16 else 'fp32'}
batch_type: {batch_type}
batch_size: {batch_size}
valid_batch_size: {batch_size}
normalization: tokens
optim: adam
learning_rate: 0.001
max_grad_norm: 5
train_steps: {steps}
valid_steps: {valid_steps or steps * 10}
save_checkpoint_steps: {save_steps or steps}
keep_checkpoint: {keep}
report_every: {report_every}
save_model: {out}/model
""",
        encoding="utf-8",
    )
    return path


def onmt_transformer_yaml(
    path: Path, txt: Path, out: Path, steps: int, batch_tokens: int, *, layers: int, d: int, ffn: int, heads: int,
    dropout: float, peak_lr: float, warmup: int, save_steps: int, valid: bool = True, seed: int = 1,
    gpu: bool = False, fp16: bool = False, report_every: int = 100, share: bool = True,
) -> Path:
    """OpenNMT-py 3.5.1's Transformer at an nmtkit preset's shape: its FAQ set-up ('How do I use the
    Transformer model?': glorot init, the ``noam`` schedule, token batches), biases on every
    projection (``add_qkvbias``, ``add_ffnbias``: the paper's layers, 3.5.1's default has none),
    all embeddings shared (``share``; else source, target and output matrices of their own, as
    transformer_base), Adam (0.9, 0.98), no clipping, label smoothing 0.1, and ``noam`` scaled
    to peak at ``peak_lr`` after ``warmup`` updates (:func:`noam_scale`).  Pre-norm: the only layout
    its Transformer has.  ``fp16``: its mixed precision (``model_dtype fp16`` with Adam: torch
    autocast and a gradient scaler; 3.5.1 has no bf16)."""
    path.write_text(
        onmt_data_header("benchlib.py:onmt_transformer_yaml", txt, out, seed, valid) + f"""share_vocab: {str(share).lower()}
share_embeddings: {str(share).lower()}
share_decoder_embeddings: {str(share).lower()}
encoder_type: transformer
decoder_type: transformer
position_encoding: true
enc_layers: {layers}
dec_layers: {layers}
heads: {heads}
hidden_size: {d}
word_vec_size: {d}
transformer_ff: {ffn}
add_qkvbias: true
add_ffnbias: true
dropout: [{dropout}]
attention_dropout: [0.0]
param_init: 0
param_init_glorot: true
world_size: 1
gpu_ranks: [{0 if gpu else ''}]
model_dtype: {'fp16' if fp16 else 'fp32'}
batch_type: tokens
batch_size: {batch_tokens}
valid_batch_size: {batch_tokens}
normalization: tokens
optim: adam
adam_beta2: 0.98
decay_method: noam
warmup_steps: {warmup}
learning_rate: {noam_scale(peak_lr, d, warmup):.6f}
max_grad_norm: 0
label_smoothing: 0.1
train_steps: {steps}
valid_steps: {save_steps}
save_checkpoint_steps: {save_steps}
keep_checkpoint: -1
report_every: {report_every}
save_model: {out}/model
""",
        encoding="utf-8",
    )
    return path


def noam_scale(peak_lr: float, d_model: int, warmup: int) -> float:
    """OpenNMT-py's ``noam`` schedule is ``learning_rate * d^-0.5 * min(step^-0.5, step * warmup^-1.5)``:
    the inverse square root after a linear warm-up, as fairseq's and nmtkit's, peaking at
    ``learning_rate * (d * warmup)^-0.5``.  This is the ``learning_rate`` that peaks at ``peak_lr``."""
    return peak_lr * math.sqrt(d_model * warmup)


_ONMT_STEP = re.compile(
    r"Step\s+(\d+)(?:/\s*\d+)?; .*?bsz:\s*([\d.]+)/\s*([\d.]+)/\s*([\d.]+);\s*([\d.]+)/\s*([\d.]+) tok/s;\s*([\d.]+) sec"
)


def parse_onmt_train_log(text: str) -> dict:
    """OpenNMT-py's training log -> report windows, parameter count, validation perplexities.

    A report line reads ``Step 50/ 454; ... bsz: S/T/N; s/t tok/s; 23 sec``: T is the mean number
    of target tokens per batch in the window and ``sec`` the time since training started, so a
    window's target tokens are T x its batches.  Validation lines come in step order."""
    windows, prev = [], 0
    for m in _ONMT_STEP.finditer(text):
        step = int(m.group(1))
        windows.append({"step": step, "tgt_tokens": float(m.group(3)) * (step - prev), "sec": float(m.group(7)), "tok_s": float(m.group(6))})
        prev = step
    params = re.search(r"\* number of parameters:\s*(\d+)", text)
    return {
        "windows": windows,
        "params": int(params.group(1)) if params else None,
        "valid_ppl": [float(p) for p in re.findall(r"Validation perplexity:\s*([\d.naif]+)", text)],
    }


def in_parallel(job, n: int) -> list:  # noqa: ANN001 - job(k) for k in 0..n-1
    """``[job(0), ..., job(n-1)]`` run at the same time in threads; waits for all and re-raises
    the first failure in the caller's thread."""
    results: list = [None] * n
    errors: list[BaseException] = []

    def one(k: int) -> None:
        try:
            results[k] = job(k)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def run_parallel(jobs: list[dict]) -> list[Run]:
    """Run several commands at the same time (each a dict of run_cmd arguments) and wait for
    all: on a shared machine, toolkits trained side by side see the same background load."""
    return in_parallel(lambda k: run_cmd(**jobs[k]), len(jobs))


def thread_env(threads: int) -> dict:
    """Pin torch/OpenMP threads of a child (both toolkits read OMP_NUM_THREADS at start-up)."""
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)} if threads > 0 else {}
