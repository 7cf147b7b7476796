#!/usr/bin/env python3
"""Training speed: nmtkit-train against OpenNMT-py (same architecture) or Marian (closest one), CPU.

``--peer opennmt`` (default):

nmtkit trains ``luong_small`` (2-layer LSTM 256, embeddings 256, global attention with the
'general' score, input feeding, dropout 0.2) for one epoch of Multi30k En->De (the data
directory bench/preprocess.py wrote), 64 sentences per batch, Adam 1e-3, no validation.
OpenNMT-py then trains the same model (unidirectional ``encoder_type: rnn``) on exactly the
same BPE pieces for the same number of updates with the same batch size in sentences.

``--peer marian --arch rnnsearch_small``: Marian 1.12 ``--type s2s`` with GRU cells at the same
sizes (biGRU encoder 256 per direction, embeddings 256, untied) on the same BPE pieces, batch and
Adam 1e-3, for the same number of updates.  Its decoder is a conditional GRU (two GRU transitions
around the attention) and its deep output is 256 wide where rnnsearch has a 256x2 maxout, so the
report states both models' training FLOPs per target token (bench/flops.py) beside the ratio.

``--peer fairseq --arch transformer_tiny`` (any Transformer preset): fairseq 0.12.2 ``--arch
transformer`` built to the preset's shape (bench/peers.py checks the parameter count against
nmtkit's before anything runs; equal to the parameter), on the same BPE pieces, ``--max-tokens``
batches of the same padded budget, Adam with the preset's warm-up, float32.  Its figures come from
its own ``train_inner`` log lines (target tokens per batch ``wpb`` and per second ``wps`` of each
50-update window).

Reported per toolkit: target tokens/s over the training loop (start-up excluded), the same
after the first 50 updates (steady state, data-loader warm-up excluded), whole-command wall
and CPU time, peak RSS.  Target tokens include </s> for both toolkits.
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
from pathlib import Path

import benchlib as bl


def nmtkit_batches_tokens(dest: Path, batch_size: int, seed: int, max_tokens: int | None = None) -> list[int]:
    """Target tokens (incl. </s>) of each batch of epoch 1, in training order: the trainer's
    batches are a pure function of (seed, epoch), so they can be rebuilt exactly."""
    from nmtkit.data.dataset import DataDir, make_batches

    ds = DataDir(dest).load_split("train")
    batches = make_batches(ds.src_sizes, ds.tgt_sizes, max_tokens, batch_size, seed=seed, epoch=1)
    return [int(ds.tgt_sizes[b].sum()) for b in batches]


def nmtkit_loop_stats(log_path: Path, batch_tokens: list[int]) -> dict:
    """Loop and steady-state tokens/s from train_log.jsonl (start event, then a train event
    every --log-interval updates, stamped with wall time)."""
    events = [json.loads(l) for l in log_path.read_text(encoding="utf-8").splitlines() if l.strip()]
    start = next(e for e in events if e["event"] == "start")
    trains = [e for e in events if e["event"] == "train"]
    last, first = trains[-1], trains[0]
    loop_tok = sum(batch_tokens[: last["update"]])
    steady_tok = sum(batch_tokens[first["update"] : last["update"]])
    return {
        "params": start["parameters"],
        "updates": next(e for e in reversed(events) if e["event"] == "end")["update"],
        "measured_updates": last["update"],
        "loop_tokens": loop_tok,
        "loop_s": last["time"] - start["time"],
        "loop_tok_s": loop_tok / (last["time"] - start["time"]),
        "steady_tok_s": steady_tok / (last["time"] - first["time"]),
    }


def onmt_loop_stats(log_text: str) -> dict:
    info = bl.parse_onmt_train_log(log_text)
    w = info["windows"]
    if not w:
        raise SystemExit("no report lines in the OpenNMT-py log")
    loop_tok = sum(x["tgt_tokens"] for x in w)
    return {
        "params": info["params"],
        "measured_updates": w[-1]["step"],
        "loop_tokens": loop_tok,
        "loop_s": w[-1]["sec"],
        "loop_tok_s": loop_tok / w[-1]["sec"],
        "steady_tok_s": sum(x["tgt_tokens"] for x in w[1:]) / (w[-1]["sec"] - w[0]["sec"]) if len(w) > 1 else float("nan"),
    }


_MARIAN_WINDOW = re.compile(r"Up\. (\d+) : .*?after ([\d,]+) : Time ([\d.]+)s")


def marian_loop_stats(log_text: str, model: Path) -> dict:
    """Marian's ``Up. N : ... after LABELS : Time Ts`` report lines -> the same figures as the
    others (labels are target tokens including </s>; Time is the window's own duration)."""
    import numpy as np

    w = [(int(u), int(a.replace(",", "")), float(t)) for u, a, t in _MARIAN_WINDOW.findall(log_text)]
    if not w:
        raise SystemExit("no report lines in Marian's log")
    params = None
    if model.is_file():
        with np.load(model) as npz:
            params = int(sum(npz[k].size for k in npz.files if not k.startswith("special:")))
    loop_s = sum(t for _, _, t in w)
    return {
        "params": params,
        "measured_updates": w[-1][0],
        "loop_tokens": w[-1][1],
        "loop_s": loop_s,
        "loop_tok_s": w[-1][1] / loop_s,
        "steady_tok_s": (w[-1][1] - w[0][1]) / (loop_s - w[0][2]) if len(w) > 1 else float("nan"),
    }


def marian_cmd(peers: Path, txt: Path, out: Path, threads: int, updates: int, batch_size: int) -> list:
    """Marian s2s with GRU cells at rnnsearch_small's sizes (see the module docstring)."""
    out.mkdir(parents=True, exist_ok=True)
    return [peers / "marian" / "bin" / "pymarian", "--type", "s2s", "--enc-type", "bidirectional", "--enc-cell", "gru",
            "--dec-cell", "gru", "--dim-emb", 256, "--dim-rnn", 256, "--dropout-rnn", 0.2, "--train-sets", txt / "train.en",
            txt / "train.de", "--vocabs", out / "vocab.en.yml", out / "vocab.de.yml", "--cpu-threads", threads or 1,
            "--mini-batch", batch_size, "--maxi-batch", 100, "--max-length", 100, "--after", f"{updates}u", "--disp-freq", "50u",
            "--learn-rate", 0.001, "--clip-norm", 5, "--seed", 1, "--model", out / "model.npz", "--overwrite",
            "--no-reload", "--save-freq", "1000000u", "--valid-freq", "1000000u"]


_FAIRSEQ_WINDOW = re.compile(r"\| train_inner \| (\{.*\})")
_FAIRSEQ_PARAMS = re.compile(r"num\. (?:shared )?model params: ([\d,]+)")


def fairseq_loop_stats(log_text: str) -> dict:
    """fairseq's ``train_inner`` JSON lines (one per ``--log-interval`` updates: target tokens per
    batch ``wpb``, target tokens per second ``wps`` of that window) -> the same figures as the
    others; a window's time is its tokens over its rate (fairseq rounds its ``wall`` to seconds)."""
    w = [json.loads(m) for m in _FAIRSEQ_WINDOW.findall(log_text)]
    if not w:
        raise SystemExit("no train_inner lines in fairseq's log")
    ups = [int(x["num_updates"]) for x in w]
    toks = [float(x["wpb"]) * (u - p) for x, u, p in zip(w, ups, [0, *ups[:-1]])]
    secs = [t / float(x["wps"]) for t, x in zip(toks, w)]
    params = _FAIRSEQ_PARAMS.search(log_text)
    return {
        "params": int(params.group(1).replace(",", "")) if params else None,
        "measured_updates": ups[-1],
        "loop_tokens": sum(toks),
        "loop_s": sum(secs),
        "loop_tok_s": sum(toks) / sum(secs),
        "steady_tok_s": sum(toks[1:]) / sum(secs[1:]) if len(w) > 1 else float("nan"),
    }


def fairseq_cmds(peers: Path, txt: Path, out: Path, arch: str, updates: int, max_tokens: int | None,
                 batch_size: int) -> tuple[list, list]:
    """fairseq-preprocess of the BPE pieces, then fairseq-train of ``arch``'s Transformer shape
    (see the module docstring)."""
    import flops
    from nmtkit.models import registry

    model, c = flops.arch_config(arch)
    if model != "transformer":
        raise SystemExit(f"--peer fairseq times Transformer presets; {arch} is a {model} model")
    warmup = registry.train_defaults(arch).get("warmup_updates", 4000)
    fs = peers / "fairseq" / "bin"
    pre = [fs / "fairseq-preprocess", "--source-lang", "en", "--target-lang", "de", "--trainpref", txt / "train",
           "--validpref", txt / "valid", "--destdir", out / "bin", "--joined-dictionary", "--workers", "1"]
    shape = ["--encoder-layers", c["encoder_layers"], "--decoder-layers", c["decoder_layers"],
             "--encoder-embed-dim", c["embed_dim"], "--decoder-embed-dim", c["embed_dim"],
             "--encoder-ffn-embed-dim", c["ffn_dim"], "--decoder-ffn-embed-dim", c["ffn_dim"],
             "--encoder-attention-heads", c["heads"], "--decoder-attention-heads", c["heads"],
             "--dropout", c["dropout"], "--attention-dropout", c["attention_dropout"],
             "--activation-dropout", c["activation_dropout"], "--activation-fn", c["activation"]]
    if c["share_all_embeddings"]:
        shape.append("--share-all-embeddings")
    elif c["share_decoder_input_output_embed"]:
        shape.append("--share-decoder-input-output-embed")
    if c["normalize_before"]:
        shape += ["--encoder-normalize-before", "--decoder-normalize-before"]
    if c["learned_positions"]:
        shape += ["--encoder-learned-pos", "--decoder-learned-pos"]
    batch = ["--max-tokens", max_tokens] if max_tokens else ["--batch-size", batch_size]
    train = [fs / "fairseq-train", out / "bin", "--cpu", "--arch", "transformer", *shape, "--optimizer", "adam",
             "--adam-betas", "(0.9, 0.98)", "--lr", "0.001", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", warmup,
             "--criterion", "cross_entropy", *batch, "--max-update", updates, "--max-epoch", "1", "--disable-validation",
             "--no-save", "--log-format", "json", "--log-interval", "50", "--seed", "1"]
    return pre, train


def fairseq_pre_check(arch: str, out: Path) -> str:
    """fairseq's parameter count from its layer layout and its own dictionary (bench/peers.py)
    against nmtkit's at the same vocabulary: the same model within 1 %."""
    import flops
    import peers

    _, c = flops.arch_config(arch)
    v = peers.fairseq_dict_size(out / "bin" / "dict.de.txt")
    theirs = peers.fairseq_transformer_params(v, c["embed_dim"], c["ffn_dim"], c["encoder_layers"], c["decoder_layers"],
                                              c["share_all_embeddings"], c["normalize_before"])
    return peers.check_shape(peers.nmtkit_params(arch, v, v), theirs, "same", f"{arch} against fairseq transformer (layer layout, "
                             f"fairseq's vocabulary {v:,})")


def joined_destdir(work: Path, txt: Path) -> Path:
    """An nmtkit data directory of the same BPE pieces with one joined dictionary (a model with
    all embeddings shared needs one; fairseq's peer builds its own joined one the same way),
    binarized once per work folder (not timed)."""
    dest = Path(work) / "multi30k.en-de.bpe10k.joined"
    if not (dest / "meta.json").is_file():
        bl.run_cmd(["nmtkit-preprocess", "-s", "en", "-t", "de", "--trainpref", txt / "train", "--validpref", txt / "valid",
                    "--destdir", dest, "--tokenizer", "none", "--bpe", "none", "--joined-dictionary", "--workers", "1"],
                   Path(work) / "joined_preprocess.log")
    return dest


def flops_line(dest: Path, txt: Path, marian_out: Path) -> str:
    """Training FLOPs per target token of rnnsearch_small and of Marian's s2s, on this data."""
    import flops

    src_tok = sum(len(l.split()) + 1 for l in (txt / "train.en").read_text(encoding="utf-8").splitlines())
    tgt_lines = (txt / "train.de").read_text(encoding="utf-8").splitlines()
    tgt_tok = sum(len(l.split()) + 1 for l in tgt_lines)
    r, s = src_tok / tgt_tok, src_tok / len(tgt_lines)
    v_nmtkit = json.loads((dest / "meta.json").read_text())["dict_sizes"]["de"]
    vocab = marian_out / "vocab.de.yml"
    v_marian = sum(1 for l in vocab.read_text(encoding="utf-8").splitlines() if l.strip()) if vocab.is_file() else v_nmtkit
    n = flops.train_flops(flops.rnnsearch_macs(256, 256, 256, 256, v_nmtkit, s, r))
    m = flops.train_flops(flops.marian_s2s_macs(256, 256, v_marian, s, r))
    return (f"Training FLOPs per target token (bench/flops.py; source/target tokens {r:.2f}, mean source length {s:.1f}): "
            f"nmtkit rnnsearch_small {n / 1e6:.1f} M (target vocabulary {v_nmtkit:,}), Marian s2s {m / 1e6:.1f} M "
            f"(target vocabulary {v_marian:,}): Marian does {m / n:.2f}x nmtkit's arithmetic per target token. "
            "Its decoder runs two GRU transitions per step where rnnsearch runs one, but the output layer dominates both.")


def pre_check(arch: str, dest: Path) -> str:
    """nmtkit's and OpenNMT-py's parameter counts of ``arch``'s shape from the layer layout, before
    anything runs (bench/peers.py): the OpenNMT-py config must be the same model within 1 %."""
    import peers
    from flops import arch_config

    meta = json.loads((dest / "meta.json").read_text())
    vs, vt = meta["dict_sizes"]["en"], meta["dict_sizes"]["de"]
    _, cfg = arch_config(arch)
    if cfg.get("encoder_bidirectional") or cfg.get("attention") != "global":
        raise peers.CheckFailed(f"--peer opennmt times luong presets with a unidirectional encoder and global attention; {arch} is not one")
    onmt = peers.onmt_rnn_params(vs, vt, cfg["embed_dim"], cfg["hidden_size"], cfg["layers"], brnn=False,
                                 input_feed=cfg["input_feeding"])
    return peers.check_shape(peers.nmtkit_params(arch, vs, vt), onmt, "same", f"{arch} against OpenNMT-py (layer layout)")


def flop_fields(arch: str, amp: str, dest: Path, txt: Path, tok_s: float, peer_tok_s: float | None, peer: str, marian_out: Path) -> dict:
    """FLOPs per target token of ``arch`` on this data, nmtkit's achieved GFLOP/s and its share of
    the host's probed peak (bench/host.py); the peer's too (the same model for OpenNMT-py)."""
    import flops

    st = flops.data_stats(txt / "train.en", txt / "train.de")
    v = json.loads((dest / "meta.json").read_text())["dict_sizes"]["de"]
    model, cfg = flops.arch_config(arch)
    peak = bl.this_host().get("peak_gflops")
    out = flops.speed_fields(tok_s, flops.model_macs(model, cfg, v, st["s"], st["r"], st["t"]), peak, amp)
    if peer_tok_s:
        macs = flops.model_macs(model, cfg, v, st["s"], st["r"], st["t"]) if peer in ("opennmt", "fairseq") else \
            flops.marian_s2s_macs(256, 256, v, st["s"], st["r"])
        theirs = flops.speed_fields(peer_tok_s, macs, peak, "none")
        out.update({f"peer_{k}": val for k, val in theirs.items() if k in ("achieved_gflops", "share_of_peak", "flops_per_tok")})
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_common_args(ap)
    ap.add_argument("--arch", default="luong_small", help="nmtkit preset (default: %(default)s)")
    ap.add_argument("--batch-size", type=int, default=64, help="sentences per batch, both toolkits (default: %(default)s)")
    ap.add_argument("--max-tokens", type=int, default=0, help="token-sized batches instead: nmtkit --max-tokens N, "
                    "OpenNMT-py batch_type tokens, batch_size N (its own token count: padded max of source and target)")
    ap.add_argument("--max-update", type=int, default=0, help="stop both after this many updates (default 0: one nmtkit epoch)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of both toolkits, via OMP_NUM_THREADS (and nmtkit --threads); "
                    "1 suits a shared 2-core machine, 0 = torch default (default: %(default)s)")
    ap.add_argument("--parallel", action="store_true", help="train the two toolkits side by side (same background load) instead of back to back")
    ap.add_argument("--onmt-num-workers", type=int, default=None, help="OpenNMT-py DataLoader workers (default: its own default, 2)")
    ap.add_argument("--amp", choices=["none", "bf16"], default="none", help="nmtkit's precision: none (float32, like for "
                    "like with OpenNMT-py's float32) or bf16 (autocast, a fast path; needs a CPU with native bf16) (default: %(default)s)")
    ap.add_argument("--peer", choices=["opennmt", "marian", "fairseq", "none"], default="opennmt", help="the toolkit timed against "
                    "nmtkit: OpenNMT-py with the same model (luong_*), Marian s2s with GRU cells (against rnnsearch_small), fairseq's "
                    "transformer at a Transformer preset's shape, or none (default: %(default)s)")
    ap.add_argument("--report-only", action="store_true", help="no training: summarize (and --record) the last run's logs again")
    args = ap.parse_args(argv)

    work = Path(args.work)
    bl.check_outside_repo(work)
    dest, txt = bl.need_step1(work)
    if args.peer == "fairseq":  # the Transformer presets share all embeddings: one joined dictionary
        dest = joined_destdir(work, txt)
    peers = Path(args.peers)
    w = work / "train_speed"
    logs = w / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    load_before = bl.uptime_line()
    print(load_before)
    peer_names = {"opennmt": ("OpenNMT-py", "opennmt/bin/python", "OpenNMT-py"), "marian": ("Marian", "marian/bin/python", "pymarian"),
                  "fairseq": ("fairseq", "fairseq/bin/python", "fairseq")}
    software_at_start = "" if args.report_only or args.peer == "none" else bl.software_line(
        {peer_names[args.peer][0]: (str(peers / peer_names[args.peer][1]), peer_names[args.peer][2])})

    env = bl.thread_env(args.threads)
    max_tokens = args.max_tokens or None
    batch_size = None if max_tokens else args.batch_size
    batch_tokens = nmtkit_batches_tokens(dest, batch_size, 1, max_tokens)
    updates = min(len(batch_tokens), args.max_update) if args.max_update > 0 else len(batch_tokens)
    save = w / "nmtkit"
    if not args.report_only:
        shutil.rmtree(save, ignore_errors=True)  # a checkpoint_last.pt there would be resumed
    batch_args = ["--max-tokens", max_tokens] if max_tokens else ["--batch-size", args.batch_size]
    ncmd = ["nmtkit-train", dest, "--arch", args.arch, *batch_args, "--max-epoch", "1",
            "--max-update", args.max_update, "--optimizer", "adam", "--lr", "0.001", "--valid-subset", "none",
            "--save-dir", save, "--no-epoch-checkpoints", "--log-interval", "50", "--seed", "1", "--device", "cpu",
            "--threads", args.threads, "--amp", args.amp]
    jobs = [{"cmd": ncmd, "log": logs / "nmtkit_train.log", "env": env}]
    prefix = f"OMP_NUM_THREADS={args.threads} " if args.threads else ""
    cmds = [prefix + shlex.join(map(str, ncmd))]
    if args.peer == "marian":
        mout = w / "marian"
        mcmd = marian_cmd(peers, txt, mout, args.threads, updates, args.batch_size)
        jobs.append({"cmd": mcmd, "log": logs / "marian_train.log", "env": env})
        cmds.append(prefix + shlex.join(map(str, mcmd)))
    if args.peer == "fairseq":
        fout = w / "fairseq"
        pcmd, fcmd = fairseq_cmds(peers, txt, fout, args.arch, updates, max_tokens, args.batch_size)
        if not args.report_only:
            shutil.rmtree(fout, ignore_errors=True)
            bl.run_cmd(pcmd, logs / "fairseq_preprocess.log", env=env)
        jobs.append({"cmd": fcmd, "log": logs / "fairseq_train.log", "env": {**env, **bl.ONMT_ENV}})
        cmds += [shlex.join(map(str, pcmd)), prefix + shlex.join(map(str, fcmd))]
    if args.peer == "opennmt":
        onmt = peers / "opennmt" / "bin"
        out = w / "onmt"
        yaml = bl.onmt_luong_yaml(w / "onmt_luong_small.yaml", txt, out, steps=updates, batch_size=max_tokens or args.batch_size,
                                  batch_type="tokens" if max_tokens else "sents")
        vcmd = [onmt / "onmt_build_vocab", "-config", yaml, "-n_sample", "-1"]
        if not args.report_only:
            for f in out.glob("model_step_*.pt"):
                f.unlink()
            bl.run_cmd(vcmd, logs / "onmt_vocab.log")
        extra = [] if args.onmt_num_workers is None else ["-num_workers", args.onmt_num_workers]
        ocmd = [onmt / "onmt_train", "-config", yaml, *extra]
        jobs.append({"cmd": ocmd, "log": logs / "onmt_train.log", "env": {**env, **bl.ONMT_ENV}})
        cmds += [f"# {yaml}:", *("#   " + l for l in yaml.read_text().splitlines() if not l.startswith("#")),
                 shlex.join(map(str, vcmd)), "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 " + prefix + shlex.join(map(str, ocmd))]
    if args.peer == "opennmt" and not args.report_only:
        print(pre_check(args.arch, dest))  # refuses a config that is not nmtkit's shape, before any training
    if args.peer != "none" and not args.report_only:  # every option of the peer's set-up exists in the installed version
        import peers as peer_setups

        if args.peer == "opennmt":
            keys = [f"-{line.split(':')[0]}" for line in yaml.read_text().splitlines()
                    if line and not line.startswith((" ", "#")) and ":" in line and line.split(":")[0] != "data"]
            peer_setups.check_flags(ocmd[0], keys)
        elif args.peer == "fairseq":
            print(fairseq_pre_check(args.arch, fout))  # refuses a config that is not nmtkit's shape
            peer_setups.check_fairseq_args(peers / "fairseq" / "bin" / "python", fcmd[1:], "training")
        else:
            peer_setups.check_flags(mcmd[0], mcmd[1:])
    saved = w / "runs.json"
    if args.report_only:
        runs = [bl.Run.from_json(d) for d in json.loads(saved.read_text())]
    else:
        runs = bl.run_parallel(jobs) if args.parallel else [bl.run_cmd(**j) for j in jobs]
        saved.write_text(json.dumps([r.to_json() for r in runs], indent=1) + "\n")
    nrun = runs[0]
    nst = nmtkit_loop_stats(save / "train_log.jsonl", batch_tokens)
    ost, orun = None, None
    if args.peer != "none":
        orun = runs[1]
        log_text = (logs / f"{args.peer.replace('opennmt', 'onmt')}_train.log").read_text(encoding="utf-8", errors="replace")
        ost = {"opennmt": lambda: onmt_loop_stats(log_text), "fairseq": lambda: fairseq_loop_stats(log_text),
               "marian": lambda: marian_loop_stats(log_text, w / "marian" / "model.npz")}[args.peer]()
    shape_line = ""
    if ost and args.peer in ("opennmt", "fairseq") and nst["params"] and ost["params"]:
        import peers as peer_setups

        theirs, note = ost["params"], ""
        if args.peer == "fairseq":
            import flops

            c = flops.arch_config(args.arch)[1]
            unused = peer_setups.fairseq_unused_encoder_copies(c["embed_dim"], c["ffn_dim"], c["encoder_layers"])
            theirs -= unused
            note = (f"; fairseq's log says {ost['params']:,}, which counts {unused:,} untrained BetterTransformer copies of its "
                    "encoder layers' weights (bench/peers.py), subtracted here")
        shape_line = peer_setups.check_shape(nst["params"], theirs, "same",
                                             f"{args.arch} against {peer_names[args.peer][0]} (from their logs)") + note
    corpus_tok = sum(batch_tokens) / sum(1 for _ in open(txt / "train.de", encoding="utf-8"))
    dropped = None
    if ost and args.peer == "opennmt" and not max_tokens:
        import peers as peer_setups

        dropped = peer_setups.onmt_dropped_share(ost["loop_tokens"] / ost["measured_updates"], corpus_tok, args.batch_size)
    share = flop_fields(args.arch, args.amp, dest, txt, nst["steady_tok_s"], ost["steady_tok_s"] if ost else None,
                        args.peer, w / "marian")
    meta_path = w / "run_meta.json"  # what --report-only needs to describe the run as it happened
    if not args.report_only:
        meta = {"load_before": load_before, "load_after": bl.uptime_line(), "software": software_at_start}
        meta_path.write_text(json.dumps(meta) + "\n")
    else:
        meta = json.loads(meta_path.read_text())
    load_before, load_after = meta["load_before"], meta["load_after"]

    # ---- summary ---------------------------------------------------------------------------------
    head = ["toolkit", "parameters", "updates timed", "tgt tok/batch", "loop s", "tgt tok/s (loop)", "tgt tok/s (after update 50)",
            "command wall s", "command CPU s", "tgt tok per CPU s", "peak RSS MB", "tree RSS MB"]

    def row(name: str, st: dict, run: bl.Run) -> list[object]:
        return [name, f"{st['params']:,}" if st["params"] else "?", st["measured_updates"],
                f"{st['loop_tokens'] / st['measured_updates']:.0f}", f"{st['loop_s']:.1f}",
                f"{st['loop_tok_s']:,.0f}", f"{st['steady_tok_s']:,.0f}", f"{run.wall:.1f}", f"{run.cpu:.1f}",
                f"{st['loop_tokens'] / run.cpu:,.0f}", f"{run.maxrss_mb:.0f}", f"{run.tree_rss_mb:.0f}"]

    precision = "float32" if args.amp == "none" else "bf16 autocast"
    rows = [row(f"nmtkit {args.arch} ({precision})", nst, nrun)]
    peer_label = {"opennmt": "OpenNMT-py", "marian": "Marian", "fairseq": "fairseq"}.get(args.peer, "")
    if ost:
        rows.append(row({"opennmt": "OpenNMT-py (same model, float32)", "marian": "Marian s2s, GRU (float32)",
                         "fairseq": "fairseq transformer (same model, float32)"}[args.peer], ost, orun))
    body = (
        f"Multi30k En->De, BPE 10k joint, batch {f'--max-tokens {max_tokens}' if max_tokens else f'{args.batch_size} sentences'}, Adam 1e-3, "
        f"{'the preset schedule, dropout and clipping' if args.peer == 'fairseq' else 'clip 5, dropout 0.2'}, CPU, "
        f"{updates} updates (= one nmtkit epoch{'' if not args.max_update else f', capped by --max-update {args.max_update}'}); "
        f"no validation; torch threads {args.threads or 'default'} each; {'side by side' if args.parallel else 'back to back'}. "
        f"{bl.gpu_line()}.\n\n" + bl.md_table(head, rows) + "\n"
    )
    if ost:
        body += (
            f"\nnmtkit / {peer_label} target tokens/s: loop {bl.ratio(nst['loop_tok_s'], ost['loop_tok_s'])}, "
            f"steady state {bl.ratio(nst['steady_tok_s'], ost['steady_tok_s'])}, per CPU second "
            f"{bl.ratio(nst['loop_tokens'] / nrun.cpu, ost['loop_tokens'] / orun.cpu)}; whole command wall "
            f"{bl.ratio(orun.wall, nrun.wall)} ({peer_label} time / nmtkit time).\n")
    if args.peer == "marian":
        body += ("Marian's target tokens are its labels (including </s>), from its own report lines; its steady state "
                 "starts after its first 50-update window. " + flops_line(dest, txt, w / "marian") + "\n")
    body += (f"\nArithmetic: {share['flops_per_tok'] / 1e6:.1f} MFLOP per target token (training, bench/flops.py), "
             f"nmtkit {share['achieved_gflops']:.1f} GFLOP/s"
             + (f" = {share['share_of_peak']:.0%} of this host's probed {share['peak_precision']} peak ({share['peak_gflops']:.1f} GFLOP/s, "
                "one thread, `python -m bench probe`)" if "share_of_peak" in share else " (host not probed: no share of peak)")
             + (f"; the peer {share['peer_achieved_gflops']:.1f} GFLOP/s" if "peer_achieved_gflops" in share else "") + ".\n")
    if shape_line:
        body += f"Parameters: {shape_line}.\n"
    if dropped is not None:
        body += (f"OpenNMT-py's batches carried {dropped:.1%} fewer target tokens than the corpus's mean pair times the batch size "
                 "(the pairs its batcher skipped, mostly long ones; nmtkit's batches carry every pair).\n")
    if args.peer == "opennmt":
        body += (
            f"Target tokens counted in the loop: nmtkit {nst['loop_tokens']:,} (exact, batches rebuilt from the seed), "
            f"OpenNMT-py {ost['loop_tokens']:,.0f} (from its per-window batch averages); both include </s>.\n"
            "OpenNMT-py's batches are shorter than the corpus average because, with its default bucket_size 262144 "
            "(> the 29,000-pair corpus), a bucket holds ~9 length-sorted copies of the corpus and its batcher skips a "
            "sentence whose source is already in the current batch; that drops 13-19% of the examples, mostly long ones "
            "(checked by replaying its batching on this data). OpenNMT-py's loop also includes its data-loader warm-up "
            "(2 spawned workers filling the first bucket), hence the separate after-update-50 column.\n"
        )
    print("\n" + body)
    if args.record:
        bl.append_results(bl.section(f"train speed: {args.arch} ({precision}) vs {peer_label or 'no peer'} (float32)", bl.machine_info(),
                                     load_before, load_after, meta["software"], body, cmds))
        system = "nmtkit-fp32" if args.amp == "none" else "nmtkit-bf16"
        rec = {"system": system, "amp": args.amp, "nmtkit": round(nst["steady_tok_s"], 1), "arch": args.arch, "threads": args.threads, "batch": f"{max_tokens} tokens" if max_tokens else f"{args.batch_size} sentences",
               "updates": nst["measured_updates"], "side_by_side": args.parallel,
               "nmtkit_tok_s": round(nst["steady_tok_s"], 1), "nmtkit_loop_tok_s": round(nst["loop_tok_s"], 1),
               "nmtkit_peak_rss_mb": round(nrun.maxrss_mb), "measure": "target tokens/s after update 50 (steady state)",
               **{k: v for k, v in share.items() if not k.startswith("peer_")},
               **({"peer_share_of_peak": share["peer_share_of_peak"]} if "peer_share_of_peak" in share else {}),
               **({"nmtkit_params": nst["params"], "peer_params": ost["params"]} if ost else {}),
               **({"peer_dropped_token_share": round(dropped, 4)} if dropped is not None else {})}
        if ost and args.peer == "marian":
            rec.update(peer="Marian 1.12 s2s (GRU)", peer_value=round(ost["steady_tok_s"], 1),
                       ratio=round(nst["steady_tok_s"] / ost["steady_tok_s"], 3), peer_tok_s=round(ost["steady_tok_s"], 1),
                       peer_loop_tok_s=round(ost["loop_tok_s"], 1), peer_peak_rss_mb=round(orun.maxrss_mb),
                       flops_note=flops_line(dest, txt, w / "marian"))
        if ost and args.peer == "fairseq":
            rec.update(peer="fairseq 0.12.2 transformer", peer_value=round(ost["steady_tok_s"], 1),
                       ratio=round(nst["steady_tok_s"] / ost["steady_tok_s"], 3), peer_tok_s=round(ost["steady_tok_s"], 1),
                       peer_loop_tok_s=round(ost["loop_tok_s"], 1), peer_peak_rss_mb=round(orun.maxrss_mb))
        if ost and args.peer == "opennmt":
            rec.update(peer="OpenNMT-py 3.5.1", peer_value=round(ost["steady_tok_s"], 1),
                       ratio=round(nst["steady_tok_s"] / ost["steady_tok_s"], 3), peer_tok_s=round(ost["steady_tok_s"], 1), peer_loop_tok_s=round(ost["loop_tok_s"], 1),
                       peer_peak_rss_mb=round(orun.maxrss_mb), ratio_vs_opennmt=round(nst["steady_tok_s"] / ost["steady_tok_s"], 3),
                       ratio_vs_opennmt_loop=round(nst["loop_tok_s"] / ost["loop_tok_s"], 3))
        bl.append_jsonl([rec], {"bench": "train_speed", "load": {"before": load_before, "after": load_after}})


if __name__ == "__main__":
    main()
