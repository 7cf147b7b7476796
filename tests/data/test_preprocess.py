"""nmtkit-preprocess end to end: layout, BPE consistency, filters, and every bad-input case."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nmtkit.cli.preprocess import command
from nmtkit.data.dataset import DataDir, collate, make_batches
from nmtkit.data.text_pipeline import merge_bpe

from tests.helpers import write


def run(args: list[str]):
    return CliRunner().invoke(command, args, catch_exceptions=False)


def base_args(raw: Path, dest: Path, *extra: str) -> list[str]:
    return ["-s", "en", "-t", "de", "--trainpref", str(raw / "train"), "--validpref", str(raw / "valid"),
            "--testpref", str(raw / "test"), "--destdir", str(dest), *extra]


def test_layout_and_roundtrip(tiny_parallel, tmp_path):
    dest = tmp_path / "bin"
    res = run(base_args(tiny_parallel, dest, "--tokenizer", "moses", "--workers", "2"))
    assert res.exit_code == 0, res.output
    names = {p.name for p in dest.iterdir()}
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            assert {f"{split}.en-de.{lang}.bin", f"{split}.en-de.{lang}.idx", f"{split}.en-de.{lang}.tok"} <= names
    meta = json.loads((dest / "meta.json").read_text())
    assert meta["format_version"] == 1 and meta["splits"]["test"]["sentences"] == 6
    assert dest.stat().st_mode & 0o755 == 0o755  # not left private like a temp dir
    data = DataDir(dest)
    ds = data.load_split("test")
    src_lines = (tiny_parallel / "test.en").read_text().splitlines()
    for k, line in enumerate(src_lines):
        assert data.src_dict.decode(ds[k][0].tolist()) == line.split()
    assert ds.tokens_text("en") == src_lines


def test_bpe_applied_consistently_and_reversible(tiny_parallel, tmp_path):
    dest = tmp_path / "bin"
    assert run(base_args(tiny_parallel, dest, "--bpe", "subword-nmt", "--bpe-merges", "15")).exit_code == 0
    data = DataDir(dest)
    pipe = data.pipeline("en")
    ds = data.load_split("valid")
    lines = (tiny_parallel / "valid.en").read_text().splitlines()
    saw_split = False
    for k, line in enumerate(lines):
        pieces = data.src_dict.decode(ds[k][0].tolist())
        assert pieces == pipe.encode(line)[1]  # translate-time pipeline == preprocess-time
        assert merge_bpe(pieces) == line.split()
        saw_split |= any(p.endswith("@@") for p in pieces)
    assert saw_split
    assert (dest / "bpe.codes").is_file()


def test_length_filter_reports_counts(tmp_path):
    raw = tmp_path / "raw"
    long = " ".join(["w"] * 60)
    write(raw / "train.en", f"a b\n{long}\n\nx\n")
    write(raw / "train.de", "a b\nc\nq\nx y z w v u t s r q p\n")
    dest = tmp_path / "bin"
    res = run(["-s", "en", "-t", "de", "--trainpref", str(raw / "train"), "--destdir", str(dest), "--max-len-ratio", "5"])
    assert res.exit_code == 0, res.output
    removed = json.loads((dest / "meta.json").read_text())["splits"]["train"]["removed"]
    assert removed == {"empty": 1, "too_long": 1, "bad_ratio": 1}
    assert "1 empty" in res.output


def test_only_newline_splits_lines(tmp_path):
    raw = tmp_path / "raw"
    write(raw / "train.en", "a\rb c\u2028d\n\x85e f\n".encode("utf-8"))
    write(raw / "train.de", "x\ny\n")
    dest = tmp_path / "bin"
    assert run(["-s", "en", "-t", "de", "--trainpref", str(raw / "train"), "--destdir", str(dest)]).exit_code == 0
    assert json.loads((dest / "meta.json").read_text())["splits"]["train"]["sentences"] == 2


@pytest.mark.parametrize(
    "en, de, message",
    [
        ("a\nb\nc\n", "a\nb\n", r"train\.en has 3 lines, .*train\.de has 2 lines"),
        (b"a\nb\xff\n", "a\nb\n", r"train\.en:2: invalid UTF-8"),
        ("", "", r"train\.en: file is empty"),
        ("a\n\nb\n", "a\nb\nc\n", r"train\.en:2: empty line in training data"),
    ],
    ids=["line-count", "utf8", "empty-file", "strict-empty-line"],
)
def test_bad_input_one_line_error_and_nothing_written(tmp_path, en, de, message):
    raw = tmp_path / "raw"
    write(raw / "train.en", en)
    write(raw / "train.de", de)
    dest = tmp_path / "bin"
    res = CliRunner().invoke(command, ["-s", "en", "-t", "de", "--trainpref", str(raw / "train"), "--destdir", str(dest), "--strict"])
    assert res.exit_code == 1
    err_lines = [l for l in res.output.splitlines() if l.strip()]
    assert len(err_lines) == 1 and err_lines[0].startswith("nmtkit-preprocess: error:")
    import re
    assert re.search(message, err_lines[0]), err_lines[0]
    assert not dest.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".bin.")]  # no temp dir left


def test_missing_file(tmp_path):
    res = CliRunner().invoke(command, ["-s", "en", "-t", "de", "--trainpref", str(tmp_path / "nope"), "--destdir", str(tmp_path / "o")])
    assert res.exit_code == 1 and "nope.en: no such file" in res.output


def test_refuses_nonempty_destdir_unless_overwrite(tiny_parallel, tmp_path):
    dest = tmp_path / "bin"
    assert run(base_args(tiny_parallel, dest)).exit_code == 0
    write(dest / "stale.txt", "from an old run")
    res = CliRunner().invoke(command, base_args(tiny_parallel, dest))
    assert res.exit_code == 1 and "not empty" in res.output and "--overwrite" in res.output
    assert (dest / "stale.txt").exists()
    assert run(base_args(tiny_parallel, dest, "--overwrite")).exit_code == 0
    assert not (dest / "stale.txt").exists() and (dest / "meta.json").exists()


def test_overwrite_never_replaces_a_directory_nmtkit_did_not_write(tiny_parallel, tmp_path):
    # --overwrite replaces only a data directory (nmtkit's meta.json); someone's files are kept
    dest = tmp_path / "bin"
    write(dest / "precious.txt", "keep me")
    for extra in ([], ["--overwrite"]):
        res = CliRunner().invoke(command, base_args(tiny_parallel, dest, *extra))
        assert res.exit_code == 1 and "not written by nmtkit-preprocess" in res.output
        assert "use --overwrite" not in res.output
        assert (dest / "precious.txt").read_text() == "keep me"


def test_failed_overwrite_keeps_old_output(tiny_parallel, tmp_path):
    dest = tmp_path / "bin"
    assert run(base_args(tiny_parallel, dest)).exit_code == 0
    before = (dest / "meta.json").read_text()
    write(tiny_parallel / "test.de", b"\xff\n")
    res = CliRunner().invoke(command, base_args(tiny_parallel, dest, "--overwrite"))
    assert res.exit_code == 1 and "test.de:1: invalid UTF-8" in res.output
    assert (dest / "meta.json").read_text() == before


def test_reuse_dictionaries(tiny_parallel, tmp_path):
    first = tmp_path / "a"
    assert run(base_args(tiny_parallel, first, "--thresholdsrc", "2")).exit_code == 0
    second = tmp_path / "b"
    res = run(["-s", "en", "-t", "de", "--testpref", str(tiny_parallel / "test"), "--destdir", str(second),
               "--srcdict", str(first / "dict.en.txt"), "--tgtdict", str(first / "dict.de.txt")])
    assert res.exit_code == 0, res.output
    assert DataDir(second).src_dict == DataDir(first).src_dict


def test_batches_cover_every_pair_once_within_budget(tiny_parallel, tmp_path):
    dest = tmp_path / "bin"
    assert run(base_args(tiny_parallel, dest)).exit_code == 0
    ds = DataDir(dest).load_split("train")
    batches = make_batches(ds.src_sizes, ds.tgt_sizes, max_tokens=16, seed=3, epoch=2)
    assert sorted(i for b in batches for i in b) == list(range(len(ds)))
    assert batches == make_batches(ds.src_sizes, ds.tgt_sizes, max_tokens=16, seed=3, epoch=2)
    for b in batches:
        batch = collate([ds[i] for i in b], b)
        assert batch.src_tokens.numel() <= 16 or len(b) == 1
        assert (batch.prev_output_tokens[:, 0] == 1).all()
        assert batch.ntokens == int((batch.target != 0).sum())


def test_reuse_bpe_codes_of_the_other_direction(tiny_parallel, tmp_path):
    fwd = tmp_path / "en-de"
    assert run(base_args(tiny_parallel, fwd, "--bpe", "subword-nmt", "--bpe-merges", "15")).exit_code == 0
    rev = tmp_path / "de-en"
    res = run(["-s", "de", "-t", "en", "--trainpref", str(tiny_parallel / "train"), "--destdir", str(rev),
               "--bpe", "subword-nmt", "--bpe-codes", str(fwd / "bpe.codes")])
    assert res.exit_code == 0, res.output
    assert (rev / "bpe.codes").read_text() == (fwd / "bpe.codes").read_text()
    line = "eine Katze sieht den Hund ."
    assert DataDir(rev).pipeline("de").encode(line) == DataDir(fwd).pipeline("de").encode(line)


@pytest.mark.parametrize("lang", ["en", "de", "fr", "cs", "fi"])
def test_moses_fast_path_for_letters_and_digits_is_exact(lang):
    """TextPipeline.tokenize returns a word of Moses's letters and digits as its own token without
    running Moses: the same result Moses gives, for random such words and for mixed ones."""
    import random

    from sacremoses import MosesTokenizer

    from nmtkit.data.text_pipeline import TextPipeline, _moses_alnum

    rng = random.Random(0)
    letters = sorted(_moses_alnum())
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(1, 9))) for _ in range(3000)]
    words += ["Straße", "naïve", "x86", "e.g.", "don't", "3,5", "über-all", "ᚑධͻᜟ", "夏目", "a b", "DOTMULTI", "fooDOTDOTMULTIbar"]
    moses = MosesTokenizer(lang=lang)
    for lowercase in (False, True):
        pipe = TextPipeline(lang=lang, tokenizer="moses", lowercase=lowercase)
        for w in words:
            want = moses.tokenize(w, escape=False)
            assert pipe.tokenize(w) == ([t.lower() for t in want] if lowercase else want), w


def test_a_high_unknown_word_rate_on_valid_is_a_warning_naming_the_flags(tmp_path):
    from click.testing import CliRunner

    from nmtkit.cli.preprocess import command as preprocess

    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "train.en").write_text("the cat sits .\nthe dog runs .\n" * 3, encoding="utf-8")
    (raw / "train.de").write_text("die Katze sitzt .\nder Hund läuft .\n" * 3, encoding="utf-8")
    (raw / "valid.en").write_text("the cat sits.\nthe dog sits .\n", encoding="utf-8")  # 'sits.': unseen as a word
    (raw / "valid.de").write_text("die Katze sitzt .\nder Hund läuft .\n", encoding="utf-8")
    args = ["-s", "en", "-t", "de", "--trainpref", str(raw / "train"), "--validpref", str(raw / "valid")]
    res = CliRunner().invoke(preprocess, [*args, "--destdir", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    warning = [line for line in res.output.splitlines() if line.startswith("warning:")]
    assert warning == ["warning: valid: 14.3% of en tokens are <unk> (unknown to the dictionary, which the model cannot "
                       "output); add --tokenizer moses --bpe subword-nmt (or --bpe sentencepiece)"]
    quiet = CliRunner().invoke(preprocess, [*args, "--destdir", str(tmp_path / "b"), "--bpe", "subword-nmt",
                                            "--bpe-merges", "50", "--tokenizer", "moses"])
    assert quiet.exit_code == 0 and "warning:" not in quiet.output, quiet.output
