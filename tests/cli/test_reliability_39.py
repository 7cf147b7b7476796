"""Issue 39: a training log that never deletes what it did not write, paths from metadata
confined to their directory, and the last silent or misleading answers."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from nmtkit.errors import OutputError
from nmtkit.train.lock import LOCK_NAME
from nmtkit.train.run_log import append_record
from tests.helpers import run_train


def train_quick(data: Path, save: Path, *extra: str):  # noqa: ANN201
    """``run_train`` at luong_tiny's own dropout (0.1), on one thread."""
    return run_train(data, save, "--dropout", "0.1", "--threads", "1", *extra)


def error_line(output: str) -> str:
    """The output's one line, checked to be nmtkit's error and not a traceback."""
    lines = output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in output, output
    assert lines[0].startswith("nmtkit-") and ": error: " in lines[0], output
    return lines[0]


def log_records(save: Path) -> list[dict]:
    return [json.loads(line) for line in (save / "train_log.jsonl").read_text().splitlines()]


# -- 1. the training log ------------------------------------------------------------------------
FOREIGN_TEXT = "my notes about this run\nsecond line\n"
SHARED_LOG = '{"time": 1.0, "event": "start", "update": 0}\n{"time": 2.0, "event": "train", "update": 1, "loss": 3.5}\n'


@pytest.mark.parametrize("content", [FOREIGN_TEXT, SHARED_LOG], ids=["text-file", "shared-jsonl-log"])
@pytest.mark.parametrize("when", ["fresh", "resume"])
def test_a_symlinked_log_is_refused_and_its_target_kept(data_dir, tmp_path, content, when):
    save, elsewhere = tmp_path / "c", tmp_path / "elsewhere.txt"
    if when == "resume":
        assert train_quick(data_dir, save, "--max-update", "1").exit_code == 0
        (save / "train_log.jsonl").unlink()
    else:
        save.mkdir()
    elsewhere.write_text(content)
    (save / "train_log.jsonl").symlink_to(elsewhere)
    before = sorted(p.name for p in save.iterdir())
    res = train_quick(data_dir, save, "--max-update", "2")
    assert res.exit_code == 1
    line = error_line(res.output)
    assert line.startswith(f"nmtkit-train: error: {save / 'train_log.jsonl'}: is a symbolic link to {elsewhere}")
    assert elsewhere.read_text() == content and (save / "train_log.jsonl").is_symlink()
    assert sorted(p.name for p in save.iterdir()) == before  # nothing trained, no lock left


def test_a_hard_linked_log_is_refused(data_dir, tmp_path):
    save, shared = tmp_path / "c", tmp_path / "shared.jsonl"
    save.mkdir()
    shared.write_text(SHARED_LOG)
    os.link(shared, save / "train_log.jsonl")
    res = train_quick(data_dir, save, "--max-update", "1")
    assert res.exit_code == 1
    assert error_line(res.output) == (f"nmtkit-train: error: {save / 'train_log.jsonl'}: has 2 hard links: nmtkit "
                                      "appends to this file, and the other names would get its records; copy it or "
                                      "use another directory")
    assert shared.read_text() == SHARED_LOG


@pytest.mark.parametrize("foreign,lineno", [("# a comment I added\n", 1), ("\n", 1), ('{"event": "train"}\n', 1),
                                            ('{"time": NaN, "event": "x"}\n', 1), ("[1, 2]\n", 1),
                                            ("plain words without newline", 1)])
@pytest.mark.parametrize("when", ["fresh", "resume"])
def test_a_line_nmtkit_did_not_write_is_refused_before_training(data_dir, tmp_path, foreign, lineno, when):
    save = tmp_path / "c"
    if when == "resume":
        assert train_quick(data_dir, save, "--max-update", "1").exit_code == 0
        lineno += len(log_records(save))
    else:
        save.mkdir()
    log = save / "train_log.jsonl"
    with open(log, "a") as fh:
        fh.write(foreign)
    before = {p.name: p.read_bytes() for p in save.iterdir()}
    res = train_quick(data_dir, save, "--max-update", "3")
    assert res.exit_code == 1
    assert error_line(res.output).startswith(f"nmtkit-train: error: {log}:{lineno}: not a record of nmtkit's training log")
    assert {p.name: p.read_bytes() for p in save.iterdir()} == before  # the log, checkpoints: all as they were


def test_starting_over_keeps_the_earlier_runs_records_marked_superseded(data_dir, tmp_path):
    save = tmp_path / "c"
    assert train_quick(data_dir, save, "--max-update", "2", "--log-interval", "1").exit_code == 0
    for ckpt in save.glob("checkpoint*.pt"):
        ckpt.unlink()  # the earlier run's checkpoints are gone: the next run starts over
    earlier = log_records(save)
    res = train_quick(data_dir, save, "--max-update", "2", "--log-interval", "1")
    assert res.exit_code == 0, res.output
    after = log_records(save)
    assert [{k: v for k, v in r.items() if k != "superseded"} for r in after[: len(earlier)]] == earlier
    redone = [i + 1 for i, r in enumerate(earlier) if r["event"] not in ("start", "end")]
    assert [i + 1 for i, r in enumerate(after[: len(earlier)]) if r.get("superseded")] == redone
    assert not any(r.get("superseded") for r in after[len(earlier):])
    assert f"starting over: marked {len(redone)} record(s) of {save / 'train_log.jsonl'} superseded" in res.output


def test_records_after_the_checkpoint_are_marked_superseded_not_deleted_on_resume(data_dir, tmp_path):
    save = tmp_path / "c"
    assert train_quick(data_dir, save, "--max-update", "2", "--log-interval", "1").exit_code == 0
    log = save / "train_log.jsonl"
    checkpointed = log.read_text()
    # what a run killed after the checkpoint leaves: records of updates the resume redoes, and a torn one
    later = [{"time": 5.0, "event": "train", "update": 3, "loss": 2.5}, {"time": 6.0, "event": "interrupted", "update": 3}]
    torn = '{"time": 7.0, "event": "train", "upd'
    log.write_text(checkpointed + "".join(json.dumps(r) + "\n" for r in later) + torn)
    n = len(checkpointed.splitlines())
    res = train_quick(data_dir, save, "--max-update", "4", "--log-interval", "1")
    assert res.exit_code == 0, res.output
    assert (f"marked 2 record(s) of {log} superseded (lines {n + 1}, {n + 3}: updates this run redoes; kept, with "
            f"\"superseded\": true); line {n + 3} was torn by a kill and is kept as an \"event\": \"torn\" record") in res.output
    lines = log.read_text().splitlines()
    assert "\n".join(lines[:n]) + "\n" == checkpointed  # the checkpoint's records untouched, byte for byte
    assert json.loads(lines[n]) == {**later[0], "superseded": True}
    assert json.loads(lines[n + 1]) == later[1]  # run history stays current
    assert {k: v for k, v in json.loads(lines[n + 2]).items() if k != "time"} == {"event": "torn", "superseded": True,
                                                                                  "text": torn}
    current = [r["update"] for r in map(json.loads, lines) if r["event"] == "train" and not r.get("superseded")]
    assert current == [1, 2, 3, 4]


def test_the_log_is_never_written_through_a_link_that_appears_later(tmp_path):
    target, log = tmp_path / "other.txt", tmp_path / "train_log.jsonl"
    target.write_text("kept\n")
    log.symlink_to(target)
    with pytest.raises(OutputError) as err:
        append_record(log, {"event": "train"})
    assert str(err.value).startswith(f"{log}: ") and target.read_text() == "kept\n"


@pytest.mark.parametrize("name", ["checkpoint_last.pt", "checkpoint_best.pt", "checkpoint1.pt", "learning_curve.png"])
def test_a_save_dir_file_that_is_a_link_is_refused_not_written_through(data_dir, tmp_path, name):
    save, other = tmp_path / "c", tmp_path / "someone_elses"
    assert train_quick(data_dir, tmp_path / "first", "--max-epoch", "1").exit_code == 0
    other.write_bytes((tmp_path / "first" / "checkpoint_last.pt").read_bytes())
    save.mkdir()
    if name == "checkpoint_last.pt":  # a resumable checkpoint reached through a link: its file must not be replaced
        for f in (tmp_path / "first").iterdir():
            if f.name != LOCK_NAME:
                (save / f.name).write_bytes(f.read_bytes())
        (save / name).unlink()
    (save / name).symlink_to(other)
    before = other.read_bytes()
    res = train_quick(data_dir, save, "--max-epoch", "2")
    assert res.exit_code == 1
    assert error_line(res.output).startswith(f"nmtkit-train: error: {save / name}: is a symbolic link to {other}")
    assert other.read_bytes() == before and not (save / LOCK_NAME).exists()


# -- 2. names from meta.json stay inside the data directory -------------------------------------
def _edit_meta(data: Path, edit) -> Path:  # noqa: ANN001
    meta_path = data / "meta.json"
    meta = json.loads(meta_path.read_text())
    edit(meta)
    meta_path.write_text(json.dumps(meta))
    return meta_path


def _rename_split(meta: dict, name: str) -> None:
    meta["splits"][name] = meta["splits"].pop("valid")


def _bpe_codes(codes: str):  # noqa: ANN202
    return lambda m: m.update(bpe={"type": "subword-nmt", "codes": {"en": codes, "de": codes}})


ESCAPES = ["../evil", "../../evil", "/tmp/evil", "sub/../../evil", "..", "a/b", "nul\0byte"]
#: Split names were not checked at all; language codes and BPE codes were, except for a NUL byte
#: (a ValueError traceback).  Their ``..`` and absolute paths are tested in test_schema.py.
META_PATH_FIELDS = {
    **{f"split-{name!r}": (lambda m, n=name: _rename_split(m, n), "field 'splits' has a key that must be a split name")
       for name in ESCAPES},
    "source_lang-nul": (lambda m: m.update(source_lang="e\0n"), "field 'source_lang' must be a language code"),
    "target_lang-nul": (lambda m: m.update(target_lang="d\0e"), "field 'target_lang' must be a language code"),
    "bpe.codes-nul": (_bpe_codes("bpe\0codes"), "field 'bpe.codes.en' must be a file name inside the data directory"),
}


@pytest.mark.parametrize("case", list(META_PATH_FIELDS))
def test_every_name_in_meta_json_that_becomes_a_path_is_confined(data_dir, tmp_path, case):
    edit, expected = META_PATH_FIELDS[case]
    for f in data_dir.glob("valid.*"):  # a real split outside the data directory, where ../evil leads
        (tmp_path / f.name.replace("valid", "evil")).write_bytes(f.read_bytes())
    meta_path = _edit_meta(data_dir, edit)
    valid = next((k for k in json.loads(meta_path.read_text())["splits"] if k != "train"), "valid")
    res = train_quick(data_dir, tmp_path / "ck", "--max-update", "1", "--valid-subset", valid)
    assert res.exit_code == 1, res.output
    line = error_line(res.output)
    assert line.startswith(f"nmtkit-train: error: {meta_path}: {expected}"), line
    assert not (tmp_path / "ck").exists()


@pytest.mark.parametrize("cmd", ["translate", "score", "align"])
def test_a_split_leading_out_of_the_data_directory_is_refused_by_every_reader(data_dir, tmp_path, cmd):
    from tests.helpers import make_checkpoint

    from nmtkit.cli.align import command as align
    from nmtkit.cli.score import command as score
    from nmtkit.cli.translate import command as translate

    for f in data_dir.glob("valid.*"):
        (tmp_path / f.name.replace("valid", "evil")).write_bytes(f.read_bytes())
    meta_path = _edit_meta(data_dir, lambda m: _rename_split(m, "../evil"))
    ckpt = make_checkpoint(tmp_path / "m.pt")
    common = ["--path", str(ckpt), "--data", str(data_dir), "--device", "cpu"]
    if cmd == "translate":
        res = CliRunner().invoke(translate, common, input="a\n")
    else:
        res = CliRunner().invoke(score if cmd == "score" else align, [*common, "--split", "../evil"])
    assert res.exit_code == 1, res.output
    assert error_line(res.output).startswith(f"nmtkit-{cmd}: error: {meta_path}: field 'splits' has a key")


# -- 3. silent or misleading answers --------------------------------------------------------------
LENGTH_COMBINATIONS = [
    (["--max-len-a", "0", "--max-len-b", "0"], "--max-len-a 0 --max-len-b 0 allow no output token for a one-token "
                                               "source (int(0 * 1 + 0) = 0): its translation would be empty; raise --max-len-b"),
    (["--max-len-a", "0.5", "--max-len-b", "0"], "--max-len-a 0.5 --max-len-b 0 allow no output token"),
    (["--max-len-a", "0", "--max-len-b", "3", "--min-len", "4"],
     "--min-len 4 is above the output bound of a one-token source (int(0 * 1 + 3) = 3, from --max-len-a and "
     "--max-len-b): such translations would be cut at the bound; lower --min-len or raise --max-len-b"),
    (["--min-len", "12"], "--min-len 12 is above the output bound of a one-token source (int(1.5 * 1 + 10) = 11"),
]


@pytest.mark.parametrize("args,message", LENGTH_COMBINATIONS, ids=[" ".join(a) for a, _ in LENGTH_COMBINATIONS])
def test_lengths_that_leave_no_room_are_a_usage_error(random_ckpt, args, message):
    from nmtkit.cli.translate import command as translate
    from nmtkit.errors import NmtkitError
    from nmtkit.generate.search_options import SearchOptions

    res = CliRunner().invoke(translate, ["--path", str(random_ckpt), *args], input="the cat\n")
    assert res.exit_code == 2, res.output
    assert error_line(res.output).startswith(f"nmtkit-translate: error: {message}")
    values = dict(zip(args[::2], args[1::2]))
    kw = {k[2:].replace("-", "_"): (float(v) if k == "--max-len-a" else int(v)) for k, v in values.items()}
    with pytest.raises(NmtkitError, match="^" + message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")
                       .replace("+", r"\+").replace(".", r"\.")):
        SearchOptions(**kw)



SCORE_TYPE_ERRORS = [
    (["a b c"], "a b c", "score(): refs must be a list of str lines, not one str (wrap a single line in a list)"),
    ("a b c", ["a b c"], "score(): hyps must be a list of str lines, not one str"),
    ([b"a b"], ["a b"], "score(): hyps[0] must be a str line, not bytes"),
    (["a b", "c"], ["a b", None], "score(): refs[1] must be a str line, not NoneType"),
    (["a b"], [["a b"], "a b"], "score(): refs[0] must be a str line, not list"),
    (["a b"], [["a b"], [3]], "score(): refs[1][0] must be a str line, not int"),
    (["a b"], None, "score(): refs must be a list of str lines, not NoneType"),
]


@pytest.mark.parametrize("hyps,refs,message", SCORE_TYPE_ERRORS)
def test_score_checks_the_types_of_its_text_arguments(hyps, refs, message):
    import nmtkit

    with pytest.raises(TypeError) as err:
        nmtkit.score(hyps, refs)
    assert str(err.value).startswith(message)


@pytest.mark.parametrize("which", ["aligner", "scorer"])
def test_model_library_functions_refuse_one_string_for_lines(random_ckpt, which):
    from nmtkit.generate.aligner import Aligner
    from nmtkit.generate.scorer import Scorer

    if which == "aligner":
        call = Aligner.from_checkpoint(str(random_ckpt), device="cpu").align
    else:
        call = Scorer.from_checkpoint(str(random_ckpt), device="cpu").score_lines
    with pytest.raises(TypeError, match=r"^src_lines must be a list of str lines, not one str"):
        call("the cat", ["die Katze"])
    with pytest.raises(TypeError, match=r"^tgt_lines\[0\] must be a str line, not NoneType"):
        call(["the cat"], [None])


def test_score_help_says_plot_takes_a_file_not_stdout():
    from nmtkit.cli.score import command as score

    res = CliRunner().invoke(score, ["text", "--help"], terminal_width=200)
    assert res.exit_code == 0
    help_line = " ".join(re.split(r"--plot\s+PNG", res.output, maxsplit=1)[1].split("--labels", 1)[0].replace("│", " ").split())
    assert help_line == ("Write a PNG of BLEU by length for every system to this file (implies --by-length). A file, "
                         "not '-': the scores go to standard output.")
    refused = CliRunner().invoke(score, ["text", "--sys", "h", "--ref", "r", "--plot", "-"])
    assert refused.exit_code == 1 and "--plot -: the scores are written to standard output" in refused.output


#: The documented bound (README, nmtkit.evaluate.metrics.MAX_TER_WORDS).
MAX_TER_WORDS = 1000


@pytest.mark.parametrize("where,extra", [("sys", []), ("ref", []), ("sys", ["--sentence-level"]),
                                         ("ref", ["--paired-bootstrap"])])
def test_ter_refuses_a_line_beyond_its_bound_naming_file_and_line(tmp_path, where, extra):
    from nmtkit.cli.score import command as score

    long_line = " ".join(["w"] * (MAX_TER_WORDS + 1))
    lines = {"sys": ["a b", "c d", "e f"], "ref": ["a b", "c d", "e f"]}
    lines[where][1] = long_line
    files = {k: tmp_path / f"{k}.txt" for k in lines}
    for k, f in files.items():
        f.write_text("\n".join(lines[k]) + "\n")
    sys_args = ["--sys", str(files["sys"])] * (2 if "--paired-bootstrap" in extra else 1)
    res = CliRunner().invoke(score, ["text", *sys_args, "--ref", str(files["ref"]), "--metrics", "bleu,ter",
                                     *(["--bootstrap-samples", "2"] if "--paired-bootstrap" in extra else []),
                                     *(["--labels", "a,b"] if "--paired-bootstrap" in extra else []), *extra])
    assert res.exit_code == 1, res.output
    assert error_line(res.output) == (f"nmtkit-score: error: {files[where]}:2: {MAX_TER_WORDS + 1} words: TER scores "
                                      f"lines of at most {MAX_TER_WORDS} words (its edit distance holds a words x words "
                                      "table); split the line, or score it without ter")


def test_ter_bound_in_the_library_and_a_long_line_without_ter():
    import nmtkit
    from nmtkit.errors import InputError

    long_line = " ".join(["w"] * (MAX_TER_WORDS + 1))
    with pytest.raises(InputError, match=rf"^references 1:1: {MAX_TER_WORDS + 1} words: TER scores lines of at most"):
        nmtkit.score(["a"], [long_line], "ter")
    assert nmtkit.score([long_line], [long_line], "bleu")["bleu"].score == pytest.approx(100.0)


@pytest.mark.parametrize("appears", ["finished-output", "file"])
def test_preprocess_never_replaces_a_destdir_that_appeared_meanwhile(tiny_parallel, tmp_path, monkeypatch, appears):
    """Two nmtkit-preprocess into the same new --destdir: the later one replaced the first one's
    finished output without --overwrite."""
    import nmtkit.data.preprocess as pre
    from nmtkit.cli.preprocess import command as preprocess

    dest = tmp_path / "bin"
    real = pre._build_dictionaries

    def other_run_finishes_first(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if appears == "file":
            dest.write_text("someone's file\n")
        else:
            dest.mkdir()
            (dest / "meta.json").write_text('{"format": "nmtkit-data", "other": "run"}\n')
        return real(*args, **kwargs)

    monkeypatch.setattr(pre, "_build_dictionaries", other_run_finishes_first)
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(tiny_parallel / "train"),
                                          "--destdir", str(dest)])
    assert res.exit_code == 1, res.output
    assert error_line(res.output) == (f"nmtkit-preprocess: error: {dest}: appeared while this run was writing it "
                                      "(another run into the same directory?) and is left as it is: use another "
                                      "directory, or --overwrite to replace it")
    if appears == "file":
        assert dest.read_text() == "someone's file\n"
    else:
        assert [p.name for p in dest.iterdir()] == ["meta.json"] and "other" in (dest / "meta.json").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "raw"]  # no temporary directory left


@pytest.mark.parametrize("kind", ["dangling-link", "link-to-a-file", "directory", "fifo"])
def test_a_lock_that_is_not_a_lock_file_is_named_for_what_it_is(data_dir, tmp_path, kind):
    save, lock = tmp_path / "c", tmp_path / "c" / LOCK_NAME
    save.mkdir()
    expected = {
        "dangling-link": f"{lock} is a symbolic link to {tmp_path / 'gone'}, which does not exist, not a lock file "
                         "nmtkit-train wrote: remove the link",
        "link-to-a-file": f"{lock} is a symbolic link to {tmp_path / 'notes.txt'}, not a lock file nmtkit-train "
                          "wrote: remove the link",
        "directory": f"{lock} is a directory, not a lock file nmtkit-train wrote: remove it",
        "fifo": f"{lock} is not a regular file (a device, pipe or socket), not a lock file nmtkit-train wrote: remove it",
    }[kind]
    if kind == "dangling-link":
        lock.symlink_to(tmp_path / "gone")
    elif kind == "link-to-a-file":
        (tmp_path / "notes.txt").write_text("12345 otherhost\n")
        lock.symlink_to(tmp_path / "notes.txt")
    elif kind == "directory":
        lock.mkdir()
    else:
        os.mkfifo(lock)
    res = train_quick(data_dir, save, "--max-update", "1")
    assert res.exit_code == 1
    assert error_line(res.output) == f"nmtkit-train: error: {expected}"
    assert os.path.lexists(lock) and not any(save.glob("*.pt"))
    if kind == "link-to-a-file":
        assert (tmp_path / "notes.txt").read_text() == "12345 otherhost\n"


INVISIBLE_CASES = [
    ("the cat\u200b sits .", "the cat sits ."),  # zero width space after a word
    ("the \u200b cat sits .", "the cat sits ."),  # ... standing alone
    ("the c\u200bat sits .", "the cat sits ."),  # ... inside a word
    ("the cat\ufeff sits .", "the cat sits ."),  # a byte-order mark inside the line
    ("the cat sits\u2060 .", "the cat sits ."),  # word joiner
    ("the cat\u200c sits .", "the cat sits ."),  # a non-joiner beside a space joins nothing
    ("the \u200dcat sits .", "the cat sits ."),  # nor a joiner
]


@pytest.mark.parametrize("tokenizer", ["none", "moses"])
@pytest.mark.parametrize("line,clean", INVISIBLE_CASES)
def test_invisible_characters_are_dropped_by_the_text_pipeline(line, clean, tokenizer):
    from nmtkit.data.text_pipeline import TextPipeline, split_words

    pipe = TextPipeline("en", tokenizer=tokenizer)
    assert pipe.tokenize(line) == pipe.tokenize(clean)
    assert split_words(line) == split_words(clean)


def test_joiners_between_two_characters_are_kept():
    """Persian spelling and emoji sequences need them: only a joiner that joins nothing goes."""
    from nmtkit.data.text_pipeline import split_words

    assert split_words("\u200cمی\u200cخواهم \u200d") == ["می\u200cخواهم"]


def test_invisible_characters_never_become_dictionary_entries(tmp_path):
    from nmtkit.cli.preprocess import command as preprocess

    raw = tmp_path / "raw"
    raw.mkdir()
    en = [line for line, _ in INVISIBLE_CASES]
    (raw / "train.en").write_text("\n".join(en) + "\n")
    (raw / "train.de").write_text("\n".join(["die Katze\u200b sitzt ."] * len(en)) + "\n")
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(raw / "train"),
                                          "--destdir", str(tmp_path / "bin"), "--tokenizer", "none"])
    assert res.exit_code == 0, res.output
    for lang, words in (("en", {"the", "cat", "sits", "."}), ("de", {"die", "Katze", "sitzt", "."})):
        entries = {line.split(" ")[0] for line in (tmp_path / "bin" / f"dict.{lang}.txt").read_text().splitlines()}
        assert entries == words, entries


@pytest.mark.parametrize("name,args", [("score", ["--sys", "hyp.txt", "--ref", "ref.txt"]),
                                       ("translate", ["--path", "model.pt"]),
                                       ("train", ["bin", "--arch", "luong_tiny", "--save-dir", "ck"])])
@pytest.mark.parametrize("pwd", ["set", "stale"])
def test_a_deleted_working_directory_is_one_line_before_anything_else(tmp_path, name, args, pwd):
    import subprocess
    import sys

    cwd = tmp_path / "was_here"
    cwd.mkdir()

    def start_in_a_deleted_directory() -> None:
        os.chdir(cwd)
        os.rmdir(cwd)

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PWD": str(cwd) if pwd == "set" else str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", f"from nmtkit.launch import {name}; {name}()", *args],
                          preexec_fn=start_in_a_deleted_directory, env=env, capture_output=True, text=True,
                          input="a\n", timeout=300)
    assert proc.returncode == 1 and proc.stdout == ""
    named = f" {cwd}" if pwd == "set" else ""
    assert error_line(proc.stderr) == (f"nmtkit-{name}: error: the working directory{named} no longer exists "
                                       "(deleted or moved away?): cd into an existing one")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("rank", ["0", "1"])
def test_a_torchrun_environment_whose_peers_never_come_ends_after_dist_timeout(data_dir, tmp_path, rank):
    import subprocess
    import sys
    import time

    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WORLD_SIZE": "2", "RANK": rank, "LOCAL_RANK": rank,
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "nmtkit.cli.train", str(data_dir), "--arch", "luong_tiny",
                           "--save-dir", str(tmp_path / "ck"), "--device", "cpu", "--no-progress", "--threads", "1",
                           "--dist-timeout", "3"], env=env, capture_output=True, text=True, timeout=240)
    assert time.monotonic() - start < 120
    assert proc.returncode == 1, proc.stderr
    waiting, line = proc.stderr.strip().splitlines()  # what it waits for, then the one-line error (no C++ frames)
    assert waiting == (f"rank {rank}: waiting up to 3 s (--dist-timeout) for the 2 processes of WORLD_SIZE to join "
                       f"at 127.0.0.1:{port}")
    assert line.startswith(f"nmtkit-train: error: rank {rank} of WORLD_SIZE 2: the processes did not all join at "
                           f"127.0.0.1:{port} within --dist-timeout 3 s (")
    assert line.endswith("); start every process (torchrun --nproc-per-node), or raise --dist-timeout")
    assert not (tmp_path / "ck").exists()


def test_a_refused_log_or_a_linked_config_leaves_the_save_dirs_config_as_it_was(data_dir, tmp_path):
    """config.yaml is rewritten by every run: not through a link, and not by a run refused later."""
    save, elsewhere = tmp_path / "c", tmp_path / "my.yaml"
    assert train_quick(data_dir, save, "--max-update", "1").exit_code == 0
    config = (save / "config.yaml").read_bytes()
    with open(save / "train_log.jsonl", "a") as fh:
        fh.write("# my note\n")
    res = train_quick(data_dir, save, "--max-update", "2", "--lr", "0.5")
    assert res.exit_code == 1 and "not a record of nmtkit's training log" in error_line(res.output)
    assert (save / "config.yaml").read_bytes() == config
    (save / "train_log.jsonl").write_text("")
    elsewhere.write_text("mine: 1\n")
    (save / "config.yaml").unlink()
    (save / "config.yaml").symlink_to(elsewhere)
    res = train_quick(data_dir, save, "--max-update", "2")
    assert res.exit_code == 1
    assert error_line(res.output).startswith(f"nmtkit-train: error: {save / 'config.yaml'}: is a symbolic link to {elsewhere}")
    assert elsewhere.read_text() == "mine: 1\n"
