"""Checkpoints and data directories with the right format but the wrong contents (hand-made, edited,
another nmtkit version): one line naming the file and the field, exit 1, no traceback.
(Tests use the conftest fixtures' tiny data and random checkpoints; nothing trains.)"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from tests.helpers import make_checkpoint, one_line
from nmtkit.cli.align import command as align
from nmtkit.cli.score import command as score
from nmtkit.cli.train import command as train
from nmtkit.cli.translate import command as translate
from nmtkit.errors import InputError
from nmtkit.utils.schema import Choice, DictOf, ListOf, Nullable, validate


# -- the checker ------------------------------------------------------------------------------------
SCHEMA = {"name": str, "size": int, "opt?": Nullable(float), "kind": Choice(("a", "b")),
          "items": ListOf(str), "table": DictOf({"n": int})}
GOOD = {"name": "x", "size": 3, "kind": "a", "items": ["p"], "table": {"t": {"n": 1}}, "extra": [1]}


@pytest.mark.parametrize("change,message", [
    ({"name": None}, "field 'name' missing"),
    ({"size": True}, "field 'size' must be an integer, not bool"),
    ({"size": "3"}, "field 'size' must be an integer, not str ('3')"),
    ({"opt": "1.5"}, "field 'opt' must be a number or null"),
    ({"kind": "c"}, "field 'kind' must be one of 'a', 'b'"),
    ({"items": ["p", 5]}, "field 'items[1]' must be a string, not int (5)"),
    ({"table": {"t": {"n": 1.5}}}, "field 'table.t.n' must be an integer"),
    ({"table": {"t": {}}}, "field 'table.t.n' missing"),
])
def test_the_first_bad_field_is_named(change, message):
    value = {**GOOD, **change}
    value = {k: v for k, v in value.items() if v is not None}
    with pytest.raises(InputError) as exc:
        validate(value, SCHEMA, "f.json")
    assert str(exc.value).startswith(f"f.json: {message}"), str(exc.value)


def test_a_matching_value_passes_and_extra_fields_are_allowed():
    validate(GOOD, SCHEMA, "f.json")
    validate({**GOOD, "opt": 2}, SCHEMA, "f.json")  # an int is a number
    with pytest.raises(InputError, match="f.json: must be an object, not list"):
        validate([GOOD], SCHEMA, "f.json")


# -- checkpoints ------------------------------------------------------------------------------------
def _crafted(tmp_path: Path, edit, arch: str = "luong_tiny") -> Path:  # noqa: ANN001
    """A real checkpoint, loaded, edited by ``edit(ckpt)`` and saved again (format fields kept)."""
    path = make_checkpoint(tmp_path / "ok.pt", arch)
    ckpt = torch.load(path, weights_only=True)
    edit(ckpt)
    out = tmp_path / "bad.pt"
    torch.save(ckpt, out)
    return out


def _nan(ckpt: dict) -> None:
    name = next(k for k, v in ckpt["model"].items() if v.is_floating_point())
    ckpt["model"][name] = ckpt["model"][name].clone()
    ckpt["model"][name].view(-1)[0] = float("nan")


def _inf(ckpt: dict) -> None:
    name = [k for k, v in ckpt["model"].items() if v.is_floating_point()][-1]
    ckpt["model"][name] = torch.full_like(ckpt["model"][name], float("inf"))


CHECKPOINT_CASES = {
    "no_model_name": (lambda c: c.pop("model_name"), "field 'model_name' missing"),
    "no_model": (lambda c: c.pop("model"), "field 'model' missing"),
    "unknown_tokenizer": (lambda c: c["src_pipeline"].update(tokenizer="sentencepiece"),
                          "field 'src_pipeline.tokenizer' must be one of 'moses', 'none'"),
    "int_symbols": (lambda c: c.update(tgt_dict=[*c["tgt_dict"][:4], *range(len(c["tgt_dict"]) - 4)]),
                    "field 'tgt_dict[4]' must be a string, not int (0)"),
    "no_specials": (lambda c: c.update(src_dict=c["src_dict"][4:]), "field 'src_dict'"),
    "symbol_with_a_line_break": (lambda c: c["tgt_dict"].__setitem__(5, c["tgt_dict"][5] + "\nX"),
                                 "field 'tgt_dict': symbol 5 ("),
    "duplicate_symbol": (lambda c: c["src_dict"].__setitem__(6, c["src_dict"][5]), "field 'src_dict': symbol 6 ("),
    "unknown_model": (lambda c: c.update(model_name="no_such_model"), "no_such_model"),
    "weights_of_another_model": (lambda c: c.update(model_name="transformer"), "transformer"),
    "model_is_a_list": (lambda c: c.update(model=[1, 2]), "field 'model' must be an object, not list"),
    # a checkpoint of another version of the model (one trained before an option gained weights)
    "missing_weight": (lambda c: c["model"].pop("encoder.embed.weight"), "(missing encoder.embed.weight)"),
    "unexpected_weight": (lambda c: c["model"].update({"encoder.match_rnn.weight_ih_l0": torch.zeros(1)}),
                          "(unexpected encoder.match_rnn.weight_ih_l0)"),
    "nan_weights": (_nan, "holds NaN or infinite values"),
    "inf_weights": (_inf, "holds NaN or infinite values"),
    "bad_codes": (lambda c: c["tgt_pipeline"].update(bpe_codes_text="#version: 0.2\na b c\n"),
                  "tgt_pipeline.bpe_codes_text):2: not a BPE merge"),
    "unsupported_codes_version": (lambda c: c["src_pipeline"].update(bpe_codes_text="#version: 1.0\na b\n"),
                                  "src_pipeline.bpe_codes_text):1: BPE codes version 1.0 is not supported"),
}


def _run(cmd: str, ckpt: Path, tmp_path: Path):  # noqa: ANN202
    text = tmp_path / "text.txt"
    text.write_text("the cat sits .\n", encoding="utf-8")
    if cmd == "translate":
        return CliRunner().invoke(translate, ["--path", str(ckpt), "--device", "cpu"], input="the cat\n")
    if cmd == "score":
        return CliRunner().invoke(score, ["--path", str(ckpt), "--source", str(text), "--target", str(text),
                                          "--device", "cpu"])
    return CliRunner().invoke(align, ["--path", str(ckpt), "--source", str(text), "--target", str(text), "--device", "cpu"])


@pytest.mark.parametrize("cmd", ["translate", "score", "align"])
@pytest.mark.parametrize("case", list(CHECKPOINT_CASES))
def test_crafted_checkpoints_are_one_line_naming_file_and_field(tmp_path, cmd, case):
    edit, expected = CHECKPOINT_CASES[case]
    bad = _crafted(tmp_path, edit)
    res = _run(cmd, bad, tmp_path)
    assert res.exit_code == 1, res.output
    line = one_line(res.output)
    assert line.startswith(f"nmtkit-{cmd}: error: {bad}") and expected in line, line


#: The Transformer's own fields: its model_config checked like any other, and weights of its layers
TRANSFORMER_CASES = {
    "heads_do_not_divide": (lambda c: c["model_config"].update(heads=3), "must be divisible by heads (3)"),
    "alignment_layer_out_of_range": (lambda c: c["model_config"].update(alignment_layer=7),
                                     "alignment_layer must be in [-2, 1] for 2 decoder layers, got 7"),
    "alignment_heads_above_heads": (lambda c: c["model_config"].update(alignment_heads=99), "alignment_heads must be in"),
    "weights_of_a_recurrent_model": (lambda c: c.update(model_name="luong"), "luong"),
    "nan_weights": (_nan, "holds NaN or infinite values"),
}


@pytest.mark.parametrize("cmd", ["translate", "align"])
@pytest.mark.parametrize("case", list(TRANSFORMER_CASES))
def test_crafted_transformer_checkpoints_are_one_line_naming_file_and_field(tmp_path, cmd, case):
    edit, expected = TRANSFORMER_CASES[case]
    bad = _crafted(tmp_path, edit, "transformer_test")
    res = _run(cmd, bad, tmp_path)
    assert res.exit_code == 1, res.output
    line = one_line(res.output)
    assert line.startswith(f"nmtkit-{cmd}: error: {bad}") and expected in line, line


@pytest.mark.parametrize("arch", ["luong_tiny", "transformer_test"])
def test_a_finite_checkpoint_still_translates(tmp_path, arch):
    res = _run("translate", make_checkpoint(tmp_path / "ok.pt", arch), tmp_path)
    assert res.exit_code == 0, res.output


# -- meta.json --------------------------------------------------------------------------------------
def _edit_meta(data_dir: Path, edit) -> Path:  # noqa: ANN001
    meta_path = data_dir / "meta.json"
    if callable(edit):
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        edit(meta)
        meta_path.write_text(json.dumps(meta), encoding="utf-8")
    else:
        meta_path.write_text(edit, encoding="utf-8")
    return meta_path


def _bpe(codes: str):  # noqa: ANN202
    return lambda m: m.update(bpe={"type": "subword-nmt", "codes": {"en": codes, "de": "bpe.codes"}})


META_CASES = {
    "list": ("[1, 2]", "must be a JSON object, not list"),
    "number": ("42", "must be a JSON object, not int"),
    "deeply_nested": ("[" * 200_000 + "]" * 200_000, "nested too deeply"),
    "no_source_lang": (lambda m: m.pop("source_lang"), "field 'source_lang' missing"),
    "source_lang_not_a_string": (lambda m: m.update(source_lang=["en"]), "field 'source_lang' must be a language code"),
    "lang_with_a_slash": (lambda m: m.update(target_lang="../de"), "field 'target_lang' must be a language code"),
    "unknown_tokenizer": (lambda m: m.update(tokenizer="spm"), "field 'tokenizer' must be one of 'moses', 'none'"),
    "splits_a_list": (lambda m: m.update(splits=["train"]), "field 'splits' must be an object, not list"),
    "absolute_bpe_codes": (_bpe("/etc/passwd"), "field 'bpe.codes.en' must be a file name inside the data directory"),
    "escaping_bpe_codes": (_bpe("../../secret.codes"), "field 'bpe.codes.en' must be a file name inside the data directory"),
    "bpe_codes_missing": (lambda m: m.update(bpe={"type": "subword-nmt", "codes": {"en": "bpe.codes"}}),
                          "field 'bpe.codes.de' missing"),
}


def _run_with_data(cmd: str, data: Path, tmp_path: Path):  # noqa: ANN202
    if cmd == "train":
        return CliRunner().invoke(train, [str(data), "--arch", "luong_tiny", "--save-dir", str(tmp_path / "ck"), "--device", "cpu", "--no-progress"])
    ckpt = make_checkpoint(tmp_path / "m.pt")
    if cmd == "translate":
        return CliRunner().invoke(translate, ["--path", str(ckpt), "--data", str(data), "--device", "cpu"], input="a\n")
    if cmd == "score":
        return CliRunner().invoke(score, ["--path", str(ckpt), "--data", str(data), "--split", "valid", "--device", "cpu"])
    return CliRunner().invoke(align, ["--path", str(ckpt), "--data", str(data), "--split", "valid", "--device", "cpu"])


@pytest.mark.parametrize("cmd", ["train", "translate", "score", "align"])
@pytest.mark.parametrize("case", list(META_CASES))
def test_crafted_meta_json_is_one_line_naming_file_and_field(data_dir, tmp_path, cmd, case):
    edit, expected = META_CASES[case]
    meta_path = _edit_meta(data_dir, edit)
    res = _run_with_data(cmd, data_dir, tmp_path)
    assert res.exit_code == 1, res.output
    line = one_line(res.output)
    assert line.startswith(f"nmtkit-{cmd}: error: {meta_path}: ") and expected in line, line
    assert not (tmp_path / "ck").exists() or not any((tmp_path / "ck").glob("*.pt"))


def test_bpe_codes_reached_through_a_symlink_outside_the_data_directory_are_refused(data_dir, tmp_path):
    outside = tmp_path / "elsewhere.codes"
    outside.write_text("#version: 0.2\nt h\n", encoding="utf-8")
    (data_dir / "bpe.codes").symlink_to(outside)
    meta_path = _edit_meta(data_dir, _bpe("bpe.codes"))
    res = _run_with_data("train", data_dir, tmp_path)
    assert res.exit_code == 1
    line = one_line(res.output)
    assert line.startswith(f"nmtkit-train: error: {meta_path}: field 'bpe.codes.en' must be a file name inside"), line
