"""The host a benchmark ran on: a fingerprint every record carries, and a measured peak.

Why: this project's records come from several machines that all call themselves "AMD EPYC"
(a Zen 4 and a Zen 5 virtual machine differ about 2x in float32 AVX-512 throughput), so a
figure without its host cannot be compared with anything.  ``fingerprint()`` says what the
CPU is (vendor, family, model, stepping, the flags that decide which kernels run: AVX-512,
AVX-512 BF16, AMX), how many cores and how much memory, the kernel, torch with its BLAS and
oneDNN, and the peer toolkits' versions.  ``host_id()`` is a short hash of the fields that make
two hosts different machines for speed (CPU identity, flags, cores, torch build).

The **peak probe** (``probe()``) times large float32 and bf16 matrix products on one thread
for a few seconds: the most arithmetic per second this host's torch can do on one core, the
denominator of every "share of peak" in the speed records (``flops.share_of_peak``).  Its
result is kept in ``bench/hosts.jsonl``, one line per host id, written only by the probe
(``python -m bench probe``), and read by every suite before it runs.
"""
from __future__ import annotations

import hashlib
import re
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
HOSTS = HERE / "hosts.jsonl"

#: CPU flags that decide which kernels torch, oneDNN and the peers' C++ use.
RELEVANT_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                  "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16")

#: The fields of a fingerprint that make two hosts different machines (for ``host_id``).
IDENTITY = ("vendor", "model_name", "family", "model", "stepping", "flags", "cores", "torch", "blas", "onednn")

#: (family, model) -> microarchitecture, for the AMD and Intel parts this project has met or
#: is likely to meet; a name only, never used for any computation.
MICROARCH = {
    ("AuthenticAMD", 23): "Zen/Zen 2", ("AuthenticAMD", 25): "Zen 3/Zen 4", ("AuthenticAMD", 26): "Zen 5",
}


def cpuinfo(text: Optional[str] = None) -> dict:
    """The first processor's fields of /proc/cpuinfo (``text`` for tests)."""
    if text is None:
        try:
            text = Path("/proc/cpuinfo").read_text()
        except OSError:
            return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def mem_total_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return float("nan")


def torch_build() -> dict:
    """torch's version, its BLAS and oneDNN (from ``torch.__config__.show()``) and the CPU
    capability ATen dispatches to."""
    try:
        import torch
    except ImportError:
        return {"torch": None}
    show = torch.__config__.show()
    blas = next((line.strip(" -") for line in show.splitlines() if "Math Kernel Library" in line or "OpenBLAS" in line), "")
    if not blas:
        blas = next((part.split("=", 1)[1] for part in show.replace(",", " ").split() if part.startswith("BLAS_INFO=")), "?")
    onednn = next((line.strip(" -") for line in show.splitlines() if "MKL-DNN" in line or "oneDNN" in line), "none")
    capability = next((line.split(":", 1)[1].strip() for line in show.splitlines() if "CPU capability usage" in line), "?")
    return {"torch": torch.__version__, "blas": blas.split(" for ")[0], "onednn": onednn,
            "mkldnn_enabled": bool(torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled),
            "cpu_capability": capability}


def peer_versions(peers: Optional[str | Path]) -> dict:
    """Versions of the peer toolkits installed by shared/peers/setup.sh under ``peers`` (one
    interpreter start each; missing peers are left out)."""
    if not peers:
        return {}
    out = {}
    # (name in the record, venv, distribution): CTranslate2 is pip-installed beside fairseq (its
    # converter reads fairseq checkpoints), fast_align is SYSTRAN's build in eflomal's venv
    for name, venv, dist in (("opennmt", "opennmt", "OpenNMT-py"), ("fairseq", "fairseq", "fairseq"),
                             ("marian", "marian", "pymarian"), ("eflomal", "eflomal", "eflomal"),
                             ("fast_align", "eflomal", "systran-align"), ("ctranslate2", "fairseq", "ctranslate2"),
                             ("joeynmt", "joeynmt", "joeynmt")):
        py = Path(peers) / venv / "bin" / "python"
        if not py.is_file():
            continue
        code = (f"import importlib.metadata as m\nv = m.version({dist!r})\n"
                "try:\n    t = m.version('torch')\nexcept Exception:\n    t = None\nprint(v, t)")
        r = subprocess.run([str(py), "-c", code], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.split():
            v, t = r.stdout.split()[:2]
            out[name] = v + (f" (torch {t})" if t != "None" and name not in ("ctranslate2", "fast_align") else "")
    return out


def fingerprint(peers: Optional[str | Path] = None, cpuinfo_text: Optional[str] = None) -> dict:
    """Everything a reader needs to know which machine and software a figure came from."""
    info = cpuinfo(cpuinfo_text)
    flags = set(info.get("flags", "").split())
    vendor = info.get("vendor_id", platform.processor() or "?")
    fp = {
        "vendor": vendor,
        "model_name": info.get("model name", "?"),
        "family": int(info["cpu family"]) if info.get("cpu family", "").isdigit() else None,
        "model": int(info["model"]) if info.get("model", "").isdigit() else None,
        "stepping": int(info["stepping"]) if info.get("stepping", "").isdigit() else None,
        "flags": [f for f in RELEVANT_FLAGS if f in flags],
        "cores": os.cpu_count(),
        "mem_gib": mem_total_gib(),
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        **torch_build(),
    }
    fp["peers"] = peer_versions(peers)
    fp["id"] = host_id(fp)
    fp["label"] = label(fp)
    return fp


def host_id(fp: dict) -> str:
    blob = json.dumps({k: fp.get(k) for k in IDENTITY}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def label(fp: dict) -> str:
    """A short name for tables: ``AMD EPYC (family 26, model 2: Zen 5)``."""
    name = fp.get("model_name") or "?"
    if fp.get("family") is not None:
        arch = MICROARCH.get((fp.get("vendor"), fp["family"]))
        name += f" (family {fp['family']}, model {fp.get('model')}" + (f": {arch}" if arch else "") + ")"
    return name


def _derived(text: str) -> str:
    """A machine as an older record or report section wrote it -> the same kind of name."""
    gpu = re.search(r"NVIDIA [A-Z]+\d+\w*(?: \d+GB)?(?: HBM\w+)?", text)
    if gpu:
        return gpu.group(0).strip()
    text = re.sub(r"^CPU: ", "", text.strip())
    text = re.sub(r", \d+ cores.*$", "", text)
    if text.startswith("AMD EPYC") and "(family" not in text:
        text += " (family not recorded)"
    return text


def label_of_record(rec: dict) -> str:
    """The host a record names, or what can be derived for records written before fingerprints:
    the ``cpu`` field some records carry, the machine of the report section of the same date
    (``host_derived``, bench/records.py), a GPU ``device``, else "unknown host (before fingerprints)"."""
    host = rec.get("host")
    if isinstance(host, dict):
        return host.get("label") or label(host)
    for field in ("cpu", "host_derived", "device"):
        if rec.get(field):
            return _derived(str(rec[field]).split(" (derived")[0])
    return "unknown host (before fingerprints)"


# -- the peak probe ---------------------------------------------------------------------------
def _products(dtype):  # noqa: ANN001, ANN202 - torch.dtype -> {library: fn(a, b)}
    """The matrix products torch offers on this host for ``dtype``: ATen's ``mm`` (MKL in the CPU
    wheels) and oneDNN's linear (what nmtkit's models use on AMD CPUs, ``nmtkit.models.gemm``)."""
    import torch

    found = {"mm": torch.mm}
    if torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        found["onednn"] = lambda a, bt: torch.ops.mkldnn._linear_pointwise(a, bt, None, "none", [], "")
    return found


def _gflops(dtype, n: int, seconds: float) -> dict:  # noqa: ANN001 - torch.dtype
    """Best GFLOP/s of ``[n, n] x [n, n]`` products in ``dtype`` over about ``seconds`` per
    library; the peak is the fastest library's."""
    import torch

    a = torch.randn(n, n).to(dtype)
    b = torch.randn(n, n).to(dtype)
    by_lib = {}
    for lib, fn in _products(dtype).items():
        try:
            fn(a, b)  # warm-up: pages, packing buffers, kernel selection
        except RuntimeError:
            continue
        best, reps, start = float("inf"), 0, time.perf_counter()
        while time.perf_counter() - start < seconds or reps < 3:
            t0 = time.perf_counter()
            fn(a, b)
            best = min(best, time.perf_counter() - t0)
            reps += 1
        by_lib[lib] = round(2 * n**3 / best / 1e9, 1)
    if not by_lib:
        raise RuntimeError(f"no {dtype} matrix product ran on this host")
    return {"gflops": max(by_lib.values()), "by_library": by_lib, "n": n}


def probe(seconds: float = 1.0, n: int = 2048) -> dict:
    """Peak float32 and bf16 GFLOP/s of one thread (the fastest library, fastest repeat): about
    ``4 x seconds`` in all."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = {"threads": 1, "seconds_each": seconds, "fp32": _gflops(torch.float32, n, seconds)}
        try:
            out["bf16"] = _gflops(torch.bfloat16, n, seconds)
        except RuntimeError as exc:  # a torch without CPU bf16 products
            out["bf16"] = {"gflops": None, "error": str(exc).splitlines()[0]}
    finally:
        torch.set_num_threads(threads)
    return out


def read_hosts(path: Path = HOSTS) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def cached_peak(host: str, path: Path = HOSTS) -> Optional[dict]:
    """The newest probe of host id ``host``, or None."""
    found = [h for h in read_hosts(path) if h.get("id") == host and h.get("peak")]
    return found[-1]["peak"] if found else None


def record_probe(fp: dict, peak: dict, path: Path = HOSTS) -> dict:
    """Append one host line (fingerprint + peak + date); the probe is the only writer."""
    import datetime as dt

    line = {**fp, "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "peak": peak}
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")
    return line


def host_for_record(fp: dict, path: Path = HOSTS) -> dict:
    """What a record carries: the fingerprint (without the long peer dict duplicated elsewhere)
    and the probe's peak of this host, if probed."""
    peak = cached_peak(fp["id"], path)
    rec = {k: v for k, v in fp.items()}
    if peak:
        rec["peak_gflops"] = {"fp32": peak["fp32"]["gflops"], "bf16": (peak.get("bf16") or {}).get("gflops")}
    return rec


def main(argv: Optional[list[str]] = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m bench probe", description="Fingerprint this host and measure its "
                                 "one-thread float32/bf16 peak; appends a line to bench/hosts.jsonl unless --dry-run.")
    ap.add_argument("--seconds", type=float, default=1.0, help="timing per precision and library (default: %(default)s)")
    ap.add_argument("--n", type=int, default=2048, help="matrix size (default: %(default)s)")
    ap.add_argument("--peers", default=os.environ.get("NMTKIT_PEERS", str(Path.home() / "nmt-peers")))
    ap.add_argument("--dry-run", action="store_true", help="print, do not write bench/hosts.jsonl")
    ap.add_argument("--hosts", default=str(HOSTS), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    fp = fingerprint(args.peers)
    peak = probe(args.seconds, args.n)
    print(json.dumps({"host": fp["label"], "id": fp["id"], "peak": peak}, indent=1))
    if not args.dry_run:
        record_probe(fp, peak, Path(args.hosts))
        print(f"appended to {args.hosts}", file=sys.stderr)


if __name__ == "__main__":
    main()
