"""``--bpe sentencepiece`` end to end on the sample corpus: preprocess (unigram and BPE models),
train, translate (detokenised output), score, align (links between words) and the library API."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("sentencepiece")

from nmtkit.cli.align import command as align  # noqa: E402
from nmtkit.cli.preprocess import command as preprocess  # noqa: E402
from nmtkit.cli.score import command as score  # noqa: E402
from nmtkit.cli.train import command as train  # noqa: E402
from nmtkit.cli.translate import command as translate  # noqa: E402
from nmtkit.data.text_pipeline import SP_SPACE, TextPipeline, merge_bpe  # noqa: E402


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from nmtkit.sample import generate_corpus

    raw = tmp_path_factory.mktemp("spm") / "raw"
    generate_corpus(raw, seed=3, n_train=600, n_valid=20, n_test=8)
    return raw


def run(command, args: list[str]):  # noqa: ANN001, ANN201
    res = CliRunner().invoke(command, args)
    assert res.exit_code == 0, res.output
    return res


@pytest.mark.parametrize("spm_type", ["unigram", "bpe"])
def test_sentencepiece_through_every_command(corpus: Path, tmp_path: Path, spm_type: str) -> None:
    data, ckpt = tmp_path / "bin", tmp_path / "ckpt"
    run(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(corpus / "train"), "--validpref", str(corpus / "valid"),
                     "--destdir", str(data), "--bpe", "sentencepiece", "--spm-type", spm_type, "--spm-vocab-size", "300"])
    meta = json.loads((data / "meta.json").read_text(encoding="utf-8"))
    assert meta["bpe"]["type"] == "sentencepiece" and meta["bpe"]["model_type"] == spm_type
    assert meta["bpe"]["models"] == {"en": "spm.model", "de": "spm.model"} and (data / "spm.model").is_file()
    pieces = (data / "dict.en.txt").read_text(encoding="utf-8").split()[::2]
    assert any(p.endswith("@@") for p in pieces) and not any(SP_SPACE in p for p in pieces)
    # at most --spm-vocab-size pieces, each as a word's end or (with @@) not: at most twice as many entries
    assert 100 < len(pieces) <= 2 * 300

    run(train, [str(data), "--arch", "rnnsearch_tiny", "--save-dir", str(ckpt), "--batch-size", "32", "--lr", "0.005",
                "--max-update", "40", "--max-epoch", "0", "--threads", "1", "--device", "cpu", "--no-progress"])
    model = str(ckpt / "checkpoint_last.pt")

    src = (corpus / "test.en").read_text(encoding="utf-8").splitlines()
    ref = (corpus / "test.de").read_text(encoding="utf-8").splitlines()
    res = run(translate, ["--path", model, "--input", str(corpus / "test.en"), "--threads", "1", "--device", "cpu"])
    out = res.stdout.splitlines()
    assert len(out) == len(src) and all(out)
    assert not any("@@" in line or SP_SPACE in line for line in out)  # detokenised: pieces merged back into words

    # the library gives what the command prints
    from nmtkit import Aligner, Translator

    assert Translator.from_checkpoint(model, device="cpu").translate(src) == out

    hyp = tmp_path / "test.hyp"
    hyp.write_text("\n".join(out) + "\n", encoding="utf-8")
    bleu = run(score, ["text", "--sys", str(hyp), "--ref", str(corpus / "test.de"), "--metrics", "bleu"]).stdout
    assert bleu.split("\t")[1] == "BLEU"
    ppl = run(score, ["model", "--path", model, "--source", str(corpus / "test.en"), "--target", str(corpus / "test.de")]).stdout
    assert ppl.startswith("corpus\t") and float(ppl.split("\t")[3]) > 1

    # links between the words of the lines as given, not between pieces
    res = run(align, ["--path", model, "--source", str(corpus / "test.en"), "--target", str(corpus / "test.de"),
                      "--threads", "1", "--device", "cpu"])
    rows = res.stdout.splitlines()
    assert len(rows) == len(src)
    for row, s, t in zip(rows, src, ref):
        links = [tuple(map(int, link.split("-"))) for link in row.split()]
        assert links and all(i < len(s.split()) and j < len(t.split()) for i, j in links)
        assert {j for _, j in links} == set(range(len(t.split())))  # attention links every target word
    library = Aligner.from_checkpoint(model, device="cpu").align(src[:2], ref[:2])
    assert [sorted(map(tuple, links)) for links in library] == [
        sorted(tuple(map(int, link.split("-"))) for link in row.split()) for row in rows[:2]]


def test_sentencepiece_pieces_map_back_to_the_tokens(corpus: Path, tmp_path: Path) -> None:
    data = tmp_path / "bin"
    run(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(corpus / "train"), "--destdir", str(data),
                     "--bpe", "sentencepiece", "--spm-vocab-size", "200", "--separate-bpe"])
    from nmtkit.data.dataset import DataDir

    dd = DataDir(data)
    assert dd.meta["bpe"]["models"] == {"en": "spm.en.model", "de": "spm.de.model"}
    pipe = dd.pipeline("de")
    for line in (corpus / "test.de").read_text(encoding="utf-8").splitlines() + ["Zürich, 3.5 × ünïcödé ▁x"]:
        tokens, pieces = pipe.encode(line)
        assert merge_bpe(pieces) == tokens  # every character as written: identity normalisation
        assert pipe.decode(pieces) == " ".join(tokens)
    # a checkpoint carries the model: the pipeline rebuilt from its description segments the same
    again = TextPipeline.from_dict(json.loads(json.dumps(pipe.to_dict())))
    assert again.apply_bpe(["Zürich", "Großmutter"]) == pipe.apply_bpe(["Zürich", "Großmutter"])


def test_sentencepiece_model_replaced_after_preprocessing_is_refused(corpus: Path, tmp_path: Path) -> None:
    data = tmp_path / "bin"
    run(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(corpus / "train"), "--destdir", str(data),
                     "--bpe", "sentencepiece", "--spm-vocab-size", "200"])
    (data / "spm.model").write_bytes(b"not a model")
    res = CliRunner().invoke(train, [str(data), "--arch", "luong_tiny", "--save-dir", str(tmp_path / "c")])
    assert res.exit_code == 1
    (line,) = res.output.strip().splitlines()
    assert line.startswith(f"nmtkit-train: error: {data / 'spm.model'}: not a SentencePiece model"), line
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(corpus / "train"),
                                          "--destdir", str(tmp_path / "x"), "--spm-type", "bpe"])
    assert res.exit_code == 1 and "--spm-type and --spm-vocab-size need --bpe sentencepiece" in res.output
