"""Hostile input where nmtkit expects a number, a word or a file: one line naming the problem,
never a traceback, a silent misreading or a lost file.

Each case is one a review found failing: ``str.isdigit`` accepts '²' and '①', which ``int``
then refuses; ``str.split()`` splits on no-break spaces that nmtkit keeps inside words;
matplotlib reads ``$...$`` in a label as TeX; two options can both name standard input.
"""
from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest
from click.testing import CliRunner

from nmtkit.checkpoint import epoch_number
from nmtkit.cli.align import command as align
from nmtkit.cli.align import parse_plot_ids
from nmtkit.cli.average import command as average
from nmtkit.cli.model_options import parse_model_opts
from nmtkit.cli.preprocess import command as preprocess
from nmtkit.cli.sample import command as sample
from nmtkit.cli.score import command as score
from nmtkit.cli.train import command as train
from nmtkit.cli.translate import command as translate
from nmtkit.data.dictionary import Dictionary
from nmtkit.data.lexicon import iter_lexicon_entries
from nmtkit.data.text_pipeline import check_bpe_codes, read_bpe_codes
from nmtkit.errors import InputError, NmtkitError
from nmtkit.evaluate.plots import plot_attention, plot_length_buckets
from nmtkit.models.common import BaseConfig
from nmtkit.train.run_log import _record
from nmtkit.utils.stdio import direct_target, names_stdin

from tests.helpers import make_checkpoint, write

ODD_DIGITS = ["²", "①", "٣", "--5"]


@pytest.mark.parametrize("count", ODD_DIGITS)
def test_a_dictionary_count_that_is_not_ascii_digits_is_a_line_error(tmp_path, count):
    path = write(tmp_path / "dict.txt", f"foo 3\nbar {count}\n")
    with pytest.raises(InputError, match=r"dict\.txt:2: expected 'token count'"):
        Dictionary.load(path)


def test_negative_and_plain_counts_still_load(tmp_path):
    d = Dictionary.load(write(tmp_path / "dict.txt", "foo 3\nbar -1\n"))
    assert "foo" in d.index and "bar" in d.index


@pytest.mark.parametrize("version", ["²", "0.²", "①.2"])
def test_a_bpe_version_that_is_not_ascii_digits_is_a_line_error(version):
    with pytest.raises(InputError, match=r"codes:1: not a subword-nmt version line"):
        check_bpe_codes(f"#version: {version}\nl o\n", "codes")


def test_a_byte_order_mark_does_not_hide_the_bpe_version_line(tmp_path):
    plain = write(tmp_path / "plain", "#version: 0.2\nl o\nlo w</w>\n")
    bom = write(tmp_path / "bom", "\ufeff#version: 0.2\nl o\nlo w</w>\n".encode("utf-8"))
    assert read_bpe_codes(bom) == read_bpe_codes(plain)


@pytest.mark.parametrize("name", ["checkpoint².pt", "checkpoint①.pt", "checkpoint٣.pt"])
def test_checkpoint_names_with_other_digits_are_not_epoch_checkpoints(name):
    assert epoch_number(name) is None
    assert epoch_number("checkpoint12.pt") == 12


@pytest.mark.parametrize("ids", ["²", "1,①", "٣"])
def test_plot_ids_with_other_digits_get_the_usage_message(ids):
    with pytest.raises(NmtkitError, match="--plot-ids expects"):
        parse_plot_ids(ids, 10)


def test_descriptor_paths_with_other_digits_are_not_descriptors():
    assert direct_target("/dev/fd/²") is None
    assert direct_target("/proc/self/fd/١") is None


def test_lexicon_fields_split_as_the_model_splits_words(tmp_path):
    """A no-break space is inside a word everywhere else in nmtkit, so it is in a lexicon too."""
    path = write(tmp_path / "lex", "foo\u00a0bar baz\nx\u00a0y 5\nu\tv 0.5\n")
    assert list(iter_lexicon_entries(path)) == [(1, "foo\u00a0bar", "baz", None), (2, "x\u00a0y", "5", None),
                                                (3, "u", "v", 0.5)]


@pytest.mark.parametrize("scale", [1e39, float("inf")])
def test_an_init_scale_beyond_float32_is_a_config_error(scale):
    with pytest.raises(NmtkitError, match="init_scale must be <="):
        BaseConfig(init_scale=scale).validate()


def test_a_model_option_nested_too_deeply_is_one_line():
    with pytest.raises(NmtkitError, match="nested too deeply"):
        parse_model_opts(("window=" + "[" * 100_000,))


def test_a_run_log_line_nested_too_deeply_is_dropped_not_a_crash():
    assert _record(b"[" * 200_000) is None
    assert _record(json.dumps({"time": 1.0, "event": "epoch"}).encode()) == {"time": 1.0, "event": "epoch"}


@pytest.mark.parametrize("label", ["$\\foo$", "$x", "a$b$c", "\\$"])
def test_labels_are_drawn_as_text_not_tex(tmp_path, label):
    fig = plot_attention(tmp_path / "a.png", np.full((1, 2), 0.5), [label, "b"], [label], title=label)
    assert label in [t.get_text() for t in fig.axes[0].get_xticklabels()]
    plot_length_buckets(tmp_path / "b.png", ["1-5", label], {label: [1.0, 2.0]}, title=label)
    assert (tmp_path / "a.png").stat().st_size > 0 and (tmp_path / "b.png").stat().st_size > 0


def test_score_plot_with_tex_like_labels_writes_the_plot(tmp_path):
    ref = write(tmp_path / "ref.txt", "a small cat .\nthe dog runs fast .\n")
    res = CliRunner().invoke(score, ["--sys", str(ref), "--ref", str(ref), "--plot", str(tmp_path / "p.png"),
                                     "--labels", "$\\foo$"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "p.png").stat().st_size > 0


@pytest.mark.parametrize("lang", [".", "..", "", "a/b"])
def test_preprocess_refuses_a_language_code_its_readers_refuse(tmp_path, lang):
    write(tmp_path / "c.en", "a b\n")
    write(tmp_path / "c.de", "x y\n")
    res = CliRunner().invoke(preprocess, ["-s", lang, "-t", "de", "--trainpref", str(tmp_path / "c"),
                                          "--destdir", str(tmp_path / "out")])
    assert res.exit_code == 1
    assert "is not a language code" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "out").exists()


def test_names_stdin_knows_the_aliases(tmp_path):
    assert names_stdin("-") and names_stdin("/dev/stdin") and names_stdin("/dev/fd/0")
    assert not names_stdin(None) and not names_stdin(write(tmp_path / "f", "x\n"))


@pytest.mark.parametrize("cmd, args", [
    (translate, ["--path", "x.pt", "--shortlist", "-"]),
    (translate, ["--path", "x.pt", "--input", "/dev/stdin", "--replace-unk", "-"]),
    (align, ["--path", "x.pt", "--source", "-", "--target", "t.txt", "--gold", "/dev/stdin"]),
    (align, ["--path", "x.pt", "--source", "s.txt", "--target", "t.txt", "--sure", "-", "--possible", "-"]),
    (score, ["--sys", "-", "--ref", "-"]),
    (score, ["--ref", "r.txt", "--src", "-", "--by-length"]),
])
def test_standard_input_is_read_by_one_option_at_most(tmp_path, monkeypatch, cmd, args):
    monkeypatch.chdir(tmp_path)
    for name in ("x.pt", "t.txt", "s.txt", "r.txt"):
        write(tmp_path / name, "a\n")
    res = CliRunner().invoke(cmd, args, input="a b c\n")
    assert res.exit_code == 1, res.output
    assert "standard input can be read only once" in res.output and "Traceback" not in res.output


def test_average_refuses_one_checkpoint_given_twice(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_checkpoint(tmp_path / "a.pt")
    make_checkpoint(tmp_path / "b.pt", seed=1)
    (tmp_path / "alias.pt").symlink_to(tmp_path / "a.pt")
    for inputs in (["a.pt", "./a.pt", "b.pt"], ["a.pt", "b.pt", "alias.pt"]):
        res = CliRunner().invoke(average, ["-i", *inputs, "-o", "avg.pt"])
        assert res.exit_code == 1 and "are the same checkpoint" in res.output, res.output
    assert not (tmp_path / "avg.pt").exists()


def test_average_refuses_the_name_of_the_trainers_best_checkpoint(tmp_path):
    make_checkpoint(tmp_path / "a.pt")
    res = CliRunner().invoke(average, ["-i", str(tmp_path / "a.pt"), "-o", str(tmp_path / "checkpoint_best.pt")])
    assert res.exit_code == 1 and "a name the trainer writes and reads" in res.output
    assert not (tmp_path / "checkpoint_best.pt").exists()


def test_a_symlinked_output_directory_is_written_through(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    res = CliRunner().invoke(sample, ["--out", str(tmp_path / "link"), "--train", "3", "--valid", "2", "--test", "2"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real" / "train.en").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]  # nothing left beside them


def test_eval_bleu_without_its_references_fails_before_training(data_dir, tmp_path):
    tok = next(data_dir.glob("valid.*.de.tok"))
    tok.write_text("\n".join(tok.read_text().splitlines()[:-1]) + "\n")
    save = tmp_path / "c"
    res = CliRunner().invoke(train, [str(data_dir), "--arch", "luong_tiny", "--save-dir", str(save), "--batch-size", "2",
                                     "--no-progress", "--max-epoch", "1", "--eval-bleu"])
    assert res.exit_code == 1 and f"{tok}:" in res.output and "sentence pairs" in res.output, res.output
    assert not (save / "checkpoint_last.pt").exists()


def test_ensemble_paths_may_hold_colons_where_the_files_exist(tmp_path, monkeypatch):
    from nmtkit.generate.checkpoint_paths import split_checkpoint_paths

    monkeypatch.chdir(tmp_path)
    (tmp_path / "run:1").mkdir()
    for name in ("run:1/a.pt", "run:1/b.pt", "c.pt", "odd::name.pt"):
        write(tmp_path / name, "x")
    assert split_checkpoint_paths("run:1/a.pt:run:1/b.pt") == ["run:1/a.pt", "run:1/b.pt"]
    assert split_checkpoint_paths("c.pt:run:1/a.pt") == ["c.pt", "run:1/a.pt"]
    assert split_checkpoint_paths("odd::name.pt") == ["odd::name.pt"]
    assert split_checkpoint_paths("x.pt:y.pt") == ["x.pt", "y.pt"]  # missing files: named one by one later
    with pytest.raises(NmtkitError, match="empty checkpoint name"):
        split_checkpoint_paths("c.pt::c.pt")


@pytest.mark.parametrize("kind", ["directory", "device"])
def test_a_path_that_is_not_a_regular_file_is_named_for_what_it_is(tmp_path, kind):
    from nmtkit.errors import InputError
    from nmtkit.generate.checkpoint_paths import checkpoint_paths

    path = str(tmp_path) if kind == "directory" else os.devnull
    with pytest.raises(InputError) as exc:
        checkpoint_paths(path)
    assert str(exc.value) == f"{path}: " + ("is a directory, not a checkpoint file" if kind == "directory" else
                                            "is not a regular file (a device, pipe or socket), so not a checkpoint file")


# -- a byte-order mark inside a file, numbers no process or float can be --------------------------
BOM = "\ufeff"


def test_a_byte_order_mark_starting_a_later_line_is_dropped(tmp_path):
    """``cat a.txt b.txt`` puts b.txt's mark at the start of a later line: it is dropped there too,
    not glued to a word (a ``\\ufeffbar`` dictionary entry, a reference word that never matches)."""
    from nmtkit.utils.textio import read_lines

    assert read_lines(write(tmp_path / "t", f"a b\n{BOM}c d\n")) == ["a b", "c d"]
    d = Dictionary.load(write(tmp_path / "dict.txt", f"foo 3\n{BOM}bar 1\n"))
    assert "bar" in d.index and f"{BOM}bar" not in d.index
    plain = write(tmp_path / "plain", "#version: 0.2\nl o\nlo w</w>\n")
    glued = write(tmp_path / "glued", f"#version: 0.2\nl o\n{BOM}lo w</w>\n")
    assert read_bpe_codes(glued) == read_bpe_codes(plain)


def test_score_matches_a_reference_line_that_starts_with_a_byte_order_mark(tmp_path):
    hyp = write(tmp_path / "hyp", "the cat sits .\nthe dog runs fast .\n")
    ref = write(tmp_path / "ref", f"the cat sits .\n{BOM}the dog runs fast .\n")
    res = CliRunner().invoke(score, ["--sys", str(hyp), "--ref", str(ref), "--metrics", "bleu", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["systems"][0]["scores"]["bleu"]["score"] == pytest.approx(100.0)


def test_preprocess_keeps_no_byte_order_mark_of_a_concatenated_file(tmp_path):
    write(tmp_path / "c.en", f"a b\n{BOM}c d\n")
    write(tmp_path / "c.de", "x y\nz\n")
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(tmp_path / "c"),
                                          "--destdir", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert BOM not in (tmp_path / "out" / "dict.en.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("value", ["nan", "NaN", "Infinity", "-inf", "1e999", "1" + "0" * 400])
def test_a_model_option_that_is_no_finite_float_is_one_line(value):
    """'nan' passed every range check, and nan != nan made the preset check raise a RuntimeError
    (a traceback); an integer beyond any float was an OverflowError."""
    from nmtkit.models import registry

    with pytest.raises(NmtkitError, match=r"^option dropout expects a finite number, got ") as err:
        registry.resolve_config("luong_tiny", parse_model_opts((f"dropout={value}",)))
    assert len(str(err.value)) < 100  # a 401-digit value is not repeated whole


def test_train_refuses_a_nan_model_option_in_one_line(data_dir, tmp_path):
    res = CliRunner().invoke(train, [str(data_dir), "--arch", "luong_tiny", "--save-dir", str(tmp_path / "c"),
                                     "--no-progress", "--max-update", "1", "--model-opt", "dropout=nan"])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert res.output.strip() == "nmtkit-train: error: option dropout expects a finite number, got 'nan'"
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("pid", [0, -5, 2**31, 10**24])
def test_a_pid_no_process_can_have_is_not_alive(pid):
    from nmtkit.utils.tempfiles import pid_alive

    assert pid_alive(pid) is False
    assert pid_alive(os.getpid()) is True


def test_a_lock_file_with_a_huge_pid_is_taken_over(tmp_path):
    """``os.kill`` raised OverflowError (a traceback) for a PID beyond a C ``pid_t``."""
    from nmtkit.train.lock import LOCK_NAME, SaveDirLock

    (tmp_path / LOCK_NAME).write_text(f"{10**24} {os.uname().nodename}\n")
    warnings: list[str] = []
    with SaveDirLock(tmp_path, warn=warnings.append):
        assert (tmp_path / LOCK_NAME).read_text().split()[0] == str(os.getpid())
    assert warnings and f"stale lock of pid {10**24}" in warnings[0]


def test_a_temporary_name_with_a_huge_pid_does_not_stop_a_write(tmp_path):
    from nmtkit.utils.textio import atomic_write

    stray = write(tmp_path / f".out.txt.{10**24}.abcdefgh.tmp", "x")
    with atomic_write(tmp_path / "out.txt") as fh:
        fh.write("ok\n")
    assert (tmp_path / "out.txt").read_text() == "ok\n" and not stray.exists()


@pytest.mark.parametrize("cmd, args", [
    (score, ["--ref", "r.txt"]),
    (score, ["--sys", "r.txt", "--ref", "-"]),
    (align, ["--path", "x.pt", "--source", "-", "--target", "r.txt"]),
])
def test_empty_standard_input_is_named_stdin(tmp_path, monkeypatch, cmd, args):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "r.txt", "a b\n")
    make_checkpoint(tmp_path / "x.pt")
    res = CliRunner().invoke(cmd, args, input="")
    assert res.exit_code == 1, res.output
    assert res.output.strip().endswith("error: <stdin>: file is empty"), res.output


def test_plot_ids_beyond_the_corpus_name_its_real_size(tmp_path):
    """The paths are checked before the corpus is read; that check used sys.maxsize as the corpus
    size, and a huge id was refused as beyond '9223372036854775807 sentence pairs'."""
    ckpt = make_checkpoint(tmp_path / "x.pt")
    src = write(tmp_path / "s.txt", "the cat\nthe dog\n")
    res = CliRunner().invoke(align, ["--path", str(ckpt), "--source", str(src), "--target", str(src), "--plot",
                                     str(tmp_path / "pl"), "--plot-ids", "99999999999999999999", "-o", os.devnull])
    assert res.exit_code == 1, res.output
    assert res.output.strip() == ("nmtkit-align: error: --plot-ids 99999999999999999999 is out of range: "
                                  "there are 2 sentence pairs (0-1)")
    assert parse_plot_ids(None, None) == [0, 1, 2, 3, 4]


def test_preprocess_forks_no_more_workers_than_there_are_chunks(monkeypatch):
    """``--workers 1000`` on a small corpus forked 1000 processes, each a copy of the pipeline."""
    import multiprocessing.pool

    from nmtkit.data import parallel_map
    from nmtkit.data.text_pipeline import TextPipeline

    sizes: list[int] = []
    real = multiprocessing.pool.Pool.__init__

    def pool_init(self, processes=None, *args, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        sizes.append(processes)
        real(self, processes, *args, **kw)

    monkeypatch.setattr(multiprocessing.pool.Pool, "__init__", pool_init)
    lines = [["a", "b"]] * 5
    out = parallel_map.map_chunks(parallel_map.bpe_chunk, TextPipeline("en"), lines, 1000, None, "bpe", chunk=2)
    assert out == lines and sizes == [3]
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", "t", "--destdir", "d", "--workers", "1025"])
    assert res.exit_code == 2 and "1<=x<=1024" in res.output


@pytest.mark.parametrize("which", [0, 1])
def test_average_refuses_a_checkpoint_with_nan_weights(tmp_path, which):
    """The mean of NaN is NaN: the average was written, and refused only by whoever used it."""
    from nmtkit.checkpoint import load_checkpoint, save_checkpoint

    paths = [make_checkpoint(tmp_path / "a.pt"), make_checkpoint(tmp_path / "b.pt", seed=1)]
    ckpt = load_checkpoint(paths[which], mmap=False)
    name = next(iter(ckpt["model"]))
    ckpt["model"][name] = ckpt["model"][name].clone().fill_(float("nan"))
    save_checkpoint(paths[which], ckpt)
    res = CliRunner().invoke(average, ["-i", str(paths[0]), str(paths[1]), "-o", str(tmp_path / "avg.pt")])
    assert res.exit_code == 1, res.output
    assert res.output.strip() == (f"nmtkit-average: error: {paths[which]}: weight '{name}' holds NaN or infinite "
                                  "values (a diverged run?)")
    assert not (tmp_path / "avg.pt").exists()


def test_bpe_codes_cut_short_after_preprocessing_are_refused_in_one_line(tiny_parallel, tmp_path):
    """meta.json keeps a checksum of each side's codes: a codes file cut short (or edited) in the
    data directory segments differently from the binarized data, and training would ship it in
    every checkpoint; it is refused, naming the file.  A data dir without the field (an older
    version's) is still read."""
    dest = tmp_path / "bpe-bin"
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(tiny_parallel / "train"),
                                          "--destdir", str(dest), "--bpe", "subword-nmt", "--bpe-merges", "20"])
    assert res.exit_code == 0, res.output
    meta = json.loads((dest / "meta.json").read_text(encoding="utf-8"))
    assert set(meta["bpe"]["checksums"]) == {"en", "de"}
    codes = dest / meta["bpe"]["codes"]["en"]
    whole = codes.read_bytes()
    codes.write_bytes(whole[: whole.rindex(b"\n", 0, len(whole) - 1) + 1])  # the last merge lost
    args = [str(dest), "--save-dir", str(tmp_path / "ck"), "--device", "cpu", "--max-update", "1", "--no-progress",
            "--arch", "luong_tiny"]
    res = CliRunner().invoke(train, args)
    assert res.exit_code == 1, res.output
    assert res.output.strip() == (f"nmtkit-train: error: {codes}: BPE codes do not match meta.json "
                                  "(cut short or edited after preprocessing?)"), res.output
    assert not (tmp_path / "ck" / "checkpoint_last.pt").exists()
    del meta["bpe"]["checksums"]  # as nmtkit-preprocess wrote it before the field existed
    (dest / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    res = CliRunner().invoke(train, args)
    assert res.exit_code == 0, res.output


_SIGNAL_WHILE_IMPORTING = """
import os, signal, sys
class Hook:
    def find_spec(self, name, path=None, target=None):
        if name == "{at}":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.{sig})
        return None
sys.meta_path.insert(0, Hook())
{run}
"""
_SIGNAL_WHILE_IMPORTING_TORCH = _SIGNAL_WHILE_IMPORTING.replace(
    "{run}", 'sys.argv[0] = "nmtkit-train"\nimport runpy\nrunpy.run_module("{module}", run_name="__main__")')
_SIGNAL_WHILE_IMPORTING_CLICK = _SIGNAL_WHILE_IMPORTING.replace(
    "{at}", "click").replace("{run}", "from nmtkit.launch import {entry}\n{entry}()")


@pytest.mark.parametrize("entry, prog", [("translate", "nmtkit-translate"), ("nmtkit", "nmtkit"), ("score", "nmtkit-score")])
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_before_the_command_module_has_loaded_is_an_interrupt(tmp_path, entry, prog, sig):
    """The console scripts import their command's module (click first) before any handler of
    nmtkit's exists: a Ctrl-C there was a traceback, a SIGTERM a death by the signal.
    nmtkit.launch guards that import: one line, status 130."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _SIGNAL_WHILE_IMPORTING_CLICK.format(sig=sig, entry=entry), "--help"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr == f"{prog}: interrupted\n"
    assert proc.stdout == ""


def test_a_sigterm_the_parent_ignores_stays_ignored_while_loading(tmp_path):
    """nohup-like parents pass SIGTERM on ignored: the launcher's guard must not turn it back on."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _SIGNAL_WHILE_IMPORTING_CLICK.format(sig="SIGTERM", entry="translate"),
                           "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))
    assert proc.returncode == 0, proc.stderr
    assert "Usage:" in proc.stdout


@pytest.mark.parametrize("module, argv", [("nmtkit.cli.train", []), ("nmtkit.cli.main", ["train"])])
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("at", ["torch", "numpy"])
def test_a_signal_while_train_imports_torch_is_an_interrupt(tmp_path, module, argv, sig, at):
    """``nmtkit-train`` imports torch and every model when its module loads (its model options are
    the models'), about a second before the command runs: a Ctrl-C then was a KeyboardInterrupt
    traceback (through ``nmtkit train``, a half-imported numpy's AttributeError or click's
    ``Aborted!``, status 1), a SIGTERM a death by the signal.  One during numpy's import, which
    torch's C start-up does and whose errors it swallows, was lost: the run went on."""
    import subprocess
    import sys

    code = _SIGNAL_WHILE_IMPORTING_TORCH.format(sig=sig, module=module, at=at)
    # a test run started in the background by a shell inherits SIGINT ignored, and so would the
    # command (as it should: a background job takes no Ctrl-C); the case here is a foreground one
    proc = subprocess.run([sys.executable, "-c", code, *argv, str(tmp_path / "bin")], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr == "nmtkit-train: interrupted\n"
