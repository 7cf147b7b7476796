"""nmtkit as a Python library: the examples of docs/guide/python-api.md run as written, and the library calls give
what the command lines print (so the CLI modules are only option parsing and printing)."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import make_checkpoint

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "guide" / "python-api.md"


def readme_snippets() -> list[str]:
    """The ```python blocks of the Python API guide, in order."""
    return re.findall(r"```python\n(.*?)```", API_DOC.read_text(encoding="utf-8"), flags=re.S)


def run_snippet(code: str, namespace: dict) -> object:
    """Execute ``code``; return the value of its last line when that is an expression (as a REPL shows it)."""
    tree = ast.parse(code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, str(API_DOC), "exec"), namespace)
    if last is None:
        return None
    return eval(compile(ast.Expression(last.value), str(API_DOC), "eval"), namespace)


@pytest.fixture
def in_ckpt_dir(tmp_path, monkeypatch):
    make_checkpoint(tmp_path / "ckpt.pt")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_readme_examples_run_as_written(in_ckpt_dir, capsys):
    snippets = readme_snippets()
    assert len(snippets) == 3 and 'Translator.from_checkpoint("ckpt.pt", beam=5)' in snippets[0]
    ns: dict = {}
    out = run_snippet(snippets[0], ns)
    assert isinstance(out, list) and len(out) == 1 and isinstance(out[0], str)
    run_snippet(snippets[1], ns)
    printed = capsys.readouterr().out.splitlines()
    assert [l.split()[0] for l in printed] == ["0", "1"] and all(l.endswith(" 2") for l in printed)
    run_snippet(snippets[2], ns)
    assert ns["scores"]["bleu"].score == pytest.approx(100.0)
    assert len(ns["links"]) == 1 and all(0 <= i < 4 and 0 <= j < 4 for i, j in ns["links"][0])


def test_library_translation_equals_the_command_line(in_ckpt_dir):
    from nmtkit import Translator
    from nmtkit.cli.translate import command

    lines = ["the cat sees the dog .", "", "Anna sleeps"]
    res = CliRunner().invoke(command, ["--quiet", "--threads", "1", "--path", "ckpt.pt", "--beam", "3"],
                             input="".join(l + "\n" for l in lines))
    assert res.exit_code == 0, res.output
    t = Translator.from_checkpoint(["ckpt.pt"], beam=3, device="cpu")
    assert t.translate(lines) == res.stdout.split("\n")[:-1]
    details = t.translate(lines, details=True, batch_size=1)
    assert [d.index for d in details] == [0, 1, 2] and [d.candidates[0].text for d in details] == t.translate(lines)
    assert details[0].candidates[0].alignment == []  # alignments only when asked for
    with pytest.raises(TypeError):
        t.translate("the cat")  # one string would be translated character by character


def test_translator_options_are_checked_before_loading(tmp_path):
    from nmtkit import NmtkitError, Translator

    with pytest.raises(NmtkitError, match=r"--nbest must be <= --beam \(2\), got 3"):
        Translator.from_checkpoint(tmp_path / "missing.pt", beam=2, nbest=3)
    with pytest.raises(NmtkitError, match="missing.pt"):
        Translator.from_checkpoint(tmp_path / "missing.pt")


def test_score_and_score_files_equal_the_command_line(tmp_path):
    from nmtkit import score, score_files
    from nmtkit.cli.score import command

    hyp, ref = ["the cat sits on the mat .", "a dog"], ["the cat sat on the mat .", "a dog runs"]
    (tmp_path / "hyp").write_text("\n".join(hyp) + "\n")
    (tmp_path / "ref").write_text("\n".join(ref) + "\n")
    res = CliRunner().invoke(command, ["--sys", str(tmp_path / "hyp"), "--ref", str(tmp_path / "ref"),
                                       "--metrics", "bleu,chrf,ter"])
    assert res.exit_code == 0, res.output
    printed = {l.split("\t")[1]: float(l.split("\t")[2]) for l in res.stdout.splitlines()}
    mem = score(hyp, ref, metrics="bleu,chrf,ter")
    assert {r.name: round(r.score, 2) for r in mem.values()} == printed
    assert score(hyp, [ref], metrics=["bleu"])["bleu"].score == mem["bleu"].score  # a list of reference sets
    files = score_files([str(tmp_path / "hyp")], [str(tmp_path / "ref")], metrics=["bleu"], sentence_level=True)
    assert files.corpus[0]["bleu"].score == mem["bleu"].score and len(files.sentences[0]) == 2


def test_score_model_and_aligner_equal_the_command_lines(in_ckpt_dir):
    from nmtkit import Aligner, score_model
    from nmtkit.cli.align import command as align
    from nmtkit.cli.score import command as score_cli

    src, tgt = ["the cat sits .", "the dog runs ."], ["die Katze sitzt .", "der Hund läuft ."]
    Path("s.en").write_text("\n".join(src) + "\n")
    Path("t.de").write_text("\n".join(tgt) + "\n")
    res = CliRunner().invoke(score_cli, ["--path", "ckpt.pt", "--source", "s.en", "--target", "t.de", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    m = score_model("ckpt.pt", source="s.en", target="t.de", device="cpu")
    assert res.stdout.splitlines()[-1] == f"corpus\t{m.total_logprob:.4f}\t{m.total_tokens}\t{m.perplexity:.4f}"

    res = CliRunner().invoke(align, ["--path", "ckpt.pt", "--source", "s.en", "--target", "t.de", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    links = Aligner.from_checkpoint("ckpt.pt", device="cpu").align(src, tgt)
    from nmtkit.evaluate.alignment_io import format_pharaoh

    assert [format_pharaoh(l) for l in links] == res.stdout.splitlines()
    from nmtkit.checkpoint import load_checkpoint, save_checkpoint

    ckpt = load_checkpoint("ckpt.pt")  # the same vocabulary on both sides: a de->en model by its pipelines
    ckpt["src_pipeline"], ckpt["tgt_pipeline"] = ckpt["tgt_pipeline"], ckpt["src_pipeline"]
    save_checkpoint("rev.pt", {k: v for k, v in ckpt.items() if k not in ("format", "version", "nmtkit_version")})
    both = Aligner.from_checkpoint("ckpt.pt", reverse_path="rev.pt", symmetrize="intersect", device="cpu")
    run = both.align_corpus(src, tgt)
    assert list(run.directions) == ["source->target", "target->source", "intersect"] and run.links == run.directions["intersect"]


def test_import_nmtkit_does_not_import_torch():
    code = "import sys, nmtkit; assert 'torch' not in sys.modules; nmtkit.Translator; assert 'torch' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.parametrize("lines, error", [
    (["a cat", None], "found NoneType None"),
    (["a cat", 3], "found int 3"),
    ([b"a cat"], "found bytes"),
    (["b", (0, "a")], "found tuple"),
    ([(0, "a"), "b"], "not a mix"),
])
def test_translate_says_what_it_takes(tmp_path, lines, error):
    from nmtkit import Translator

    tr = Translator.from_checkpoint(str(make_checkpoint(tmp_path / "m.pt")), device="cpu")
    with pytest.raises(TypeError, match=re.escape(error)):
        tr.translate(lines)
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        tr.translate(["a cat"], batch_size=-1)
