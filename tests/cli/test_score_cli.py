"""``nmtkit score`` through click: happy paths, every bad-input case, and model scoring."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import sacrebleu
from click.testing import CliRunner

from nmtkit.cli.score import command

HYP = ["The cat sat on the mat.", "A quick brown fox jumps over a lazy dog.", "He went home.",
       "Economic growth has slowed in recent years."]
REF = ["The cat sat on a mat.", "The quick brown fox jumps over the lazy dog.", "He went home early.",
       "Economic growth has slowed down in recent years."]
HYP2 = ["The cat sat on a mat.", "The quick brown fox jumps over the lazy dog.", "He went home early.",
        "Growth slowed."]
SRC = ["a b c", "a b c d e f g h i j k l", "a", "a b c d e f g h i j k l m n o p q r s t u"]


def write(path: Path, lines: list[str] | bytes) -> str:
    if isinstance(lines, bytes):
        path.write_bytes(lines)
    else:
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    return {
        "hyp": write(tmp_path / "hyp.txt", HYP),
        "hyp2": write(tmp_path / "hyp2.txt", HYP2),
        "ref": write(tmp_path / "ref.txt", REF),
        "src": write(tmp_path / "src.txt", SRC),
    }


def run(args: list[str], stdin: str | None = None):  # noqa: ANN201
    return CliRunner().invoke(command, args, input=stdin, catch_exceptions=False)


def fails_with(args: list[str], *fragments: str, stdin: str | None = None) -> str:
    res = run(args, stdin)
    assert res.exit_code == 1, res.output
    assert res.stdout == ""  # nothing scored
    err = res.stderr.strip()
    assert err.startswith("nmtkit-score: error: ") and "\n" not in err
    for f in fragments:
        assert f in err
    return err


# -- happy paths ---------------------------------------------------------------------------
def test_corpus_scores_lines(files: dict[str, str]) -> None:
    res = run(["--sys", files["hyp"], "--ref", files["ref"]])
    assert res.exit_code == 0, res.output
    lines = [line.split("\t") for line in res.stdout.splitlines()]
    assert [(f[0], f[1]) for f in lines] == [(files["hyp"], "BLEU"), (files["hyp"], "chrF2")]
    assert float(lines[0][2]) == pytest.approx(sacrebleu.corpus_bleu(HYP, [REF]).score, abs=0.006)
    assert float(lines[1][2]) == pytest.approx(sacrebleu.corpus_chrf(HYP, [REF]).score, abs=0.006)
    assert lines[0][3].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert res.stderr == ""  # each figure once: no table beside the lines of a pipe


def test_system_from_stdin_json_multi_ref_and_ter(files: dict[str, str]) -> None:
    res = run(["--ref", files["ref"], "--ref", files["hyp2"], "--metrics", "bleu,ter", "--json"],
              stdin="\n".join(HYP) + "\n")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    (system,) = out["systems"]
    assert system["label"] == "stdin" and system["file"] == "<stdin>"
    assert set(system["scores"]) == {"bleu", "ter"}
    bleu = system["scores"]["bleu"]
    assert bleu["score"] == pytest.approx(sacrebleu.corpus_bleu(HYP, [REF, HYP2]).score)
    assert "nrefs:2" in bleu["signature"]
    assert system["scores"]["ter"]["name"] == "TER"


def test_tokenized_and_lowercase_flags(files: dict[str, str], tmp_path: Path) -> None:
    hyp = write(tmp_path / "tok.hyp", ["THE CAT SAT ON THE MAT ."])
    ref = write(tmp_path / "tok.ref", ["the cat sat on the mat ."])
    res = run(["--sys", hyp, "--ref", ref, "--tokenized", "--lowercase", "--metrics", "bleu", "--json"])
    bleu = json.loads(res.stdout)["systems"][0]["scores"]["bleu"]
    assert bleu["score"] == pytest.approx(100.0)
    assert "tok:none" in bleu["signature"] and "case:lc" in bleu["signature"]


def test_sentence_level(files: dict[str, str]) -> None:
    res = run(["--sys", files["hyp"], "--sys", files["hyp2"], "--ref", files["ref"], "--sentence-level"])
    assert res.exit_code == 0, res.output
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    assert len(rows) == len(HYP) and all(len(r) == 4 for r in rows)  # 2 systems x (BLEU, chrF)
    for k, row in enumerate(rows):
        assert float(row[0]) == pytest.approx(sacrebleu.sentence_bleu(HYP[k], [REF[k]]).score, abs=0.006)
        assert float(row[2]) == pytest.approx(sacrebleu.sentence_bleu(HYP2[k], [REF[k]]).score, abs=0.006)


def test_by_length_with_source_plot_and_labels(files: dict[str, str], tmp_path: Path, saved_figures: dict) -> None:
    png = tmp_path / "plots" / "len.png"
    res = run(["--sys", files["hyp"], "--sys", files["hyp2"], "--ref", files["ref"], "--src", files["src"],
               "--buckets", "5,20", "--plot", str(png), "--labels", "base,better", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [s["label"] for s in out["systems"]] == ["base", "better"]
    buckets = out["systems"][0]["by_length"]
    assert [(b["bucket"], b["count"]) for b in buckets] == [("<5", 2), ("5-19", 1), ("20+", 1)]
    assert buckets[0]["bleu"] == pytest.approx(sacrebleu.corpus_bleu([HYP[0], HYP[2]], [[REF[0], REF[2]]]).score)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (ax,) = saved_figures["len.png"].axes  # one line per system, by source length, with the labels given
    assert ax.get_xlabel().startswith("source") and ax.get_ylabel() == "BLEU"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["<5", "5-19", "20+"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["base", "better"]
    assert list(ax.get_lines()[0].get_ydata()) == pytest.approx([b["bleu"] for b in buckets])
    text = run(["--sys", files["hyp"], "--ref", files["ref"], "--by-length"]).stdout.splitlines()
    length_rows = [r.split("\t") for r in text if r.split("\t")[1] == "length"]
    assert [r[2] for r in length_rows] == ["<10", "10-19", "20-29", "30-39", "40-49", "50-59", "60-69", "70+"]
    assert sum(int(r[3]) for r in length_rows) == len(HYP)  # by reference length: a partition


def test_paired_bootstrap(files: dict[str, str]) -> None:
    res = run(["--sys", files["hyp"], "--sys", files["hyp2"], "--ref", files["ref"], "--paired-bootstrap",
               "--bootstrap-samples", "100", "--metrics", "bleu", "--labels", "base,new"])
    assert res.exit_code == 0, res.output
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    assert [r[:2] for r in rows] == [["base", "BLEU"], ["new", "BLEU"]]
    assert rows[0][5] == "-" and 0.0 < float(rows[1][5]) <= 1.0
    assert "bs:100" in rows[1][6]
    assert res.stderr == ""


# -- bad input --------------------------------------------------------------------------------
def test_line_count_mismatch_names_both_files(files: dict[str, str], tmp_path: Path) -> None:
    short = write(tmp_path / "short.ref", REF[:3])
    fails_with(["--sys", files["hyp"], "--ref", short], f"{files['hyp']} has 4 lines", f"{short} has 3 lines")
    fails_with(["--sys", files["hyp"], "--ref", files["ref"], "--src", write(tmp_path / "s", SRC[:2]), "--by-length"],
               "has 2 lines")


def test_empty_file(files: dict[str, str], tmp_path: Path) -> None:
    empty = write(tmp_path / "empty.txt", b"")
    fails_with(["--sys", empty, "--ref", files["ref"]], f"{empty}: file is empty")


def test_invalid_utf8_names_file_and_line(files: dict[str, str], tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.txt", b"ok\nfine\n\xc3\x28 broken\nok\n")
    fails_with(["--sys", bad, "--ref", files["ref"]], f"{bad}:3: invalid UTF-8")


@pytest.mark.parametrize("spec, fragment", [("bleu,meteor", "unknown metric 'meteor'"), ("bleu,bleu", "listed twice"),
                                            (",", "no metric given")])
def test_a_metric_list_that_does_not_parse_is_a_usage_error(files: dict[str, str], spec: str, fragment: str) -> None:
    """Refused when parsed, exit 2 as for any value out of range (the README's table), before any file is read."""
    res = run(["--sys", files["hyp"], "--ref", files["ref"], "--metrics", spec])
    assert res.exit_code == 2, res.output
    err = res.stderr.strip()
    assert err.startswith("nmtkit-score: error: --metrics: ") and "\n" not in err and fragment in err, err
    assert res.stdout == ""


def test_missing_file_and_option_errors(files: dict[str, str]) -> None:
    fails_with(["--sys", "nope.txt", "--ref", files["ref"]], "nope.txt: no such file")
    fails_with(["--sys", files["hyp"]], "--ref")
    fails_with(["--sys", files["hyp"], "--ref", files["ref"], "--paired-bootstrap"], "exactly two --sys")
    fails_with(["--sys", files["hyp"], "--sys", files["hyp2"], "--ref", files["ref"], "--labels", "a"], "--labels")
    fails_with(["--sys", files["hyp"], "--ref", files["ref"], "--by-length", "--buckets", "20,10"], "increasing")
    fails_with(["--sys", files["hyp"], "--ref", files["ref"], "--src", files["src"]], "--by-length")
    res = run(["--sys", files["hyp"], "--ref", files["ref"], "--path", files["hyp"]])
    assert res.exit_code == 2 and res.output.strip() == ("nmtkit-score: error: --path (model scoring) cannot be combined "
                                                         "with --sys, --ref (see --help)")
    fails_with(["--path", "missing.pt", "--source", files["src"], "--target", files["ref"]], "missing.pt")


# -- model scoring (forced decoding) ---------------------------------------------------------------
@pytest.fixture(params=[("luong", {"embed_dim": 8, "hidden_size": 8, "layers": 1, "dropout": 0.0}),
                        ("transformer", {"embed_dim": 8, "ffn_dim": 16, "heads": 2, "encoder_layers": 1,
                                         "decoder_layers": 1, "dropout": 0.0})], ids=lambda p: p[0])
def tiny_model(tiny_parallel: Path, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Path, Path, Path]:
    """(checkpoint, data dir, raw dir): an untrained 1-layer Luong model or Transformer on a preprocessed toy corpus."""
    import torch

    from nmtkit.cli.preprocess import command as preprocess
    from nmtkit.data.dataset import DataDir
    from nmtkit.models import build_model, config_from_dict
    from nmtkit.checkpoint import model_payload, save_checkpoint

    data = tmp_path / "data"
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(tiny_parallel / "train"),
                                          "--testpref", str(tiny_parallel / "test"), "--destdir", str(data)])
    assert res.exit_code == 0, res.output
    dd = DataDir(data)
    torch.manual_seed(0)
    name, options = request.param
    cfg = config_from_dict(name, options)
    model = build_model(name, cfg, dd.src_dict, dd.tgt_dict)
    ckpt = tmp_path / "model.pt"
    save_checkpoint(ckpt, model_payload(model, name, dd.pipeline("en"), dd.pipeline("de")))
    return ckpt, data, tiny_parallel


def test_model_scoring_raw_files_and_data_dir_agree(tiny_model: tuple[Path, Path, Path]) -> None:
    ckpt, data, raw = tiny_model
    plain = run(["--path", str(ckpt), "--source", str(raw / "test.en"), "--target", str(raw / "test.de")])
    assert plain.exit_code == 0 and plain.stdout.startswith("corpus\t") and len(plain.stdout.splitlines()) == 1
    by_files = run(["model", "--path", str(ckpt), "--source", str(raw / "test.en"), "--target", str(raw / "test.de"),
                    "--sentence-level"])
    assert plain.stdout.splitlines() == by_files.stdout.splitlines()[-1:]
    assert by_files.exit_code == 0, by_files.output
    rows = [line.split("\t") for line in by_files.stdout.splitlines()]
    assert [r[0] for r in rows] == ["1", "2", "3", "4", "5", "6", "corpus"]
    # "die Katze sitzt ." = 4 tokens + </s>
    assert int(rows[0][2]) == 5
    total = sum(float(r[1]) for r in rows[:-1])
    n = sum(int(r[2]) for r in rows[:-1])
    assert float(rows[-1][1]) == pytest.approx(total, abs=1e-3) and int(rows[-1][2]) == n
    assert float(rows[-1][3]) == pytest.approx(math.exp(-total / n), rel=1e-3)
    assert all(float(r[1]) < 0 for r in rows[:-1])

    by_data = run(["--path", str(ckpt), "--data", str(data), "--split", "test", "--json"])
    assert by_data.exit_code == 0, by_data.output
    out = json.loads(by_data.stdout)
    assert [s["n_tokens"] for s in out["sentences"]] == [int(r[2]) for r in rows[:-1]]
    assert [s["logprob"] for s in out["sentences"]] == pytest.approx([float(r[1]) for r in rows[:-1]], abs=1e-4)
    assert out["perplexity"] == pytest.approx(math.exp(-out["total_logprob"] / out["n_tokens"]))


def test_model_ensemble_of_identical_checkpoints_scores_like_one(tiny_model: tuple[Path, Path, Path]) -> None:
    ckpt, data, _ = tiny_model
    one = json.loads(run(["--path", str(ckpt), "--data", str(data), "--json"]).stdout)
    two = json.loads(run(["--path", f"{ckpt}:{ckpt}", "--data", str(data), "--json"]).stdout)
    assert two["checkpoints"] == [str(ckpt), str(ckpt)]
    assert two["perplexity"] == pytest.approx(one["perplexity"], rel=1e-5)


def test_model_scoring_bad_options(tiny_model: tuple[Path, Path, Path]) -> None:
    ckpt, data, raw = tiny_model
    fails_with(["--path", str(ckpt)], "--data DIR")
    fails_with(["--path", str(ckpt), "--data", str(data), "--source", str(raw / "test.en")], "not both")
    fails_with(["--path", str(ckpt), "--data", str(data), "--split", "nosuch"], "no split 'nosuch'")
    short = write(raw / "short.de", ["der Hund ."])
    fails_with(["--path", str(ckpt), "--source", str(raw / "test.en"), "--target", short],
               f"{raw / 'test.en'} has 6 lines", f"{short} has 1 lines")


@pytest.mark.parametrize("extra, named", [
    (["--batch-size", "8"], "--batch-size is for model scoring and needs --path"),
    (["--amp", "bf16", "--device", "cpu"], "--amp, --device are for model scoring and need --path"),
    (["--source", "x.en"], "--source is for model scoring and needs --path"),
])
def test_model_scoring_options_without_a_model_are_refused(files: dict[str, str], extra: list[str], named: str) -> None:
    """Text scoring would ignore them: refused in one line rather than silently unused."""
    res = CliRunner().invoke(command, ["--sys", files["hyp"], "--ref", files["ref"], *extra])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [f"nmtkit-score: error: {named} (see --help)"]
    res = CliRunner().invoke(command, ["text", "--sys", files["hyp"], "--ref", files["ref"], *extra])
    assert res.exit_code == 2 and res.output.startswith("nmtkit-score: error: No such option ")


# -- where the figures go: a table on a terminal, lines on a pipe, each once --------------------
def _run_on(stdout_tty: bool, args: list[str]) -> tuple[int, str, str]:
    """Run the nmtkit-score console script with stdout on a pseudo-terminal or a pipe; (status, stdout, stderr)."""
    import os
    import pty
    import subprocess
    import sys

    cmd = [sys.executable, "-c", "from nmtkit.launch import score; score()", *args]
    env = {**os.environ, "COLUMNS": "120"}
    if not stdout_tty:
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        return res.returncode, res.stdout, res.stderr
    main, child = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=child, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    return proc.returncode, b"".join(chunks).decode().replace("\r\n", "\n"), err


def test_text_scores_on_a_terminal_are_one_table_and_on_a_pipe_lines(files: dict[str, str]) -> None:
    args = ["--sys", files["hyp"], "--sys", files["hyp2"], "--ref", files["ref"], "--labels", "base,new"]
    bleu = f"{sacrebleu.corpus_bleu(HYP, [REF]).score:.2f}"
    status, out, err = _run_on(True, args)
    assert status == 0 and err == "", err
    assert "Corpus scores" in out and "\t" not in out
    assert out.count(bleu) == 1  # once, in the table
    assert out.count("BLEU signature: nrefs:1") == 1
    status, out, err = _run_on(False, args)
    assert status == 0 and err == "", err
    assert "Corpus scores" not in out and out.count(bleu) == 1
    assert [line.split("\t")[:2] for line in out.splitlines()] == [["base", "BLEU"], ["base", "chrF2"], ["new", "BLEU"],
                                                                    ["new", "chrF2"]]


def test_model_scores_on_a_terminal_and_a_pipe(tiny_model: tuple[Path, Path, Path]) -> None:
    ckpt, data, _ = tiny_model
    args = ["--path", str(ckpt), "--data", str(data), "--device", "cpu"]
    status, piped, err = _run_on(False, args)
    assert status == 0 and err == "", err
    ((name, logprob, ntok, ppl),) = [line.split("\t") for line in piped.splitlines()]  # no per-sentence lines
    assert name == "corpus"
    status, out, err = _run_on(True, ["model", *args])
    assert status == 0 and err == "", err
    assert "Reference scoring" in out and "\t" not in out
    assert f"{float(ppl):.2f}" in out and out.count(f"{float(logprob):.2f}") == 1
