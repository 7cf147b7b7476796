#!/usr/bin/env python3
"""Quality per CPU-hour: every toolkit trains for the same wall time on one core, then test2016.

Systems (``--systems``, any subset, run side by side, one core each, pinned with ``taskset``):

* ``nmtkit-fp32``, ``nmtkit-bf16``: ``luong_m30k`` (2x256 LSTM decoder, general attention, input
  feeding, tied embeddings, dropout 0.2) with a bidirectional encoder of 256 units per direction
  (``--encoder-hidden-size 256``, fairseq's ``lstm`` shape), Adam 2e-3 held, then annealed linearly
  to 0 over the last fifth of the hour (``--lr-schedule anneal``), label smoothing 0.1 and a weight
  average (``--ema-decay 0.999``), in float32 or bf16 autocast.  Chosen on valid BLEU:

  - the weight average: in a 25-minute A/B on one core each (bf16, plateau on loss) it led by
    about 1 valid BLEU from epoch 3 on;
  - the anneal: with the weight average the valid loss kept falling, so the plateau schedule
    never shrank the lr in the hour (best greedy valid BLEU 38.30 at 6761d4d, 37 epochs of slower
    code); annealed over the last 20 %, 38.90 (bf16, 42 epochs);
  - the wider encoder: in the same 1-hour A/B (bf16, annealed, side by side), 39.07 with 256
    units per direction (32 epochs) against 38.90 with 128 (CHANGELOG);
  - dropout 0.2 instead of the preset's 0.3: on this project's later, slower host (Zen 4, about
    half the float32 rate of the first; 17 epochs in the hour instead of 32-42), a 1-hour bf16
    A/B side by side, one core each, at 9dacd39: greedy valid BLEU 38.4 against 37.8 at the end,
    ahead at every one of the last epochs (valid loss 1.81 against 1.90 at epoch 16). Fewer epochs
    want less regularization;
* ``opennmt``: OpenNMT-py 3.5.1's closest RNN recipe (brnn encoder, 2 layers, hidden_size 256, i.e.
  128 units per direction: OpenNMT-py cannot put 256 per direction in front of a 256-unit decoder,
  bench/peers.py; general attention, input feeding, bridge, all embeddings shared, dropout 0.3,
  Adam 2e-3, label smoothing 0.1, its own weight average ``average_decay 1e-4``). Its parameter
  count is nmtkit's ``luong_m30k`` without ``--encoder-hidden-size`` less 0.39 M (its bridge maps
  the per-direction states, nmtkit's the joined ones), about 8 % fewer;
* ``marian``: Marian 1.12 ``--type s2s`` (biGRU encoder, conditional-GRU decoder, the layout of
  its Nematus-style examples: layer normalization, RNN/word dropout, exponential smoothing) at
  256/256 with tied embeddings, Adam 1e-3, label smoothing 0.1;
* ``fairseq``: fairseq 0.12.2 ``lstm`` at the same shape (bidirectional 2-layer encoder, 2x256
  decoder, shared embeddings, dropout 0.3, Adam 2e-3 with reduce-on-plateau, label smoothing 0.1).

The Transformers, a pair of their own (run them in a WORK of their own, so the report pairs them):

* ``nmtkit-transformer``: ``transformer_tiny`` (Wu et al. 2021's Multi30k shape: 4+4 layers, d 128,
  d_ff 256, 4 heads, all embeddings tied, dropout 0.3) with the recipe of examples/multi30k
  (``ARCH=transformer_tiny``): Adam (0.9, 0.98) lr 0.005, inverse square root after 2,000 warm-up
  updates, ``--max-tokens 4096``, label smoothing 0.1, at most 8,000 updates, bf16 autocast (the
  recipe's ``--amp auto`` on a CPU with native bf16).  The seed-1 run of 2026-11-27 trained before
  ba6fed1, when bf16 ran the attention backward at 9x float32's cost (0.65x float32's speed);
  since, bf16 trains transformer_tiny faster than float32 (bench/RESULTS.md, train speed);
* ``fairseq-transformer``: fairseq 0.12.2 ``--arch transformer`` at the same shape (the same
  parameter count, checked) with Wu et al.'s own fairseq recipe (the same optimiser and schedule,
  ``--warmup-init-lr 1e-7``, ``--clip-norm 0``, ``--patience 10`` on the valid loss), float32
  (fairseq's bf16 is not a CPU path);
* ``opennmt-transformer``: OpenNMT-py 3.5.1's Transformer (its FAQ set-up: ``param_init_glorot``,
  the ``noam`` schedule, token batches) at the same shape with biases on every projection
  (``add_qkvbias``, ``add_ffnbias``: the paper's layers) and Wu et al.'s optimiser: Adam (0.9, 0.98),
  ``noam`` scaled to peak at lr 0.005 after 2,000 warm-up updates (``benchlib.noam_scale``), no
  clipping, 4,096-token batches, at most 8,000 updates, dropout 0.3; pre-norm, the only layout its
  Transformer has (the same parameters as post-norm plus a final LayerNorm per stack); checkpoints
  about once per epoch, the last 10 averaged with its ``onmt_average_models``.

All train on the same BPE pieces (the recipe's Moses tokens and joint BPE, 8,000 merges, exported
from nmtkit's data directory), 64 sentences per batch, and save a checkpoint about once per epoch
(every ``ceil(pairs / 64)`` updates where a toolkit counts updates).  Training stops after
``--hours`` of wall time (nmtkit and fairseq stop by themselves; OpenNMT-py and Marian get SIGTERM).

Then, for every system, the same evaluation with the toolkit's own decoder, one core each:
greedy valid BLEU of every checkpoint (cased, detokenized sacreBLEU; fairseq's with its weight
average and with its own weights, the better kept: its ``--ema-decay`` has no warm-up, and at
this project's Intel host's pace a 15-minute tuning run's average was still mostly the initial
weights, valid BLEU 0.4-1.4) and, for the systems whose
recipe averages (``AVERAGE_LAST``: the Transformer pair, after Wu et al.'s evaluate.sh and
examples/multi30k), of the average of the last 10 epoch checkpoints; the candidate with the best
valid BLEU translates test2016 with beam 5 and batch 64, scored with BLEU and chrF.  The training
wall time of a checkpoint is its file time less the start of training.  Tune on valid only.

Every decoder uses beam 5 (greedy for the valid curve), the score divided by the length and a
bound of 1.5 x the source length (+10): ``decoding``.  Each system trains with ``--seeds`` (2 by
default) and the report gives mean and spread, and a paired bootstrap (sacrebleu, 1,000
resamples, BLEU and chrF) of nmtkit's best system against the best peer (``stats.py``).

The same tuning budget on valid for every system (``--phase tune``): every system trains each
variant of one grid (``TUNING_GRID``: dropout 0.2/0.3 x learning rate 1e-3/2e-3) for
``--tune-hours``, and the variant with the best greedy valid BLEU becomes its setting for the
measured runs (``tune/SYSTEM.choice.json``; without it, each system's documented settings,
``DEFAULT_HP``, and the report says so).  Test2016 is never looked at before the measured runs.

Phases: ``tune``, ``train`` (then ``eval``) for ``--systems``; ``report`` draws ``bench/quality_per_hour.png``
from every system evaluated so far and, with ``--record``, writes RESULTS.md and results.jsonl.
``--recorded-since DATE`` also draws, dashed, the newest record of each system not in WORK written on
or after DATE (for a WORK that re-ran only some systems; the reporter says from when the records are
comparable: one host ran the same training at half the other's speed).

    python bench/quality_per_hour.py --work /root/qph --systems nmtkit-bf16 marian --hours 1
    python bench/quality_per_hour.py --work /root/qph --phase report --record [--recorded-since 2026-11-25]
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import benchlib as bl

SYSTEMS = ("nmtkit-fp32", "nmtkit-bf16", "opennmt", "marian", "fairseq", "nmtkit-transformer", "fairseq-transformer",
           "opennmt-transformer")
#: The Transformer pair's preset and batches (the recipe of examples/multi30k and Wu et al.'s).
TRANSFORMER_ARCH, TRANSFORMER_TOKENS, TRANSFORMER_UPDATES, TRANSFORMER_WARMUP = "transformer_tiny", 4096, 8000, 2000
BATCH = 64
PICTURE = bl.REPO / "bench" / "quality_per_hour.png"
PICTURE_TRANSFORMER = bl.REPO / "bench" / "quality_per_hour_transformer.png"  # a WORK of the Transformer pair


# -- data ---------------------------------------------------------------------------------------
def prepare(args: argparse.Namespace, work: Path) -> tuple[Path, Path]:
    """The recipe's nmtkit data directory and a plain-text copy of its BPE pieces for the peers."""
    from preprocess import export_bpe_text

    dest, txt = work / "data", work / "bpe"
    if not (dest / "meta.json").is_file():
        raw = {s: bl.raw_prefix(args.data, s) for s in bl.SPLITS}
        bl.run_cmd(["nmtkit-preprocess", "-s", "en", "-t", "de", "--trainpref", raw["train"], "--validpref", raw["valid"],
                    "--testpref", raw["test"], "--destdir", dest, "--tokenizer", "moses", "--bpe", "subword-nmt",
                    "--bpe-merges", "8000", "--joined-dictionary", "--workers", "2"], work / "preprocess.log")
    if not (txt / "test.de").is_file():
        export_bpe_text(dest, txt)
    for split in ("valid", "test"):
        got, want = bl.count_lines(txt / f"{split}.en"), bl.count_lines(Path(f"{bl.raw_prefix(args.data, split)}.en"))
        if got != want:
            sys.exit(f"{txt / f'{split}.en'}: {got} lines, the raw file has {want}")
    return dest, txt


def toolkit(system: str) -> str:
    """The toolkit a system runs (its decoder flags, its checkpoint layout): nmtkit, fairseq, opennmt, marian."""
    return system.split("-")[0]


def run_name(system: str, seed: int) -> str:
    """The work folder of one training run: the system's name for seed 1 (as before seeds), else
    ``SYSTEM.seedN``."""
    return system if seed == 1 else f"{system}.seed{seed}"


def training_runs(systems: list[str], seeds: list[int], n_cores: int) -> list[str]:
    """The runs in the order they train, ``n_cores`` at a time: the systems go side by side in groups
    of ``n_cores``, and each group trains all its seeds before the next starts.  Why: a session that
    ends part-way (``--deadline``) then leaves the first systems complete for every seed, and a
    system's seeds meet the same neighbours (3 systems on 2 cores: nmtkit beside fairseq for both
    seeds, then OpenNMT-py's two seeds side by side)."""
    groups = [systems[i:i + n_cores] for i in range(0, len(systems), n_cores)]
    return [run_name(s, seed) for group in groups for seed in seeds for s in group]


def system_of(run: str) -> str:
    return run.split("/")[-1].split(".seed")[0].split(".tune")[0]


def hp_of_run(work: Path, run: str) -> dict:
    """A tuning run (``tune/SYSTEM.tuneK``) uses grid variant K; every other run the tuned choice."""
    if ".tune" in run:
        return dict(TUNING_GRID[int(run.split(".tune")[1])])
    return tuned_hp(work, system_of(run))


def seed_of(run: str) -> int:
    return int(run.split(".seed")[1]) if ".seed" in run else 1


def usable_cores() -> list[int]:
    """The CPUs this process may run on (its affinity: a benchmark started under ``taskset -c 0``
    pins its runs to core 0 only, one at a time), each run pinned to one of them."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def tune(args: argparse.Namespace, dest: Path, txt: Path, work: Path) -> None:
    """The same tuning budget on valid for every system: each variant of ``TUNING_GRID`` trains for
    ``--tune-hours`` (as many side by side as there are cores), its checkpoints are scored by greedy
    valid BLEU, and the best variant becomes the system's setting (``tune/SYSTEM.choice.json``)."""
    runs = [f"tune/{s}.tune{k}" for s in args.systems for k in range(len(TUNING_GRID))]
    cores = usable_cores()
    hours = args.hours
    args.hours = args.tune_hours
    try:
        for wave in [runs[i:i + len(cores)] for i in range(0, len(runs), len(cores))]:
            bl.stop_before_deadline(args.deadline, wave_seconds(work, wave, args.hours), f"tuning {', '.join(wave)}")
            bl.in_parallel(lambda k: train_one(args, wave[k], cores[k], dest, txt, work), len(wave))
            bl.in_parallel(lambda k: eval_one(args, wave[k], cores[k], txt, work, test=False), len(wave))
    finally:
        args.hours = hours
    for s in args.systems:
        tried = [json.loads((work / f"tune/{s}.tune{k}" / "eval.json").read_text()) for k in range(len(TUNING_GRID))]
        best = max(tried, key=lambda e: e["best"]["valid_bleu"])
        choice = {"system": s, "hp": best["hp"], "valid_bleu": best["best"]["valid_bleu"], "tune_hours": args.tune_hours,
                  "grid": TUNING_GRID, "tried": [{"hp": e["hp"], "valid_bleu": e["best"]["valid_bleu"]} for e in tried]}
        (work / "tune" / f"{s}.choice.json").write_text(json.dumps(choice, indent=1) + "\n")
        print(f"{s}: chose {choice['hp']} on valid (greedy BLEU {choice['valid_bleu']:.2f}; tried "
              + ", ".join(f"{t['hp']}: {t['valid_bleu']:.2f}" for t in choice["tried"]) + ")", flush=True)


#: What a wave costs besides its training hours: set-up (binarising for a peer) and evaluation
#: (about 9 minutes for the Transformers after 1 h), with room to spare; for --deadline.
WAVE_MARGIN_S = 900


def wave_seconds(work: Path, wave: list[str], hours: float) -> float:
    """About how long ``wave`` still takes: 0 when every run is evaluated, the margin alone when
    every run has trained (``train.json``), else ``hours`` more."""
    if all((work / run / "eval.json").is_file() for run in wave):
        return 0.0
    trained = all((work / run / "train.json").is_file() for run in wave)
    return (0.0 if trained else hours * 3600) + WAVE_MARGIN_S


def runs_in(work: Path) -> list[str]:
    """Every run with an evaluation in ``work``: systems in SYSTEMS order, seeds ascending."""
    found = [p.parent.name for p in work.glob("*/eval.json") if system_of(p.parent.name) in SYSTEMS]
    return sorted(found, key=lambda r: (SYSTEMS.index(system_of(r)), seed_of(r)))


def updates_per_epoch(txt: Path) -> int:
    return -(-bl.count_lines(txt / "train.en") // BATCH)


def transformer_updates_per_epoch(txt: Path) -> int:
    """About one epoch of ``TRANSFORMER_TOKENS`` batches (each pair costs its longer side with
    ``</s>``, before padding): how often a toolkit that counts only steps saves a checkpoint."""
    def lengths(side: str) -> list[int]:
        return [len(line.split()) + 1 for line in (txt / f"train.{side}").read_text(encoding="utf-8").splitlines()]

    return -(-sum(map(max, lengths("en"), lengths("de"))) // TRANSFORMER_TOKENS)


# -- one toolkit each ---------------------------------------------------------------------------
def peer_bin(args: argparse.Namespace, venv: str, tool: str) -> Path:
    return Path(args.peers) / venv / "bin" / tool


def onmt_yaml(path: Path, txt: Path, out: Path, per_epoch: int, seed: int = 1, dropout: float = 0.3, lr: float = 0.002,
              transformer: bool = False) -> Path:
    """OpenNMT-py's RNN recipe at luong_m30k's shape, or (``transformer``) its Transformer at
    transformer_tiny's with Wu et al.'s optimiser (see the module docstring); ``lr``: the peak."""
    if transformer:
        return bl.onmt_transformer_yaml(path, txt, out, TRANSFORMER_UPDATES, TRANSFORMER_TOKENS, layers=4, d=128, ffn=256,
                                        heads=4, dropout=dropout, peak_lr=lr, warmup=TRANSFORMER_WARMUP,
                                        save_steps=per_epoch, seed=seed)
    path.write_text(
        bl.onmt_data_header("quality_per_hour.py", txt, out, seed, valid=True) + f"""encoder_type: brnn
decoder_type: rnn
rnn_type: LSTM
enc_layers: 2
dec_layers: 2
word_vec_size: 256
hidden_size: 256
global_attention: general
input_feed: 1
bridge: true
share_vocab: true
share_embeddings: true
share_decoder_embeddings: true
average_decay: 0.0001
dropout: [{dropout}]
param_init: 0.1
world_size: 1
gpu_ranks: []
batch_type: sents
batch_size: {BATCH}
valid_batch_size: {BATCH}
normalization: tokens
optim: adam
learning_rate: {lr}
label_smoothing: 0.1
max_grad_norm: 5
train_steps: 1000000
valid_steps: {per_epoch}
save_checkpoint_steps: {per_epoch}
keep_checkpoint: -1
report_every: 100
save_model: {out}/model
""",
        encoding="utf-8",
    )
    return path


#: Each system's documented dropout and learning rate (module docstring), the starting point of tuning.
DEFAULT_HP = {"nmtkit-fp32": {"dropout": 0.2, "lr": 0.002}, "nmtkit-bf16": {"dropout": 0.2, "lr": 0.002},
              "opennmt": {"dropout": 0.3, "lr": 0.002}, "marian": {"dropout": 0.2, "lr": 0.001},
              "fairseq": {"dropout": 0.3, "lr": 0.002},
              "nmtkit-transformer": {"dropout": 0.3, "lr": 0.005}, "fairseq-transformer": {"dropout": 0.3, "lr": 0.005},
              "opennmt-transformer": {"dropout": 0.3, "lr": 0.005}}

#: The tuning grid, the same for every system (the same budget on valid): ``--phase tune`` trains
#: each variant for ``--tune-hours`` and keeps the best greedy valid BLEU (``tuned_hp``).
TUNING_GRID = [{"dropout": d, "lr": lr} for d in (0.2, 0.3) for lr in (0.001, 0.002)]


def tuned_hp(work: Path, system: str) -> dict:
    """The variant ``--phase tune`` chose on valid for ``system``, else its documented settings."""
    choice = work / "tune" / f"{system}.choice.json"
    if choice.is_file():
        return json.loads(choice.read_text())["hp"]
    return dict(DEFAULT_HP[system])


def train_plan(args: argparse.Namespace, system: str, dest: Path, txt: Path, w: Path, seed: int = 1,
               hp: Optional[dict] = None) -> tuple[list[list], dict, bool]:
    """(setup commands, then the training command), extra environment, and whether the training
    command must be stopped with SIGTERM at the deadline (it has no wall-time limit of its own).
    ``hp``: dropout and learning rate (default: the system's documented ones, ``DEFAULT_HP``)."""
    per_epoch = updates_per_epoch(txt)
    hp = {**DEFAULT_HP[system], **(hp or {})}
    dropout, lr = hp["dropout"], hp["lr"]
    if system == "nmtkit-transformer":
        return [["nmtkit-train", dest, "--arch", TRANSFORMER_ARCH, "--save-dir", w / "ckpt", "--seed", seed, "--threads", "1",
                 "--amp", "bf16", "--max-tokens", TRANSFORMER_TOKENS, "--label-smoothing", "0.1", "--max-update", TRANSFORMER_UPDATES,
                 "--max-epoch", "1000", "--dropout", dropout, "--lr", lr, "--keep-last", "0",  # every epoch on the valid curve
                 "--stop-time-hours", args.hours]], {}, False
    if system == "fairseq-transformer":
        return [fairseq_preprocess(args, txt, w),
                [peer_bin(args, "fairseq", "fairseq-train"), w / "bin", "--cpu", "--seed", seed, "--arch", "transformer",
                 "--encoder-layers", 4, "--decoder-layers", 4, "--encoder-embed-dim", 128, "--decoder-embed-dim", 128,
                 "--encoder-ffn-embed-dim", 256, "--decoder-ffn-embed-dim", 256, "--encoder-attention-heads", 4,
                 "--decoder-attention-heads", 4, "--share-all-embeddings", "--dropout", dropout, "--optimizer", "adam",
                 "--adam-betas", "(0.9, 0.98)", "--clip-norm", "0.0", "--lr", lr, "--lr-scheduler", "inverse_sqrt",
                 "--warmup-updates", 2000, "--warmup-init-lr", "1e-07", "--criterion", "label_smoothed_cross_entropy",
                 "--label-smoothing", "0.1", "--max-tokens", TRANSFORMER_TOKENS, "--max-update", TRANSFORMER_UPDATES,
                 "--patience", 10, "--stop-time-hours", args.hours, "--save-dir", w / "ckpt", "--log-format", "simple",
                 "--log-interval", "100", "--num-workers", "0"]], bl.ONMT_ENV, False
    if system.startswith("nmtkit"):
        amp = "bf16" if system.endswith("bf16") else "none"
        return [["nmtkit-train", dest, "--arch", "luong_m30k", "--save-dir", w / "ckpt", "--seed", seed, "--threads", "1",
                 "--amp", amp, "--batch-size", BATCH, "--label-smoothing", "0.1", "--max-epoch", "100",
                 "--ema-decay", "0.999", "--lr-schedule", "anneal", "--anneal-fraction", "0.2",
                 "--encoder-hidden-size", "256", "--dropout", dropout, "--lr", lr, "--keep-last", "0",
                 "--stop-time-hours", args.hours]], {}, False
    if toolkit(system) == "opennmt":
        transformer = system == "opennmt-transformer"
        every = transformer_updates_per_epoch(txt) if transformer else per_epoch
        yaml = onmt_yaml(w / "onmt.yaml", txt, w / "ckpt", every, seed, dropout, lr, transformer)
        return [[peer_bin(args, "opennmt", "onmt_build_vocab"), "-config", yaml, "-n_sample", "-1"],
                [peer_bin(args, "opennmt", "onmt_train"), "-config", yaml]], bl.ONMT_ENV, True
    if system == "marian":
        (w / "ckpt").mkdir(parents=True, exist_ok=True)
        return [[peer_bin(args, "marian", "pymarian"), "--type", "s2s", "--enc-type", "bidirectional", "--enc-cell", "gru",
                 "--dec-cell", "gru", "--dim-emb", 256, "--dim-rnn", 256, "--tied-embeddings-all", "--layer-normalization",
                 "--dropout-rnn", dropout, "--dropout-src", 0.1, "--dropout-trg", 0.1, "--label-smoothing", 0.1,
                 "--exponential-smoothing", "--learn-rate", lr, "--clip-norm", 5, "--train-sets", txt / "train.en", txt / "train.de",
                 "--vocabs", w / "vocab.yml", w / "vocab.yml", "--cpu-threads", 1, "--mini-batch", BATCH, "--maxi-batch", 100,
                 "--max-length", 100, "--save-freq", f"{per_epoch}u", "--disp-freq", "100u", "--valid-freq", "1000000u",
                 "--model", w / "ckpt" / "model.npz", "--seed", seed, "--sigterm", "save-and-exit", "--log", w / "marian_train.log"]], {}, True
    if system == "fairseq":
        fs = "fairseq"
        return [fairseq_preprocess(args, txt, w),
                [peer_bin(args, fs, "fairseq-train"), w / "bin", "--cpu", "--seed", seed, "--arch", "lstm", "--encoder-layers", "2",
                 "--decoder-layers", "2", "--encoder-bidirectional", "--encoder-embed-dim", "256", "--decoder-embed-dim", "256",
                 "--encoder-hidden-size", "256", "--decoder-hidden-size", "256", "--decoder-out-embed-dim", "256",
                 "--share-all-embeddings", "--dropout", dropout, "--criterion", "label_smoothed_cross_entropy",
                 "--store-ema", "--ema-decay", "0.999",
                 "--label-smoothing", "0.1", "--optimizer", "adam", "--lr", lr, "--clip-norm", "5",
                 "--lr-scheduler", "reduce_lr_on_plateau", "--lr-shrink", "0.5", "--batch-size", BATCH, "--max-epoch", "100",
                 "--stop-time-hours", args.hours, "--save-dir", w / "ckpt", "--log-format", "simple", "--log-interval", "100",
                 "--num-workers", "0"]], bl.ONMT_ENV, False
    raise ValueError(system)


def fairseq_preprocess(args: argparse.Namespace, txt: Path, w: Path) -> list:
    """fairseq's binarisation of the shared BPE pieces, one joined dictionary (not timed)."""
    return [peer_bin(args, "fairseq", "fairseq-preprocess"), "--source-lang", "en", "--target-lang", "de", "--trainpref",
            txt / "train", "--validpref", txt / "valid", "--destdir", w / "bin", "--joined-dictionary", "--workers", "1"]


def set_aside_interrupted(w: Path) -> Optional[Path]:
    """A run directory without ``train.json`` is a training that was stopped before its deadline
    (a session's end, a reboot): its checkpoints would let nmtkit or fairseq resume with a fresh
    clock, an hour on top of what they had.  Why rename, not delete: its logs say what happened.
    So a suite that spans sessions redoes only unfinished runs, each from the start."""
    if not w.exists():
        return None
    aside = w.with_name(f"{w.name}.interrupted-{time.strftime('%Y%m%d-%H%M%S', time.localtime(w.stat().st_mtime))}")
    w.rename(aside)
    print(f"{w} was an unfinished training: moved to {aside}; it starts again from the beginning", flush=True)
    return aside


def end_session(proc: subprocess.Popen) -> None:
    """Kill whatever is left of the session ``proc`` leads (started with ``start_new_session``):
    the children a training left behind, or the training itself when the suite is interrupted."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def train_one(args: argparse.Namespace, run: str, core: int, dest: Path, txt: Path, work: Path) -> dict:
    """Train one run (a system and seed, ``run_name``) on one core for --hours; returns what eval
    and report need."""
    w, system, seed = work / run, system_of(run), seed_of(run)
    done = w / "train.json"
    if done.is_file():
        return json.loads(done.read_text())
    set_aside_interrupted(w)
    w.mkdir(parents=True)
    hp = hp_of_run(work, run)
    cmds, env, kill = train_plan(args, system, dest, txt, w, seed, hp)
    env = {**env, **bl.thread_env(1)}
    pin = ["taskset", "-c", str(core)]
    for k, cmd in enumerate(cmds[:-1]):
        bl.run_cmd(pin + cmd, w / f"setup{k}.log", env=env)
    cmd = [str(c) for c in pin + cmds[-1]]
    print(f"$ {shlex.join(cmd)}", flush=True)
    start = time.time()
    with open(w / "train.log", "w", encoding="utf-8") as log:
        # a session of its own, removed whole at the end: OpenNMT-py's data-loader workers outlived
        # its SIGTERM (4 processes, 1.7 GB, beside the next suite's timings)
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env}, start_new_session=True)
        deadline, stopped = start + args.hours * 3600, False
        try:
            while proc.poll() is None:
                if kill and time.time() >= deadline:
                    proc.send_signal(signal.SIGTERM)
                    stopped = True
                    try:
                        proc.wait(timeout=300)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                    break
                time.sleep(1)
        finally:
            end_session(proc)
    wall = time.time() - start
    info = {"system": system, "seed": seed, "run": run, "hp": hp, "start": start, "train_wall_s": wall, "rc": proc.wait(), "core": core,
            "cmds": [shlex.join(map(str, c)) for c in cmds], "env": env, "commit": bl.git_commit(),
            "hours": args.hours, "cpu": bl.cpu_model(), "host": bl.this_host(args.peers)}
    if info["rc"] != 0 and not (stopped and info["rc"] in (-signal.SIGTERM, 143)):  # a crash, not our deadline
        sys.exit(f"{run}: training failed with status {info['rc']}; see {w / 'train.log'}")
    done.write_text(json.dumps(info, indent=2) + "\n")
    return info


# -- evaluation ---------------------------------------------------------------------------------
def fairseq_ema_weights(args: argparse.Namespace, ckpt: Path) -> Path:
    """fairseq keeps its weight average (``--store-ema``) beside the model in each checkpoint
    (``extra_state["ema"]``) and generates with the raw weights; this writes a copy whose model is the
    average, which fairseq-interactive then loads (not timed).  A checkpoint without one is used as is."""
    out = ckpt.parent.parent / "ema" / ckpt.name  # beside ckpt/, whose checkpoint*.pt are the run's own
    out.parent.mkdir(exist_ok=True)
    if out.is_file() and out.stat().st_mtime >= ckpt.stat().st_mtime:
        return out
    code = ("import sys, torch\nst = torch.load(sys.argv[1], map_location='cpu', weights_only=False)\n"
            "ema = st.get('extra_state', {}).get('ema')\nif ema is None:\n    sys.exit(3)\n"
            "st['model'] = ema\ntorch.save(st, sys.argv[2])\n")
    r = subprocess.run([str(peer_bin(args, "fairseq", "python")), "-c", code, str(ckpt), str(out)], capture_output=True, text=True)
    if r.returncode == 3:
        return ckpt
    if r.returncode != 0:
        sys.exit(f"fairseq EMA copy of {ckpt} failed: {r.stderr[-2000:]}")
    return out



#: Systems whose recipe averages the last N epoch checkpoints before translating: Wu et al.
#: (2021)'s evaluate.sh (fairseq's scripts/average_checkpoints.py --num-epoch-checkpoints 10) and
#: examples/multi30k (AVG).  The average joins the candidates that valid BLEU chooses among.
AVERAGE_LAST = {"nmtkit-transformer": 10, "fairseq-transformer": 10, "opennmt-transformer": 10}

#: fairseq 0.12.2 installs no average_checkpoints.py; this does what it does for epoch checkpoints:
#: the mean of every floating-point tensor of ``model``, the rest of the newest checkpoint kept.
FAIRSEQ_AVERAGE = (
    "import sys, torch\nstates = [torch.load(p, map_location='cpu', weights_only=False) for p in sys.argv[2:]]\n"
    "out = states[-1]\nfor k, v in out['model'].items():\n"
    "    if v.is_floating_point():\n"
    "        out['model'][k] = sum(s['model'][k].double() for s in states).div(len(states)).to(v.dtype)\n"
    "torch.save(out, sys.argv[1])\n")


def average_last(args: argparse.Namespace, system: str, w: Path, n: int) -> Optional[tuple[str, Path, list[str]]]:
    """The average of a run's last ``n`` epoch checkpoints (label, path, the epochs averaged), written
    once beside ``ckpt/`` with the toolkit's own averaging; None with fewer than two."""
    epochs = [(label, p) for label, p in checkpoints(system, w) if label.isdigit()][-n:]
    if len(epochs) < 2:
        return None
    out = w / "average" / f"checkpoint.avg{len(epochs)}.pt"
    out.parent.mkdir(exist_ok=True)
    if not (out.is_file() and out.stat().st_mtime >= max(p.stat().st_mtime for _, p in epochs)):
        if toolkit(system) == "nmtkit":
            cmd = [bl.nmtkit_bin("nmtkit-average"), "--inputs", *[p for _, p in epochs], "-o", out]
        elif toolkit(system) == "opennmt":  # its own tool (onmt/bin/average_models.py)
            cmd = [peer_bin(args, "opennmt", "onmt_average_models"), "-models", *[p for _, p in epochs], "-output", out]
        else:
            cmd = [peer_bin(args, "fairseq", "python"), "-c", FAIRSEQ_AVERAGE, out, *[p for _, p in epochs]]
        bl.run_cmd(cmd, out.with_suffix(".log"), quiet=True, env=bl.ONMT_ENV if toolkit(system) == "opennmt" else None)
    return f"avg{len(epochs)}", out, [label for label, _ in epochs]


def checkpoints(system: str, w: Path) -> list[tuple[str, Path]]:
    """Every saved checkpoint of a run, oldest first (label, path)."""
    ck = w / "ckpt"
    if toolkit(system) in ("nmtkit", "fairseq"):
        found = [(p.stem.removeprefix("checkpoint"), p) for p in ck.glob("checkpoint[0-9]*.pt")]
        found.sort(key=lambda t: int(t[0]))
        last = ck / "checkpoint_last.pt"
        if last.is_file() and (not found or last.stat().st_mtime > found[-1][1].stat().st_mtime + 1):
            found.append(("last", last))
        return found
    if toolkit(system) == "opennmt":
        found = [(p.stem.rsplit("_", 1)[1], p) for p in ck.glob("model_step_*.pt")]
        return sorted(found, key=lambda t: int(t[0]))
    if system == "marian":
        found = [(p.stem.split(".iter")[1], p) for p in ck.glob("model.iter*.npz")]
        found.sort(key=lambda t: int(t[0]))
        final = ck / "model.npz"
        if final.is_file() and (not found or final.stat().st_mtime > found[-1][1].stat().st_mtime + 1):
            found.append(("final", final))
        return found
    raise ValueError(system)


def decoding(system: str, beam: int) -> list:
    """The toolkit's flags for beam ``beam``, the score divided by the length and a length bound of
    1.5 x the source (+10): the same search for every system (bench/peers.py; Marian's default is no
    normalisation, ``--normalize 0``, which the records before 2026-11-27 decoded with)."""
    import peers

    flags = list(peers.DECODE_FLAGS[toolkit(system)])
    beam_flag = peers.DECODE_MEANING[toolkit(system)][0]
    flags[flags.index(beam_flag) + 1] = beam
    return flags


#: fairseq-interactive with the encoder layer fairseq trains with.  fairseq 0.12.2 sends a loaded
#: Transformer encoder through torch's BetterTransformer kernel (``torch._transformer_encoder_layer_fwd``,
#: fairseq/modules/transformer_layer.py and models/transformer/transformer_encoder.py: any layer
#: whose weights came from a state dict, ``load_to_BT``) on any torch >= 1.12, without the mask type
#: that torch 2.x wants, and the first padded batch fails ("Mask Type should be defined").  This
#: leaves ``load_to_BT`` off after loading, so the encoder runs the layers it trained with; nothing
#: else changes.
FAIRSEQ_INTERACTIVE_STANDARD_ENCODER = (
    "import sys\nfrom fairseq.modules import transformer_layer as tl\n"
    "load = tl.TransformerEncoderLayerBase._load_from_state_dict\n"
    "def standard(self, *a, **k):\n    load(self, *a, **k)\n    self.load_to_BT = False\n"
    "tl.TransformerEncoderLayerBase._load_from_state_dict = standard\n"
    "from fairseq_cli.interactive import cli_main\nsys.argv[0] = 'fairseq-interactive'\ncli_main()\n")


def decode_cmd(args: argparse.Namespace, system: str, ckpt: Path, w: Path, beam: int, threads: int = 1,
               extra: tuple = (), files: tuple = ("/dev/stdin", "/dev/stdout")) -> tuple[list, dict, bool]:
    """(command reading the source on stdin and writing to stdout, environment, whether it reads and
    writes BPE pieces).  OpenNMT-py reads and writes the ``files`` (source, output) instead: its
    ``-output /dev/stdout`` would truncate a redirected stdout under its own timing line."""
    env = bl.thread_env(threads)
    norm = decoding(system, beam)  # the same beam, length normalisation and length bound for all (bench/peers.py)
    if toolkit(system) == "nmtkit":
        return [bl.nmtkit_bin("nmtkit-translate"), "--path", ckpt, *norm, "--batch-size", BATCH, "--threads", threads,
                "--device", "cpu", *extra], env, False
    if toolkit(system) == "opennmt":
        return [peer_bin(args, "opennmt", "onmt_translate"), "-model", ckpt, "-src", files[0], "-output", files[1],
                *norm, "-batch_size", BATCH, "-gpu", "-1", *extra], {**env, **bl.ONMT_ENV}, True
    if system == "marian":
        vocab = w / "vocab.yml"
        return [peer_bin(args, "marian", "pymarian"), "decode", "-m", ckpt, "-v", vocab, vocab, "--cpu-threads", threads,
                *norm, "--mini-batch", BATCH, "--maxi-batch", 100, "--maxi-batch-sort", "src", "--quiet", *extra], env, True
    if toolkit(system) == "ctranslate2":  # a model ct2-fairseq-converter made (bench/translate_speed.py)
        return [peer_bin(args, "fairseq", "python"), bl.REPO / "bench" / "ct2_translate.py", ckpt, *norm, "--batch-size", BATCH,
                "--threads", threads, *extra], env, True
    if toolkit(system) == "fairseq":
        interactive = ([peer_bin(args, "fairseq", "python"), "-c", FAIRSEQ_INTERACTIVE_STANDARD_ENCODER] if "transformer" in system
                       else [peer_bin(args, "fairseq", "fairseq-interactive")])
        cmd = [*interactive, w / "bin", "--path", ckpt, "--source-lang", "en",
               "--target-lang", "de", "--cpu", *norm, "--batch-size", BATCH, "--buffer-size", 2000, *extra]
        return cmd, {**env, **bl.ONMT_ENV}, True
    raise ValueError(system)


def sources(args: argparse.Namespace, split: str, txt: Path) -> dict[bool, Path]:
    """A split's source side: raw text (False) for nmtkit, BPE pieces (True) for the peers."""
    return {False: Path(f"{bl.raw_prefix(args.data, split)}.en"), True: txt / f"{split}.en"}


def translate(args: argparse.Namespace, system: str, ckpt: Path, source: dict[bool, Path], beam: int, w: Path, out: Path,
              threads: int = 1, extra: tuple = (), core: int | None = None) -> bl.Run:
    """Translate ``source`` (see ``sources``) into detokenized text ``out``; returns the timed run
    (the command alone: turning a peer's pieces into text afterwards is not timed)."""
    from translate import fairseq_hyps, unbpe_detok

    raw_out = out.with_suffix(".raw")
    src = source[toolkit(system) != "nmtkit"]  # the peers read and write BPE pieces
    cmd, env, pieces = decode_cmd(args, system, ckpt, w, beam, threads, extra, files=(src, raw_out))
    pin = ["taskset", "-c", str(core)] if core is not None else []
    to_file = toolkit(system) == "opennmt"  # writes raw_out itself
    run = bl.run_cmd(pin + cmd, out.with_suffix(".log"), stdin=None if to_file else src, stdout=None if to_file else raw_out,
                     env=env, quiet=True)
    if toolkit(system) == "fairseq":
        fairseq_hyps(raw_out, raw_out)
    if pieces:
        unbpe_detok(raw_out, out, "de")
    else:
        raw_out.replace(out)
    n, want = bl.count_lines(out), bl.count_lines(src)
    if n != want:
        sys.exit(f"{system}: {out} has {n} lines for {want} source lines")
    return run


def scores(hyp: Path, ref: Path) -> dict:
    from sacrebleu.metrics import BLEU, CHRF

    h = hyp.read_text(encoding="utf-8").split("\n")[:-1]
    r = ref.read_text(encoding="utf-8").split("\n")[:-1]
    b, c = BLEU(), CHRF()
    return {"bleu": round(b.corpus_score(h, [r]).score, 2), "chrf": round(c.corpus_score(h, [r]).score, 2),
            "signature": str(b.get_signature())}


def fresh_output(hyp: Path, ckpt: Path, source: Path) -> bool:
    """Whether ``hyp`` is a whole translation of ``source`` written after ``ckpt`` (an evaluation
    that was interrupted, or re-run to add a candidate, does not translate it again)."""
    return hyp.is_file() and hyp.stat().st_mtime >= ckpt.stat().st_mtime and bl.count_lines(hyp) == bl.count_lines(source)


def eval_one(args: argparse.Namespace, run: str, core: int, txt: Path, work: Path, test: bool = True) -> dict:
    """Greedy valid BLEU of every checkpoint, then (``test``) beam 5 on test2016 with the best one."""
    w, system = work / run, system_of(run)
    done = w / "eval.json"
    if done.is_file():
        return json.loads(done.read_text())
    info = json.loads((w / "train.json").read_text())
    ev = w / "eval"
    ev.mkdir(exist_ok=True)
    curve = []
    for label, ck in checkpoints(system, w):
        # fairseq: its weight average (--store-ema) and its own weights, the better on valid; the
        # average has no warm-up, so after a few hundred updates it is still mostly the initial weights
        ema = fairseq_ema_weights(args, ck) if system == "fairseq" else ck
        weights = [("ema", ema), ("raw", ck)] if ema != ck else [("", ck)]
        tried = []
        for kind, path in weights:
            hyp = ev / f"valid.{label}{'.' + kind if kind else ''}.de"
            if not fresh_output(hyp, path, sources(args, "valid", txt)[False]):  # an earlier evaluation's is reused
                translate(args, system, path, sources(args, "valid", txt), 1, w, hyp, core=core)
            s = scores(hyp, Path(f"{bl.raw_prefix(args.data, 'valid')}.de"))
            tried.append({"checkpoint": label, "path": str(path), "wall_s": round(ck.stat().st_mtime - info["start"], 1),
                          "valid_bleu": s["bleu"], **({"weights": kind} if kind else {})})
        curve.append(max(tried, key=lambda c: c["valid_bleu"]))  # the first on a tie: the average
        print(f"{run} {label}: {curve[-1]['wall_s'] / 60:.1f} min, valid BLEU "
              + ", ".join(f"{c['valid_bleu']}" + (f" ({c['weights']})" if "weights" in c else "") for c in tried), flush=True)
    if not curve:
        sys.exit(f"{run}: no checkpoint in {w / 'ckpt'} (was it trained for less than an epoch?)")
    averaged = None
    avg = average_last(args, system, w, AVERAGE_LAST[system]) if system in AVERAGE_LAST else None
    if avg is not None:
        label, ck, epochs = avg
        hyp = ev / f"valid.{label}.de"
        translate(args, system, ck, sources(args, "valid", txt), 1, w, hyp, core=core)
        newest = next(c for c in curve if c["checkpoint"] == epochs[-1])
        averaged = {"checkpoint": label, "path": str(ck), "wall_s": newest["wall_s"], "epochs": epochs,
                    "valid_bleu": scores(hyp, Path(f"{bl.raw_prefix(args.data, 'valid')}.de"))["bleu"]}
        print(f"{run} {label} (epochs {epochs[0]}-{epochs[-1]}): valid BLEU {averaged['valid_bleu']}", flush=True)
    best = max(curve + ([averaged] if averaged else []), key=lambda c: c["valid_bleu"])
    extra = {"averaged": averaged} if averaged else {}
    if not test:  # a tuning run: valid only
        result = {**info, "curve": curve, **extra, "best": best}
        done.write_text(json.dumps(result, indent=2) + "\n")
        return result
    hyp = ev / "test2016.beam5.de"
    translate(args, system, Path(best["path"]), sources(args, "test", txt), 5, w, hyp, core=core)
    result = {**info, "curve": curve, **extra, "best": best, "test": scores(hyp, Path(f"{bl.raw_prefix(args.data, 'test')}.de")),
              "test_hyp": str(hyp)}
    done.write_text(json.dumps(result, indent=2) + "\n")
    return result


# -- report -------------------------------------------------------------------------------------
def recorded_curves(skip: set[str], since: str | None) -> list[dict]:
    """The newest ``quality_per_hour`` record, recorded on or after ``since`` (a date, ``YYYY-MM-DD``),
    of each system not in ``skip``: a report of a WORK that re-ran only some systems can still draw
    the others.  None without ``since``: records do not all say which machine trained them (the
    ``cpu`` field is newer than some), and the same run took twice the wall time on one of this
    project's hosts as on the other, so whoever reports says from when the records are comparable."""
    if since is None:
        return []
    newest: dict[str, dict] = {}
    for rec in bl.read_records("quality_per_hour"):
        if rec["system"] not in skip and rec.get("valid_bleu_curve") and rec["date"][:10] >= since:
            newest[rec["system"]] = rec  # the file is in time order
    return [newest[s] for s in SYSTEMS if s in newest]


def plot(results: list[dict], recorded: list[dict], path: Path) -> None:
    """Valid BLEU against wall time: this WORK's runs solid, earlier records dashed (each labelled
    with its date and commit, as those runs may come from another day's machine)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in results:
        c = r["curve"]
        ax.plot([x["wall_s"] / 60 for x in c], [x["valid_bleu"] for x in c], marker="o", ms=3,
                label=f"{r['system']} seed {r.get('seed', 1)} (test2016 {r['test']['bleu']:.2f})")
    for r in recorded:
        c = r["valid_bleu_curve"]
        ax.plot([w / 60 for w, _ in c], [b for _, b in c], marker=".", ms=3, ls="--", alpha=0.8,
                label=f"{r['system']} (test2016 {r['bleu']:.2f}; record of {r['date'][:10]} @ {r['commit']})")
    ax.set_xlabel("training wall time on one core (minutes)")
    ax.set_ylabel("valid BLEU, greedy (sacreBLEU, cased, detok.)")
    ax.set_title("Multi30k en-de: quality per CPU-hour")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


def onmt_dropped(work: Path, run: str, txt: Path) -> Optional[float]:
    """The share of target tokens OpenNMT-py's batches lacked against the corpus (the pairs its
    batcher skipped, bench/peers.py), from its own training log's report lines."""
    import peers

    log = work / run / "train.log"
    if not log.is_file():
        return None
    windows = bl.parse_onmt_train_log(log.read_text(encoding="utf-8", errors="replace"))["windows"]
    if not windows:
        return None
    per_batch = sum(w["tgt_tokens"] for w in windows) / windows[-1]["step"]
    lines = (txt / "train.de").read_text(encoding="utf-8").splitlines()
    per_pair = sum(len(line.split()) + 1 for line in lines) / len(lines)
    return peers.onmt_dropped_share(per_batch, per_pair, BATCH)


def summary(results: list[dict], refs: Path, n_samples: int = 1000) -> tuple[dict, Optional[dict]]:
    """Mean and spread over seeds per system; a paired bootstrap (stats.py) of nmtkit's best
    system against the best peer (by mean BLEU), on the test2016 output of each seed both have."""
    import stats

    by_system: dict[str, list[dict]] = {}
    for r in results:
        by_system.setdefault(r["system"], []).append(r)
    spread = {s: {"bleu": stats.mean_spread([r["test"]["bleu"] for r in rs]),
                  "chrf": stats.mean_spread([r["test"]["chrf"] for r in rs]), "seeds": [r.get("seed", 1) for r in rs]}
              for s, rs in by_system.items()}
    ours = [s for s in spread if s.startswith("nmtkit")]
    theirs = [s for s in spread if not s.startswith("nmtkit")]
    if not ours or not theirs:
        return spread, None
    best = max(ours, key=lambda s: spread[s]["bleu"]["mean"])
    peer = max(theirs, key=lambda s: spread[s]["bleu"]["mean"])
    ref_lines = refs.read_text(encoding="utf-8").split("\n")[:-1]
    tests = []
    for a in by_system[best]:
        b = next((x for x in by_system[peer] if x.get("seed", 1) == a.get("seed", 1)), None)
        if b is None or not a.get("test_hyp") or not b.get("test_hyp"):
            continue
        hyp = lambda r: Path(r["test_hyp"]).read_text(encoding="utf-8").split("\n")[:-1]  # noqa: E731
        tests.append({"seed": a.get("seed", 1), **stats.paired_bootstrap(hyp(b), hyp(a), ref_lines, n_samples, (peer, best))})
    return spread, {"system": best, "peer": peer, "tests": tests}


def report(args: argparse.Namespace, work: Path) -> None:
    runs = runs_in(work)
    results = [{"seed": seed_of(run), **json.loads((work / run / "eval.json").read_text())} for run in runs]
    if not results:
        sys.exit(f"nothing evaluated in {work} yet")
    recorded = recorded_curves({r["system"] for r in results}, args.recorded_since)
    repo_picture = PICTURE_TRANSFORMER if all("transformer" in r["system"] for r in results) else PICTURE
    picture = work / repo_picture.name  # the repository's copy is replaced only when recording
    plot(results, recorded, picture)
    spread, sig = summary(results, Path(f"{bl.raw_prefix(args.data, 'test')}.de"), args.bootstrap_samples)
    for r, run in zip(results, runs):
        if r["system"] == "opennmt":
            r["dropped"] = onmt_dropped(work, run, work / "bpe")
    rows = [[r["system"], r.get("seed", 1), f"{r['test']['bleu']:.2f}", f"{r['test']['chrf']:.2f}", f"{r['best']['valid_bleu']:.2f}",
             r["best"]["checkpoint"], f"{r['best']['wall_s'] / 60:.0f}", len(r["curve"]), f"{r['train_wall_s'] / 60:.1f}",
             r["commit"], r.get("beside", "")] for r in results]
    pm = lambda m: f"{m['mean']:.2f} ± {m['sd']:.2f}" if m["n"] > 1 else f"{m['mean']:.2f} (1 seed)"  # noqa: E731
    mean_rows = [[s, ", ".join(map(str, v["seeds"])), pm(v["bleu"]), pm(v["chrf"])] for s, v in spread.items()]
    sig_text = ""
    if sig:
        sig_text = (f"\nPaired bootstrap (sacrebleu, {args.bootstrap_samples} resamples of the test sentences), "
                    f"{sig['system']} against the best peer {sig['peer']}:\n\n" + "".join(
                        f"- seed {t['seed']}: BLEU {t['BLEU']['system']:.2f} against {t['BLEU']['baseline']:.2f} "
                        f"({t['BLEU']['delta']:+.2f}, p = {t['BLEU']['p']:.4f}); chrF {t['chrF']['system']:.2f} against "
                        f"{t['chrF']['baseline']:.2f} ({t['chrF']['delta']:+.2f}, p = {t['chrF']['p']:.4f})\n" for t in sig["tests"]))
    body = (bl.md_table(["system", "seed", "test2016 BLEU", "chrF", "best valid BLEU (greedy)", "checkpoint", "at minute",
                         "checkpoints", "train wall (min)", "commit", "trained beside"], rows)
            + "\n\nMean ± sample standard deviation over seeds:\n\n"
            + bl.md_table(["system", "seeds", "BLEU", "chrF"], mean_rows) + "\n" + sig_text
            + f"\n![BLEU against wall time]({repo_picture.name})\n\n"
            + (f"Dashed in the picture, from records written on or after {args.recorded_since} (not re-run here): "
               + ", ".join(f"{r['system']} {r['bleu']:.2f} ({r['date']} @ {r['commit']})" for r in recorded) + ".\n\n"
               if recorded else "")
            + "".join(f"OpenNMT-py seed {r.get('seed', 1)}: its batches carried {r['dropped']:.1%} fewer target tokens than the "
                      "corpus's mean pair x 64 (pairs its batcher skipped, mostly long ones; the others train on every pair).\n\n"
                      for r in results if r.get("dropped") is not None)
            + "Set-ups (bench/peers.py):\n\n" + "\n".join(peers_lines()) + "\n\n" + tuning_lines(work, spread)
            + "Each system trained on one core (taskset) for "
            f"{results[0]['hours']} h of wall time; test2016 with beam 5 and batch 64 from the candidate with the best "
            "greedy valid BLEU: every checkpoint and, for " + (", ".join(AVERAGE_LAST) or "no system") + ", the average of "
            "the last 10 epoch checkpoints (their recipes average; `averaged` below). "
            f"Signature: {results[0]['test']['signature']}.\n\nLoad of each pair's training "
            "(uptime before and after; the systems of a wave shared the machine, one core each):\n\n"
            + "".join(f"- {r['system']} seed {r.get('seed', 1)}: before `{r.get('load_before', '?')}`; after `{r.get('load_after', '?')}`\n"
                      for r in results)
            + "\nValid BLEU (greedy) per checkpoint, minute: BLEU:\n\n"
            + "".join(f"- {r['system']} seed {r.get('seed', 1)}: " + ", ".join(f"{x['wall_s'] / 60:.0f}: {x['valid_bleu']:.2f}"
                                                                             for x in r["curve"])
                      + (f"; averaged ({r['averaged']['checkpoint']}, epochs {r['averaged']['epochs'][0]}-{r['averaged']['epochs'][-1]}): "
                         f"{r['averaged']['valid_bleu']:.2f}" if r.get("averaged") else "") + "\n" for r in results))
    print(body)
    if not args.record:
        return
    shutil.copyfile(picture, repo_picture)
    cmds = [c for r in results for c in r["cmds"]]
    bl.append_results(bl.section("Quality per CPU-hour, Multi30k en-de" + (" (Transformers)" if repo_picture == PICTURE_TRANSFORMER else ""), bl.machine_info(), results[0].get("load_before", ""),
                                 results[-1].get("load_after", ""), "nmtkit " + results[0]["commit"], body, cmds))
    recs = [{"bench": "quality_per_hour", "system": r["system"], "seed": r.get("seed", 1), "bleu": r["test"]["bleu"],
             "chrf": r["test"]["chrf"], "train_wall_s": round(r["train_wall_s"], 1),
             "valid_bleu_curve": [[x["wall_s"], x["valid_bleu"]] for x in r["curve"]],
             "best_checkpoint": r["best"]["checkpoint"],
             **({"averaged": {k: r["averaged"][k] for k in ("checkpoint", "epochs", "valid_bleu")}} if r.get("averaged") else {}),
             "trained_beside": r.get("beside", ""), "load": r.get("load_before", ""),
             "hours": r["hours"], "cpu": r.get("cpu"), "commit": r["commit"],  # the training machine's and tree's
             **({"peer_dropped_token_share": round(r["dropped"], 4)} if r.get("dropped") is not None else {}),
             **({"hp": r["hp"], "tuned_on_valid": (work / "tune" / f"{r['system']}.choice.json").is_file()} if r.get("hp") else {}),
             **({"host": r["host"]} if r.get("host") else {})} for r in results]
    if sig and sig["tests"]:
        recs.append({"bench": "quality_per_hour_significance", "system": sig["system"], "peer": sig["peer"],
                     "seeds": [t["seed"] for t in sig["tests"]], "bleu_mean": spread[sig["system"]]["bleu"]["mean"],
                     "bleu_sd": spread[sig["system"]]["bleu"]["sd"], "chrf_mean": spread[sig["system"]]["chrf"]["mean"],
                     "chrf_sd": spread[sig["system"]]["chrf"]["sd"], "peer_bleu_mean": spread[sig["peer"]]["bleu"]["mean"],
                     "peer_chrf_mean": spread[sig["peer"]]["chrf"]["mean"], "bootstrap_samples": args.bootstrap_samples,
                     "tests": sig["tests"], **({"host": results[0]["host"]} if results[0].get("host") else {})})
    # a run recorded by an earlier report is not appended again (benchlib refuses repeated runs)
    bl.append_jsonl(recs, {})


def tuning_lines(work: Path, systems: dict) -> str:
    """What the same tuning budget on valid chose for each system (or that it was not run)."""
    lines = []
    for s in systems:
        choice = work / "tune" / f"{s}.choice.json"
        if choice.is_file():
            c = json.loads(choice.read_text())
            lines.append(f"- {s}: {c['hp']} (greedy valid BLEU {c['valid_bleu']:.2f} after {c['tune_hours']} h; tried "
                         + ", ".join(f"{t['hp']} {t['valid_bleu']:.2f}" for t in c["tried"]) + ")")
        else:
            lines.append(f"- {s}: not tuned here (`--phase tune`): its documented settings {DEFAULT_HP[s]}")
    return (f"Tuning on valid, the same grid for every system ({len(TUNING_GRID)} variants of dropout and learning rate, "
            "each for the same `--tune-hours`):\n\n" + "\n".join(lines) + "\n\n")


def peers_lines() -> list[str]:
    import peers

    return peers.report_lines("quality-per-hour")


def check_setup(args: argparse.Namespace, systems: list[str], dest: Path, txt: Path) -> None:
    """Before any training: parameter counts of the peers against nmtkit's (bench/peers.py), and the
    decoders' beam, length normalisation and length bound; refuses a same-shape claim off by > 1 %."""
    import peers

    meta = json.loads((dest / "meta.json").read_text())
    v = meta["dict_sizes"]["de"]
    nmtkit = peers.nmtkit_params("luong_m30k", v, v, encoder_hidden_size=256)
    default = peers.nmtkit_params("luong_m30k", v, v)
    counts = {"opennmt": peers.onmt_rnn_params(v, v, 256, 256, 2, True, bridge=True, share_embeddings=True,
                                                share_decoder_embeddings=True),
              "fairseq": peers.fairseq_lstm_params(v, 256, 256, 256, 2, True, 256)}
    counts["fairseq-transformer"] = peers.fairseq_transformer_params(v, 128, 256, 4, 4)
    counts["opennmt-transformer"] = peers.onmt_transformer_params(v, 128, 256, 4, 4)
    tiny = peers.nmtkit_params(TRANSFORMER_ARCH, v, v)
    for s in systems:
        if s in counts:
            ours = tiny if s.endswith("-transformer") else nmtkit
            print(peers.check_shape(ours, counts[s], peers.setup(s, "quality-per-hour").shape, f"quality per hour, {s}"))
    if "opennmt" in systems:  # the nearest shape OpenNMT-py can build: nmtkit's own default luong_m30k but for the bridge
        print(peers.check_shape(default, counts["opennmt"], "closest", "luong_m30k (128 per direction) against OpenNMT-py brnn 256"))
    peers.check_decoding({toolkit(s): decoding(s, 5) for s in systems})
    # every flag of every set-up exists in the installed peer (a renamed option fails here, not in an hour)
    for s in systems:
        if toolkit(s) == "nmtkit":
            continue
        cmds, _, _ = train_plan(args, s, dest, txt, dest.parent / "_check" / s)
        train = cmds[-1]
        if toolkit(s) == "opennmt":
            keys = [f"-{line.split(':')[0]}" for line in Path(train[-1]).read_text().splitlines()
                    if line and not line.startswith((" ", "#")) and ":" in line and line.split(":")[0] not in ("data",)]
            peers.check_flags(train[0], keys)
            peers.check_flags(peer_bin(args, "opennmt", "onmt_translate"), decoding(s, 5))
        elif s == "marian":
            peers.check_flags(train[0], train[1:])
            peers.check_flags(train[0], decoding(s, 5), help_args=("decode", "--help"))
        elif toolkit(s) == "fairseq":
            python = peer_bin(args, "fairseq", "python")
            peers.check_fairseq_args(python, train[1:], "training")
            peers.check_fairseq_args(python, [dest.parent / "_check" / s / "bin", "--path", "x.pt", *decoding(s, 5)],
                                     "interactive_generation")
    shutil.rmtree(dest.parent / "_check", ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_common_args(ap)
    ap.add_argument("--systems", nargs="+", choices=SYSTEMS, default=[], help="what to train and evaluate (one core each, "
                    "as many side by side as there are cores)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2], help="training seeds of every system (default: 1 2); "
                    "the report gives mean and spread")
    ap.add_argument("--hours", type=float, default=1.0, help="training wall time of each system (default: %(default)s)")
    ap.add_argument("--phase", choices=["tune", "train", "eval", "report"], default="train",
                    help="tune (the same grid and budget on valid for every system), train (then eval), eval only, or report")
    ap.add_argument("--tune-hours", type=float, default=0.25, help="training wall time of each tuning variant (default: %(default)s)")
    bl.add_deadline_arg(ap)
    ap.add_argument("--bootstrap-samples", type=int, default=1000, help="paired bootstrap resamples (default: %(default)s)")
    ap.add_argument("--recorded-since", metavar="YYYY-MM-DD", help="report: also draw (dashed) the newest recorded run of each "
                    "system not in WORK, from records written on or after this date (say from when they are comparable)")
    args = ap.parse_args()
    work = Path(args.work)
    bl.check_outside_repo(work)
    if args.phase == "report":
        return report(args, work)
    bl.check_raw_data(args.data)
    work.mkdir(parents=True, exist_ok=True)
    dest, txt = prepare(args, work)
    check_setup(args, args.systems, dest, txt)
    if args.phase == "tune":
        return tune(args, dest, txt, work)
    cores = usable_cores()
    runs = training_runs(args.systems, args.seeds, len(cores))
    for wave in [runs[i:i + len(cores)] for i in range(0, len(runs), len(cores))]:  # run k of a wave on usable core k
        if args.phase == "train":
            bl.stop_before_deadline(args.deadline, wave_seconds(work, wave, args.hours), f"the wave {', '.join(wave)}")
        load_before = bl.uptime_line()
        if args.phase == "train":
            bl.in_parallel(lambda k: train_one(args, wave[k], cores[k], dest, txt, work), len(wave))
        load_after = bl.uptime_line()

        def ev(run: str, k: int) -> None:
            w = work / run
            meta = json.loads((w / "train.json").read_text())
            meta.setdefault("load_before", load_before)
            meta.setdefault("load_after", load_after)
            meta.setdefault("beside", ", ".join(x for x in wave if x != run))
            meta.setdefault("host", bl.this_host(args.peers))
            (w / "train.json").write_text(json.dumps(meta, indent=2) + "\n")
            eval_one(args, run, k, txt, work)

        bl.in_parallel(lambda k: ev(wave[k], cores[k]), len(wave))


if __name__ == "__main__":
    main()
