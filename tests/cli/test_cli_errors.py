"""Every command, every bad value: one line naming the problem, a documented exit status, no
traceback, nothing lost.  (Exit statuses: 1 error, 2 bad command line, 130 Ctrl-C, 141 closed
output; see the README.)"""
from __future__ import annotations

import errno
import os
import random
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from nmtkit.cli.align import command as align
from nmtkit.cli.common import EXIT_BROKEN_PIPE, EXIT_INTERRUPT, handle_errors
from nmtkit.cli.main import cli
from nmtkit.cli.preprocess import command as preprocess
from nmtkit.cli.sample import command as sample
from nmtkit.cli.score import command as score
from nmtkit.cli.train import command as train
from nmtkit.cli.translate import command as translate
from tests.helpers import one_line

COMMANDS = {"train": train, "translate": translate, "preprocess": preprocess, "score": score, "align": align,
            "sample": sample}

#: (command, leading arguments that parse, option, bad value)
#: One out-of-range value per command: proves click's ranges are wired into nmtkit's one-line
#: usage errors (exit 2).  Every other range is click's own check, not re-tested here.
CLICK_RANGES = [
    ("train", ["data"], "--batch-size", "0"),
    ("translate", ["--path", "x.pt"], "--beam", "0"),
    ("translate", ["--path", "x.pt"], "--beam", "100001"),  # the search's upper bounds too, before any model loads
    ("translate", ["--path", "x.pt"], "--max-len-a", "5000"),
    ("translate", ["--path", "x.pt"], "--unkpen", "-2000"),
    ("preprocess", ["-s", "en", "-t", "de", "--destdir", "d"], "--workers", "0"),
    ("score", ["--ref", "r"], "--bootstrap-samples", "0"),
    ("align", ["--path", "x.pt"], "--batch-size", "0"),
    ("sample", ["--out", "o"], "--train", "0"),
    ("sample", ["--out", "o"], "--train", "1000001"),  # held in memory while drawn: --train 10**12 ran out of it
]
#: nmtkit's own check (FiniteFloat): click's FloatRange lets nan and inf through, and a nan
#: learning rate would train silently on NaNs.
NON_FINITE = [
    *[("train", ["data"], opt, v) for opt, v in [
        ("--lr", "nan"), ("--lr", "inf"), ("--clip-norm", "nan"), ("--dropout", "nan"), ("--stop-time-hours", "inf"),
        ("--label-smoothing", "nan"), ("--guided-alignment-weight", "inf"), ("--init-scale", "nan"),
    ]],
    *[("translate", ["--path", "x.pt"], opt, v) for opt, v in [
        ("--lenpen", "nan"), ("--lenpen", "-inf"), ("--unkpen", "nan"), ("--max-len-a", "inf"),
    ]],
    ("preprocess", ["-s", "en", "-t", "de", "--destdir", "d"], "--max-len-ratio", "nan"),
]
BAD_NUMBERS = CLICK_RANGES + NON_FINITE


@pytest.mark.parametrize("name,lead,opt,value", BAD_NUMBERS, ids=[f"{c}{o}={v}" for c, _, o, v in BAD_NUMBERS])
def test_numbers_out_of_range_are_a_one_line_usage_error(name, lead, opt, value):
    res = CliRunner().invoke(COMMANDS[name], [*lead, opt, value])
    assert res.exit_code == 2, res.output
    line = one_line(res.output)
    assert line.startswith(f"nmtkit-{name}: error: ") and opt in line and value in line, line


#: Model options out of range: refused once, by the model's Config.validate() in its words (exit 1), before
#: DATA is even looked at; a value that is not of the option's type stays click's usage error (above).
BAD_MODEL_VALUES = [
    ("--dropout", "1", "dropout must be in [0, 1), got 1.0"), ("--dropout", "-0.1", "dropout must be in [0, 1), got -0.1"),
    ("--layers", "0", "layers must be >= 1, got 0"), ("--hidden-size", "0", "hidden_size must be >= 1, got 0"),
    ("--embed-dim", "-2", "embed_dim must be >= 1, got -2"), ("--window", "0", "window must be >= 1, got 0"),
    ("--init-scale", "-0.1", "init_scale must be >= 0, got -0.1"), ("--init", "xavier", "init must be one of uniform, bahdanau"),
    ("--dropout-output", "1", "dropout_output must be < 1"),
    ("--maxout-size", "0", "maxout_size must be >= 1, got 0", "rnnsearch_tiny"),
    ("--attention-dim", "0", "attention_dim must be >= 1, got 0", "rnnsearch_tiny"),
    ("--cell", "rnn", "cell must be one of lstm, gru; got 'rnn'", "rnnencdec_tiny"),
]


@pytest.mark.parametrize("opt,value,message,arch", [(*b, "luong_tiny")[:4] for b in BAD_MODEL_VALUES],
                         ids=[f"{b[0]}={b[1]}" for b in BAD_MODEL_VALUES])
def test_model_values_out_of_range_are_the_configs_one_line_error(opt, value, message, arch, tmp_path):
    res = CliRunner().invoke(train, [str(tmp_path / "no-data"), "--arch", arch, opt, value])
    assert res.exit_code == 1, res.output
    assert one_line(res.output).startswith(f"nmtkit-train: error: {message}"), res.output


def test_the_same_through_the_nmtkit_group():
    res = CliRunner().invoke(cli, ["translate", "--path", "x.pt", "--batch-size", "0"])
    assert res.exit_code == 2
    assert one_line(res.output).startswith("nmtkit-translate: error: Invalid value for '--batch-size': 0 is not in the range x>=1")


def test_an_unknown_option_is_one_line_too():
    res = CliRunner().invoke(score, ["--bleu"])
    assert res.exit_code == 2 and "--bleu" in one_line(res.output)


@pytest.mark.parametrize("args", [
    ["data", "--arch", "luong_tiny", "--max-epoch", "0", "--max-update", "0", "--patience", "0", "--threads", "0", "--clip-norm", "0",
     "--label-smoothing", "0", "--dropout", "0", "--stop-time-hours", "0", "--init-scale", "0", "--seed", "0",
     "--lr-shrink", "1", "--min-lr", "0"],
])
def test_zero_keeps_its_documented_meaning_where_it_means_off(args):
    ctx = train.make_context("train", list(args))  # parses and range-checks, runs nothing
    assert ctx.params["max_epoch"] == 0 and ctx.params["clip_norm"] == 0


def test_translate_zero_means_default_where_documented():
    ctx = translate.make_context("translate", ["--path", "x.pt", "--buffer-size", "0", "--threads", "0", "--min-len", "0"])
    assert ctx.params["buffer_size"] == 0


# -- exit statuses ------------------------------------------------------------------------------
def _exits(fn) -> tuple[int, str]:  # noqa: ANN001
    runner = CliRunner()
    res = runner.invoke(click.command()(handle_errors("nmtkit-x")(fn)), [])
    return res.exit_code, res.output


def test_exit_statuses_of_errors_interrupts_and_closed_output():
    def interrupted() -> None:
        raise KeyboardInterrupt

    def closed() -> None:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    def disk_full() -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    code, out = _exits(interrupted)
    assert code == EXIT_INTERRUPT == 130 and "Traceback" not in out
    code, out = _exits(closed)
    assert code == EXIT_BROKEN_PIPE == 141 and out == ""
    code, out = _exits(disk_full)
    assert code == 1 and one_line(out) == "nmtkit-x: error: No space left on device"


def test_closed_stdout_exits_141_without_a_traceback(tmp_path):
    ref = tmp_path / "ref.txt"
    ref.write_text("a b c\n" * 50, encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "nmtkit.cli.score", "--sys", str(ref), "--ref", str(ref),
                             "--sentence-level"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before anything is written (like `| head -0`)
    err = proc.stderr.read().decode()
    assert proc.wait() == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err


@pytest.mark.parametrize("module, args", [
    ("nmtkit.cli.train", ["--list-archs"]), ("nmtkit.cli.train", ["--list-archs", "luong_tiny"]),
    ("nmtkit.cli.train", ["--help"]), ("nmtkit.cli.main", ["--help"]), ("nmtkit.cli.main", ["--version"]),
])
def test_closed_stdout_during_an_eager_option_exits_141(module, args):
    """``nmtkit-train --list-archs | head -1``: the listing runs while click parses the command
    line, before handle_errors, and click turned the broken pipe into a silent exit status 1;
    so did ``nmtkit --help`` and ``nmtkit --version`` (the group)."""
    proc = subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait() == 141, err
    assert err == ""


# -- checkpoints and outputs ----------------------------------------------------------------------
def test_a_png_given_as_checkpoint_gets_nmtkits_message(tmp_path):
    png = tmp_path / "curve.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    for cmd, args in ((translate, ["--path", str(png)]), (align, ["--path", str(png), "--source", "-", "--target", str(png)])):
        res = CliRunner().invoke(cmd, args, input="a\n")
        assert res.exit_code == 1
        line = one_line(res.output)
        assert line.endswith(f"{png} is not an nmtkit checkpoint") and "weights_only" not in line


def test_output_under_a_file_says_the_parent_is_a_file(random_ckpt, tmp_path):
    parent = tmp_path / "notadir"
    parent.write_text("x\n")
    res = CliRunner().invoke(translate, ["--path", str(random_ckpt), "--quiet", "--output", str(parent / "out.txt")],
                             input="the cat .\n")
    assert res.exit_code == 1
    assert one_line(res.output) == f"nmtkit-translate: error: {parent / 'out.txt'}: {parent} is a file, not a directory"


def test_disk_full_on_translate_output_keeps_the_previous_file(random_ckpt, tmp_path, monkeypatch):
    out = tmp_path / "hyp.txt"
    out.write_text("previous\n")

    def full(fd):  # noqa: ANN001
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    res = CliRunner().invoke(translate, ["--path", str(random_ckpt), "--quiet", "--threads", "1", "--output", str(out)],
                             input="the cat .\n")
    assert res.exit_code == 1
    assert one_line(res.output) == f"nmtkit-translate: error: {out}: No space left on device"
    assert out.read_text() == "previous\n" and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_disk_full_on_the_alignment_file_still_finishes_the_output_write(random_ckpt, tmp_path, monkeypatch):
    # --alignment-file commits first; its failure must not leave --output's temporary file behind
    out, align_file = tmp_path / "hyp.txt", tmp_path / "hyp.align"
    out.write_text("previous\n")
    align_file.write_text("previous links\n")
    calls = []

    def full_once(fd):  # noqa: ANN001
        calls.append(fd)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_once)
    res = CliRunner().invoke(translate, ["--path", str(random_ckpt), "--quiet", "--threads", "1", "--output", str(out),
                                         "--alignment-file", str(align_file)], input="the cat .\n")
    assert res.exit_code == 1
    assert one_line(res.output) == f"nmtkit-translate: error: {align_file}: No space left on device"
    assert out.read_text() == "previous\n" and align_file.read_text() == "previous links\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hyp.align", "hyp.txt", "random.pt"]


def test_half_precision_without_cuda_is_refused_by_translate(random_ckpt):
    res = CliRunner().invoke(translate, ["--path", str(random_ckpt), "--device", "cpu", "--amp", "fp16"], input="the cat .\n")
    assert res.exit_code == 1
    assert one_line(res.output) == ("nmtkit-translate: error: --amp fp16 needs a CUDA device "
                                    "(this run is on cpu; use --amp none or auto)")


def test_outputs_are_readable_by_others(tmp_path):
    old = os.umask(0o022)
    try:
        res = CliRunner().invoke(sample, ["--out", str(tmp_path / "corpus"), "--train", "5", "--valid", "2", "--test", "2"])
    finally:
        os.umask(old)
    assert res.exit_code == 0, res.output
    assert (tmp_path / "corpus").stat().st_mode & 0o777 == 0o755
    assert {p.stat().st_mode & 0o777 for p in (tmp_path / "corpus").iterdir()} == {0o644}


# -- text: BOM and control characters ------------------------------------------------------------
def test_score_of_a_bom_prefixed_copy_of_the_reference_is_100(tmp_path):
    lines = ["The cat sat on the mat .", "A man rides a bike ."]
    ref = tmp_path / "ref.txt"
    ref.write_text("".join(l + "\n" for l in lines), encoding="utf-8")
    hyp = tmp_path / "hyp.txt"
    hyp.write_bytes(b"\xef\xbb\xbf" + ref.read_bytes())
    res = CliRunner().invoke(score, ["--sys", str(hyp), "--ref", str(ref), "--metrics", "bleu,chrf"])
    assert res.exit_code == 0, res.output
    scores = [float(l.split("\t")[2]) for l in res.stdout.splitlines()]
    assert scores == [100.0, 100.0]


def test_score_splits_lines_on_newline_only(tmp_path):
    lines = ["a\x85b c", "d\u2028e f", "g\rh i"]
    ref = tmp_path / "ref.txt"
    ref.write_text("".join(l + "\n" for l in lines), encoding="utf-8")
    res = CliRunner().invoke(score, ["--sys", str(ref), "--ref", str(ref), "--sentence-level", "--metrics", "chrf"])
    assert res.exit_code == 0, res.output
    assert len(res.stdout.splitlines()) == 3


CONTROLS = ["\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\u2028", "\u2029", "\x00", "\x1b", "\x07", "\x7f",
            "\x9b", "\t"]


def test_replace_unk_never_copies_control_characters(random_ckpt):
    rng = random.Random(5)
    words = "the cat sees Anna Zoë Oberhausen 42 .".split()
    lines = []
    for _ in range(40):
        toks = [rng.choice(words) + (rng.choice(CONTROLS) if rng.random() < 0.5 else "") for _ in range(rng.randint(1, 6))]
        lines.append(rng.choice(CONTROLS).join(toks) if rng.random() < 0.5 else " ".join(toks))
    lines += ["\x00", "\u2028", "\x1b[31mred\x1b[0m"]
    data = "".join(l + "\n" for l in lines).encode("utf-8")
    # a huge negative --unkpen makes every output token <unk>, so each one is a copied source word
    res = CliRunner().invoke(translate, ["--path", str(random_ckpt), "--quiet", "--threads", "1", "--beam", "2",
                                         "--max-len-b", "4", "--replace-unk", "--unkpen", "-1000"], input=data)
    assert res.exit_code == 0, res.output
    out = res.stdout_bytes.decode("utf-8")
    assert len(out.splitlines()) == len(lines) == out.count("\n")
    assert not any(c in out for c in CONTROLS), repr(out)
    assert "Zoë" in out and "Oberhausen" in out  # copying still works


def test_text_pipeline_normalizes_control_characters():
    from nmtkit.data.text_pipeline import TextPipeline, normalize_line, split_words

    assert normalize_line("a\rb\u2028c\x85d\x00e\x1bf\tg") == "a b c def g"
    assert split_words("a\vb\x1c c") == ["a", "b", "c"]
    assert TextPipeline("en", tokenizer="moses").tokenize("Zoë\u2029sees\x00 it .") == ["Zoë", "sees", "it", "."]


# -- data: corrupt files, unknown valid subset, empty dictionaries ---------------------------------


def train_args(data: Path, save: Path, *extra: str) -> list[str]:
    return [str(data), "--arch", "luong_tiny", "--save-dir", str(save), "--batch-size", "2", "--no-progress", "--threads", "1", *extra]


def test_unknown_valid_subset_is_an_error_listing_the_splits(data_dir, tmp_path):
    res = CliRunner().invoke(train, train_args(data_dir, tmp_path / "c", "--valid-subset", "valid2"))
    assert res.exit_code == 1
    line = one_line(res.output)
    assert "--valid-subset valid2" in line and "available: train, valid" in line
    assert not (tmp_path / "c").exists()


def test_valid_subset_none_trains_without_validation(data_dir, tmp_path):
    res = CliRunner().invoke(train, train_args(data_dir, tmp_path / "c", "--valid-subset", "none", "--max-epoch", "1"))
    assert res.exit_code == 0, res.output
    assert "no validation split" in res.output


def test_validation_options_without_a_validation_split_are_a_warning(data_dir, tmp_path):
    res = CliRunner().invoke(train, train_args(data_dir, tmp_path / "c", "--valid-subset", "none", "--max-epoch", "1",
                                               "--patience", "2", "--lr-schedule", "plateau"))
    assert res.exit_code == 0, res.output
    assert "warning: --patience, --lr-schedule plateau need a validation split, and there is none" in res.output
    quiet = CliRunner().invoke(train, train_args(data_dir, tmp_path / "d", "--max-epoch", "1", "--patience", "2"))
    assert quiet.exit_code == 0 and "need a validation split" not in quiet.output


def test_a_directory_where_training_writes_a_file_fails_before_training(data_dir, tmp_path):
    (tmp_path / "c" / "learning_curve.png").mkdir(parents=True)
    res = CliRunner().invoke(train, train_args(data_dir, tmp_path / "c", "--max-epoch", "1"))
    assert res.exit_code == 1
    assert one_line(res.output).endswith("learning_curve.png is a directory, where training writes a file")
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["learning_curve.png"]


def test_split_files_replaced_after_preprocessing_are_refused(data_dir, tmp_path):
    import json

    meta = json.loads((data_dir / "meta.json").read_text(encoding="utf-8"))
    meta["splits"]["train"]["sentences"] += 1  # what copying a smaller split's files over train's gives
    (data_dir / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    res = CliRunner().invoke(train, train_args(data_dir, tmp_path / "c", "--max-epoch", "1"))
    assert res.exit_code == 1
    assert "split train has" in one_line(res.output) and "meta.json records" in one_line(res.output)


def test_token_ids_beyond_the_dictionary_fail_when_the_data_is_opened(data_dir, tmp_path):
    import numpy as np

    bin_path = data_dir / "train.en-de.de.bin"
    raw = bytearray(bin_path.read_bytes())
    raw[-2:] = np.asarray([9999], dtype="<u2").tobytes()  # the last id of the last sentence
    bin_path.write_bytes(bytes(raw))
    res = CliRunner().invoke(train, train_args(data_dir, tmp_path / "c", "--max-epoch", "1"))
    assert res.exit_code == 1
    assert one_line(res.output).startswith(f"nmtkit-train: error: {data_dir / 'train.en-de.de'}.bin: corrupt data: sentence 5 ")


def test_disk_full_while_saving_a_checkpoint_keeps_the_previous_one(data_dir, tmp_path, monkeypatch):
    save = tmp_path / "c"
    assert CliRunner().invoke(train, train_args(data_dir, save, "--max-epoch", "1")).exit_code == 0
    before = (save / "checkpoint_last.pt").read_bytes()

    real_fsync = os.fsync

    def full(fd):  # noqa: ANN001  (the disk fills up after config.yaml, while a checkpoint is written)
        if "checkpoint" not in os.readlink(f"/proc/self/fd/{fd}"):
            return real_fsync(fd)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    res = CliRunner().invoke(train, train_args(data_dir, save, "--max-epoch", "2"))
    assert res.exit_code == 1
    line = one_line(res.output.strip().splitlines()[-1])
    assert line.startswith(f"nmtkit-train: error: {save}{os.sep}checkpoint") and line.endswith(".pt: No space left on device")
    assert (save / "checkpoint_last.pt").read_bytes() == before
    assert [p.name for p in save.iterdir() if p.name.endswith(".tmp")] == []


def test_disk_full_during_preprocess_names_the_file_under_destdir(tiny_parallel, tmp_path, monkeypatch):
    import nmtkit.data.preprocess as pp

    def full(prefix, sentences, vocab_size):  # noqa: ANN001, ANN202
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), f"{prefix}.bin")

    monkeypatch.setattr(pp, "write_indexed", full)
    dest = tmp_path / "bin"
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(tiny_parallel / "train"),
                                          "--destdir", str(dest)])
    assert res.exit_code == 1
    assert one_line(res.output) == f"nmtkit-preprocess: error: {dest / 'train.en-de.en.bin'}: No space left on device"
    assert not dest.exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("content", ["", "<unk> 3\n<s> 1\n"])
def test_an_empty_srcdict_is_an_error_naming_it(tiny_parallel, tmp_path, content):
    empty = tmp_path / "empty.dict"
    empty.write_text(content, encoding="utf-8")
    for opt in ("--srcdict", "--tgtdict"):
        res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(tiny_parallel / "train"),
                                              opt, str(empty), "--destdir", str(tmp_path / "bin")])
        assert res.exit_code == 1
        assert one_line(res.output) == f"nmtkit-preprocess: error: {empty}: dictionary has no entries: every token would become <unk>"


def test_a_dictionary_emptied_by_options_is_an_error(tiny_parallel, tmp_path):
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(tiny_parallel / "train"),
                                          "--nwordstgt", "0", "--destdir", str(tmp_path / "bin")])
    assert res.exit_code == 1 and "the de dictionary would be empty" in one_line(res.output)


def test_dictionary_options_a_given_dictionary_would_ignore_are_refused(tiny_parallel, tmp_path):
    base = ["-s", "en", "-t", "de", "--trainpref", str(tiny_parallel / "train")]
    assert CliRunner().invoke(preprocess, [*base, "--destdir", str(tmp_path / "d")]).exit_code == 0
    en, de = str(tmp_path / "d" / "dict.en.txt"), str(tmp_path / "d" / "dict.de.txt")
    cases = [(["--joined-dictionary", "--srcdict", en, "--tgtdict", de], "--srcdict and --tgtdict differ"),
             (["--srcdict", en, "--nwordssrc", "5"], "--nwordssrc/--thresholdsrc shape a dictionary built here"),
             (["--tgtdict", de, "--thresholdtgt", "2"], "--nwordstgt/--thresholdtgt shape a dictionary built here"),
             (["--joined-dictionary", "--srcdict", en, "--nwordstgt", "5"], "(--joined-dictionary with --srcdict)")]
    for extra, message in cases:  # the German side was binarized with the English dictionary, 76 % <unk>
        res = CliRunner().invoke(preprocess, [*base, *extra, "--destdir", str(tmp_path / "bin")])
        assert res.exit_code == 1 and message in one_line(res.output), (extra, res.output)
        assert not (tmp_path / "bin").exists()
    same = CliRunner().invoke(preprocess, [*base, "--joined-dictionary", "--srcdict", en, "--tgtdict", en,
                                           "--destdir", str(tmp_path / "bin")])
    assert same.exit_code == 0, same.output


def test_preprocess_drops_a_bom_from_corpora_and_dictionaries(tiny_parallel, tmp_path):
    for lang in ("en", "de"):
        p = tiny_parallel / f"train.{lang}"
        p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(tiny_parallel / "train"),
                                          "--destdir", str(tmp_path / "bin")])
    assert res.exit_code == 0, res.output
    for lang in ("en", "de"):
        text = (tmp_path / "bin" / f"dict.{lang}.txt").read_text(encoding="utf-8")
        assert "\ufeff" not in text
    assert "the " in (tmp_path / "bin" / "dict.en.txt").read_text(encoding="utf-8")
    # a BOM-prefixed dictionary reads the same as the plain one
    d = tmp_path / "bin" / "dict.en.txt"
    bom = tmp_path / "bom.dict"
    bom.write_bytes(b"\xef\xbb\xbf" + d.read_bytes())
    from nmtkit.data.dictionary import Dictionary

    assert Dictionary.load(bom) == Dictionary.load(d)


def test_translate_drops_a_bom_on_stdin_and_in_files(random_ckpt, tmp_path):
    args = ["--path", str(random_ckpt), "--quiet", "--threads", "1", "-v"]
    plain = CliRunner().invoke(translate, args, input="Anna sees the cat .\nthe dog\n")
    bom = CliRunner().invoke(translate, args, input=b"\xef\xbb\xbfAnna sees the cat .\nthe dog\n")
    f = tmp_path / "in.txt"
    f.write_bytes(b"\xef\xbb\xbfAnna sees the cat .\nthe dog\n")
    from_file = CliRunner().invoke(translate, [*args, "--input", str(f)])
    assert plain.exit_code == bom.exit_code == from_file.exit_code == 0
    assert plain.stdout == bom.stdout == from_file.stdout and "\ufeff" not in bom.stdout


# -- options shared by several commands: one declaration, one help text, one message -----------------
SHARED_OPTIONS = ("--device", "--threads", "--amp", "--batch-size", "--max-tokens")


@pytest.mark.parametrize("flag", SHARED_OPTIONS)
def test_shared_options_have_one_help_text_in_every_command(flag):
    helps = {name: p.help for name, cmd in COMMANDS.items() for p in cmd.params if flag in getattr(p, "opts", ())}
    assert len(helps) >= 2, helps
    assert len(set(helps.values())) == 1, helps


@pytest.mark.parametrize("opt,value", [("--batch-size", "0"), ("--batch-size", "many"), ("--amp", "fp8"),
                                       ("--device", "gpu")])
def test_the_same_bad_value_reads_the_same_in_translate_score_and_align(opt, value, tmp_path):
    from tests.helpers import make_checkpoint

    ckpt = str(make_checkpoint(tmp_path / "m.pt"))
    text = tmp_path / "t.txt"
    text.write_text("the cat\n", encoding="utf-8")
    pair = ["--source", str(text), "--target", str(text)]
    commands = {"translate": (translate, ["--path", ckpt]), "score": (score, ["--path", ckpt, *pair]),
                "align": (align, ["--path", ckpt, *pair])}
    messages = {}
    for name, (cmd, lead) in commands.items():
        res = CliRunner().invoke(cmd, [*lead, opt, value], input="the cat\n")
        line = one_line(res.output)
        assert line.startswith(f"nmtkit-{name}: error: "), line
        messages[name] = (res.exit_code, line.split(": error: ", 1)[1])
    assert len(set(messages.values())) == 1, messages


@pytest.mark.parametrize("args,message", [
    (["--beam", "0"], "--beam must be >= 1, got 0"),
    (["--nbest", "0"], "--nbest must be >= 1, got 0"),
    (["--min-len", "-1"], "--min-len must be >= 0, got -1"),
    (["--lenpen-form", "gnu"], "--lenpen-form must be one of fairseq, gnmt; got 'gnu'"),
])
def test_search_values_read_the_same_from_click_and_from_the_library(args, message):
    """click refuses them when parsing (exit 2); the library, for Python callers, in the same words."""
    from nmtkit.errors import NmtkitError
    from nmtkit.generate.search_options import SearchOptions

    res = CliRunner().invoke(translate, ["--path", "x.pt", *args])
    assert res.exit_code == 2 and one_line(res.output) == f"nmtkit-translate: error: {message} (see --help)"
    name, value = args[0][2:].replace("-", "_"), args[1]
    with pytest.raises(NmtkitError) as exc:
        SearchOptions(**{name: type(getattr(SearchOptions, name))(value)})
    assert str(exc.value) == message


def test_search_defaults_are_the_librarys():
    import dataclasses

    from nmtkit.generate.translator import SearchOptions

    ctx = translate.make_context("translate", ["--path", "x.pt"])
    for f in dataclasses.fields(SearchOptions):
        assert ctx.params[f.name] == f.default, f.name


@pytest.mark.parametrize("extra, message", [
    (["--testpref", "{raw}/valid,{raw}/valid"], "--testpref names '{raw}/valid' twice"),
    (["--bpe", "subword-nmt", "--bpe-codes", "{codes}", "--bpe-merges", "50"], "--bpe-codes reads them as they are"),
    (["--bpe", "subword-nmt", "--bpe-codes", "{codes}", "--separate-bpe"], "--bpe-codes reads them as they are"),
])
def test_preprocess_options_that_would_be_ignored_or_doubled_are_refused(tiny_parallel, tmp_path, extra, message):
    codes = tmp_path / "c.codes"
    codes.write_text("#version: 0.2\nt h\n", encoding="utf-8")
    fill = {"raw": str(tiny_parallel), "codes": str(codes)}
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(tiny_parallel / "train"),
                                          "--destdir", str(tmp_path / "bin"), *[a.format(**fill) for a in extra]])
    assert res.exit_code == 1 and message.format(**fill) in one_line(res.output), res.output
    assert not (tmp_path / "bin").exists()


def test_training_data_of_only_empty_lines_says_so(tmp_path):
    for lang in ("en", "de"):
        (tmp_path / f"train.{lang}").write_text("\n\n\n", encoding="utf-8")
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(tmp_path / "train"),
                                          "--destdir", str(tmp_path / "bin")])
    assert res.exit_code == 1 and "every training line is empty" in one_line(res.output), res.output
