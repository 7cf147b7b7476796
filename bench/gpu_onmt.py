"""OpenNMT-py 3.5.1 on the GPU machine, beside nmtkit: a real toolkit on the same GPU (issue 40).

What it measures, on the data and test set ``bench/gpu_speed.py`` uses (Multi30k en-de as nmtkit
preprocessed it, exported as BPE pieces so that both see the same pieces):

* training target tokens/s of OpenNMT-py's LSTM with input feeding at ``luong_wmt_en_de``'s
  shape (4 x 1000, global ``general`` attention: OpenNMT-py has no local-p) and of its
  Transformer at ``transformer_base``'s, in float32 and in its mixed precision (``model_dtype
  fp16``: torch autocast with a gradient scaler; 3.5.1 has no bf16), with ``--max-tokens``
  token batches as nmtkit's rows; the steady rate of its own report lines after the first ones;
* beam-5 translation of the test set with ``onmt_translate`` (batch 128, float32), by a
  Transformer it trained for ``--quality-minutes``, timed as a whole command and net of the
  start-up (the same command on one sentence); the report scores it.

Why a module of its own: the GPU machine has Python 3.12, PyTorch with CUDA and no network, so the
peer travels as wheels.  OpenNMT-py also imports, at start-up, every transform and scorer it ships,
whether a config uses them or not (spaCy, pyahocorasick, RapidFuzz, fastText, regex, sacreBLEU),
several of them large binary packages.  The configs here use none, so ``stubs`` writes an
importable stand-in for each one the machine lacks, which fails on first use and names itself:
a config that did need one stops with that message instead of measuring something else.

    python bench/gpu_onmt.py bundle --out .whl-onmt          # here: OpenNMT-py and what it needs, cp312 wheels
    python bench/gpu_onmt.py stubs --dir /tmp/onmt-stubs     # there: stand-ins for the missing modules
    python bench/gpu_onmt.py measure --data DATA --test SRC --out-dir OUT [--device cpu]   # there: gpu_onmt_rows.jsonl
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchlib as bl  # noqa: E402

#: The wheels ``bundle`` fetches for CPython 3.12 on x86-64 Linux: OpenNMT-py and what its
#: training, vocabulary and translation commands import and use (pyonmttok: its vocabularies).
WHEELS = ["OpenNMT-py==3.5.1", "ConfigArgParse", "six", "PyYAML", "pyonmttok>=1.37,<2"]
#: Imported at start-up only for transforms and scorers these configs do not use.
STUBBED = ("spacy", "ahocorasick", "rapidfuzz", "fasttext", "regex", "sacrebleu")
STUB = '''"""Stand-in written by bench/gpu_onmt.py: OpenNMT-py imports this module at start-up for a
transform or scorer the benchmark does not use, and it is not installed on this machine."""


class _Missing:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        raise ImportError(f"{{self._name}}.{{attr}}: {{__doc__}}")

    def __call__(self, *args, **kwargs):
        raise ImportError(f"{{self._name}}(): {{__doc__}}")


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Missing(f"{module}.{{name}}")
'''
#: nmtkit preset -> OpenNMT-py model; the shapes of ``nmtkit/models/presets.py`` and ``transformer_presets.py``.
MODELS = {"lstm": "luong_wmt_en_de", "transformer": "transformer_base"}
LSTM_SHAPE = {"layers": 4, "dim": 1000, "dropout": 0.2}
TRANSFORMER_SHAPE = {"layers": 6, "d": 512, "ffn": 2048, "heads": 8, "dropout": 0.1}
PEAK_LR, WARMUP = 7e-4, 4000  # transformer_base's own (Vaswani et al.'s schedule as the preset has it)


def bundle(out: Path) -> list[Path]:
    """Download :data:`WHEELS` for CPython 3.12 (manylinux x86-64) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    platforms = [a for p in ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64") for a in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
                    "--implementation", "cp", "--abi", "cp312", *platforms, "-d", str(out), *WHEELS], check=True)
    wheels = sorted(out.glob("*.whl"))
    print(f"{len(wheels)} wheels, {sum(w.stat().st_size for w in wheels) / 2**20:.1f} MiB in {out}")
    return wheels


def stubs(directory: Path, modules: tuple[str, ...] = STUBBED) -> list[str]:
    """Write a stand-in ``directory/NAME.py`` for each of ``modules`` this Python cannot import
    (put ``directory`` last on the path); returns the names written."""
    directory.mkdir(parents=True, exist_ok=True)
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    for m in missing:
        (directory / f"{m}.py").write_text(STUB.format(module=m), encoding="utf-8")
    return missing


def onmt(module: str, *args: object) -> list[str]:
    """An OpenNMT-py command run with this Python (``onmt.bin.train`` etc.), wherever it was installed."""
    return [sys.executable, "-c", f"import sys; from onmt.bin.{module} import main; sys.argv[0] = 'onmt_{module}'; main()",
            *map(str, args)]


def model_yaml(kind: str, txt: Path, out: Path, steps: int, max_tokens: int, gpu: bool, fp16: bool, save_steps: int = 0) -> Path:
    """OpenNMT-py's config for ``kind`` at the nmtkit preset's shape (:data:`MODELS`)."""
    path = out / f"{kind}.yaml"
    save = save_steps or steps
    if kind == "transformer":
        s = TRANSFORMER_SHAPE
        return bl.onmt_transformer_yaml(path, txt, out, steps, max_tokens, layers=s["layers"], d=s["d"], ffn=s["ffn"],
                                        heads=s["heads"], dropout=s["dropout"], peak_lr=PEAK_LR, warmup=WARMUP,
                                        save_steps=save, valid=False, gpu=gpu, fp16=fp16, report_every=10,
                                        share=False)  # transformer_base ties nothing (the paper's en-de shares; the preset does not)
    s = LSTM_SHAPE
    return bl.onmt_luong_yaml(path, txt, out, steps=steps, batch_size=max_tokens, embed=s["dim"], hidden=s["dim"],
                              layers=s["layers"], dropout=s["dropout"], save_steps=save, batch_type="tokens", report_every=10,
                              gpu=gpu, fp16=fp16)


def steady(log: str, skip: int) -> dict:
    """Target tokens/s over the report windows after the first ``skip`` (start-up, warm-up)."""
    parsed = bl.parse_onmt_train_log(log)
    w = parsed["windows"]
    if len(w) <= skip:
        raise SystemExit(f"OpenNMT-py logged {len(w)} report windows, need more than {skip}")
    tokens = sum(x["tgt_tokens"] for x in w[skip:])
    seconds = w[-1]["sec"] - w[skip - 1]["sec"] if skip else w[-1]["sec"]
    return {"tok_s": tokens / seconds, "updates": w[-1]["step"] - (w[skip - 1]["step"] if skip else 0), "seconds": seconds,
            "params": parsed["params"]}


def train(kind: str, txt: Path, out: Path, steps: int, max_tokens: int, gpu: bool, fp16: bool, env: dict) -> dict:
    """Build the vocabulary (untimed), train ``steps`` updates, and read the steady rate off the log."""
    w = out / f"{kind}-{'fp16' if fp16 else 'fp32'}"
    yaml = model_yaml(kind, txt, w, steps, max_tokens, gpu, fp16)
    bl.run_cmd(onmt("build_vocab", "-config", yaml, "-n_sample", "-1"), w / "vocab.log", env=env)
    run = bl.run_cmd(onmt("train", "-config", yaml), w / "train.log", env=env)
    return {"bench": "gpu_train_speed", "system": f"opennmt-{kind}", "arch": MODELS[kind], "amp": "fp16" if fp16 else "none",
            "max_tokens": max_tokens, "wall_s": run.wall, **steady((w / "train.log").read_text(encoding="utf-8"), skip=3),
            "nmtkit_params": nmtkit_count(MODELS[kind], txt.parent / "data_dicts.json")}


def nmtkit_count(arch: str, sizes: Path) -> int:
    """The parameters of nmtkit's ``arch`` at the data's dictionary sizes (``measure`` saved them),
    printed beside OpenNMT-py's own count (its vocabulary adds a few specials)."""
    import peers

    v = json.loads(sizes.read_text(encoding="utf-8"))
    return peers.nmtkit_params(arch, v["src"], v["tgt"])


def train_for(kind: str, txt: Path, out: Path, minutes: float, max_tokens: int, gpu: bool, env: dict, save_steps: int) -> Path:
    """Train ``kind`` in float32 for ``minutes`` of wall time (stopped by SIGTERM: OpenNMT-py then
    saves nothing, hence a checkpoint every ``save_steps`` updates); returns its last checkpoint."""
    w = out / f"{kind}-quality"
    yaml = model_yaml(kind, txt, w, 10**6, max_tokens, gpu, False, save_steps=save_steps)
    bl.run_cmd(onmt("build_vocab", "-config", yaml, "-n_sample", "-1"), w / "vocab.log", env=env)
    with open(w / "train.log", "w", encoding="utf-8") as log:
        proc = subprocess.Popen(onmt("train", "-config", yaml), stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env})
        try:
            proc.wait(timeout=minutes * 60)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait(timeout=120)
    found = sorted(w.glob("model_step_*.pt"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    if not found:
        raise SystemExit(f"OpenNMT-py saved no checkpoint in {minutes} min: see {w / 'train.log'}")
    return found[-1]


def translate(ckpt: Path, src: Path, out: Path, gpu: bool, batch_size: int, env: dict) -> dict:
    """onmt_translate at beam 5 as a whole command, and the same on one sentence (its start-up)."""
    import peers

    flags = list(peers.DECODE_FLAGS["opennmt"])
    one = out / "one.src"
    one.write_text(src.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    runs = {}
    for name, source in (("full", src), ("one", one)):
        cmd = onmt("translate", "-model", ckpt, "-src", source, "-output", out / f"opennmt.{name}.hyp", *flags,
                   "-batch_size", batch_size, "-gpu", 0 if gpu else -1)
        runs[name] = bl.run_cmd(cmd, out / f"translate.{name}.log", env=env)
    n = bl.count_lines(src)
    return {"bench": "gpu_translate_command", "system": "opennmt-transformer", "arch": MODELS["transformer"], "amp": "none",
            "sentences": n, "beam": 5,
            "batch_size": batch_size, "wall_s": runs["full"].wall, "startup_s": runs["one"].wall,
            "sent_s": n / runs["full"].wall, "sent_s_net": n / max(runs["full"].wall - runs["one"].wall, 1e-9),
            "hyp_pieces": str(out / "opennmt.full.hyp"), "checkpoint": ckpt.name}


def measure(args: argparse.Namespace) -> None:
    from preprocess import export_bpe_text

    from nmtkit.data.dataset import DataDir

    out = Path(args.out_dir)
    txt = out / "bpe"
    export_bpe_text(Path(args.data), txt)
    data = DataDir(args.data)
    (out / "data_dicts.json").write_text(json.dumps({"src": len(data.src_dict), "tgt": len(data.tgt_dict)}), encoding="utf-8")
    import torch

    gpu = args.device == "cuda"
    env = {**bl.ONMT_ENV, **({} if gpu else bl.thread_env(args.threads))}
    base = {"device": torch.cuda.get_device_name(0) if gpu else "cpu (smoke)", "torch": torch.__version__, "commit": args.commit}
    rows_path = out / "gpu_onmt_rows.jsonl"
    t0 = time.time()
    with open(rows_path, "a", encoding="utf-8") as rows:
        for kind in args.kinds:
            for fp16 in (False, True) if gpu else (False,):  # fp16 autocast is a CUDA path
                row = train(kind, txt, out, args.updates, args.max_tokens, gpu, fp16, env)
                rows.write(json.dumps({**base, **row}) + "\n")
                rows.flush()
                print(f"{row['system']} {row['amp']}: {row['tok_s']:,.0f} tgt tok/s ({row['params']:,} parameters)", flush=True)
        if args.quality_minutes > 0:
            ckpt = train_for("transformer", txt, out, args.quality_minutes, args.max_tokens, gpu, env, args.save_steps)
            tdir = out / "translate"
            tdir.mkdir(exist_ok=True)
            row = translate(ckpt, txt / "test.en", tdir, gpu, args.batch_size, env)  # BPE pieces, as OpenNMT-py reads them
            row["hyp_pieces"] = str(shutil.copyfile(row["hyp_pieces"], out / "opennmt-transformer.test.hyp"))
            rows.write(json.dumps({**base, **row, "trained": f"{args.quality_minutes} min on this GPU, float32",
                                   "model": f"OpenNMT-py transformer ({ckpt.name})"}) + "\n")
            print(f"opennmt-transformer translation: {row['sent_s']:.0f} sent/s ({row['sent_s_net']:.0f} net)", flush=True)
    print(f"{rows_path} after {time.time() - t0:.0f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bundle", help="download the wheels (here, with network)")
    b.add_argument("--out", type=Path, required=True)
    s = sub.add_parser("stubs", help="write stand-ins for the modules OpenNMT-py imports but these configs never use")
    s.add_argument("--dir", type=Path, required=True)
    m = sub.add_parser("measure", help="train and translate with OpenNMT-py (there)")
    m.add_argument("--data", required=True, help="an nmtkit-preprocess directory (the one gpu_speed.py trains on)")
    m.add_argument("--out-dir", required=True)
    m.add_argument("--commit", required=True, help="the commit of the tree measured (the GPU machine has no .git)")
    m.add_argument("--kinds", nargs="*", default=list(MODELS), choices=list(MODELS), help="models to time in training (none: only translate)")
    m.add_argument("--max-tokens", type=int, default=8000, help="token batch, as gpu_speed.py's nmtkit rows (default: %(default)s)")
    m.add_argument("--updates", type=int, default=100, help="updates per throughput run (report lines every 10; the first 3 are warm-up)")
    m.add_argument("--quality-minutes", type=float, default=2.5, help="train the Transformer this long to translate (0: skip)")
    m.add_argument("--save-steps", type=int, default=200, help="checkpoint interval of the --quality-minutes run")
    m.add_argument("--batch-size", type=int, default=128, help="translation batch size")
    m.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: a smoke test here")
    m.add_argument("--threads", type=int, default=1, help="CPU threads of a --device cpu smoke test")
    args = ap.parse_args()
    if args.cmd == "bundle":
        bundle(args.out)
    elif args.cmd == "stubs":
        print("stand-ins written for:", ", ".join(stubs(args.dir)) or "none (all present)")
    else:
        measure(args)


if __name__ == "__main__":
    main()
