"""``--config FILE.yaml`` and ``--dump-config`` on every command, and the config.yaml a training
run writes: a dumped configuration loads back to the same options and the same run."""
from __future__ import annotations


import pytest
import torch
import yaml
from click.testing import CliRunner

from nmtkit.checkpoint import load_checkpoint
from nmtkit.cli.preprocess import command as preprocess
from nmtkit.cli.score import command as score
from nmtkit.cli.train import command as train
from nmtkit.cli.translate import command as translate


def dump(command, args: list[str]) -> str:  # noqa: ANN001
    res = CliRunner().invoke(command, [*args, "--dump-config"])
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.mark.parametrize("command, args", [
    (train, ["DATA", "--arch", "luong_tiny", "--lr", "0.01", "--model-opt", "dropout=0.1", "--eval-bleu"]),
    (translate, ["--path", "a.pt:b.pt", "--beam", "3", "--replace-unk"]),
    (preprocess, ["-s", "en", "-t", "de", "--trainpref", "raw/train", "--destdir", "bin", "--thresholdsrc", "2"]),
    (score, ["text", "--sys", "a.hyp", "--sys", "b.hyp", "--ref", "r", "--metrics", "bleu,ter"]),
])
def test_a_dumped_config_loads_back_to_the_same_options(tmp_path, command, args):
    first = dump(command, args)
    config = tmp_path / "c.yaml"
    config.write_text(first, encoding="utf-8")
    head = ["text"] if args[0] == "text" else []
    assert dump(command, [*head, "--config", str(config)]) == first
    assert "config" not in yaml.safe_load(first) and "dump_config" not in yaml.safe_load(first)


def test_the_command_line_overrides_the_file(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("arch: luong_tiny\nlr: 0.01\nmax-tokens: 123\nmodel_opt: [dropout=0.2]\n", encoding="utf-8")
    out = yaml.safe_load(dump(train, ["DATA", "--config", str(config), "--lr", "0.5"]))
    assert (out["lr"], out["max_tokens"], out["arch"], out["model_opt"]) == (0.5, 123, "luong_tiny", ["dropout=0.2"])


def test_a_training_run_writes_its_config_and_the_config_repeats_the_run(data_dir, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    flags = ["--arch", "luong_tiny", "--batch-size", "2", "--seed", "5", "--max-update", "3", "--max-epoch", "0",
             "--dropout", "0.2", "--lr", "0.003", "--no-progress", "--device", "cpu", "--threads", "1", "--amp", "none"]
    res = CliRunner().invoke(train, [str(data_dir), "--save-dir", str(a), *flags])
    assert res.exit_code == 0, res.output
    written = yaml.safe_load((a / "config.yaml").read_text(encoding="utf-8"))
    assert written["data"] == str(data_dir) and written["save_dir"] == str(a) and written["dropout"] == 0.2
    res = CliRunner().invoke(train, ["--config", str(a / "config.yaml"), "--save-dir", str(b)])
    assert res.exit_code == 0, res.output
    wa, wb = load_checkpoint(a / "checkpoint_last.pt")["model"], load_checkpoint(b / "checkpoint_last.pt")["model"]
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    again = yaml.safe_load((b / "config.yaml").read_text(encoding="utf-8"))
    assert {**written, "save_dir": str(b)} == again


@pytest.mark.parametrize("text, message", [
    ("lr: fast\n", "key 'lr': Invalid value for '--lr': 'fast' is not a valid float"),
    ("arch: luong_tiny\nlearning_rate: 1\n", "key 'learning_rate' is not an option of nmtkit-train"),
    ("- lr\n- 1\n", "a config file is a mapping of option names to values, not a list"),
    ("lr: [1\n", ":2: not valid YAML"),
    (b"lr: \xff\n", "invalid UTF-8"),
    ("max_tokens: -3\n", "key 'max_tokens'"),
])
def test_a_bad_config_file_is_one_line_naming_the_file_and_key(tmp_path, text, message):
    config = tmp_path / "bad.yaml"
    if isinstance(text, bytes):
        config.write_bytes(text)
    else:
        config.write_text(text, encoding="utf-8")
    res = CliRunner().invoke(train, ["DATA", "--arch", "luong_tiny", "--config", str(config), "--save-dir", str(tmp_path / "s")])
    assert res.exit_code == 1, res.output
    (line,) = res.output.strip().splitlines()
    assert line.startswith(f"nmtkit-train: error: {config}") and message in line, line
    assert not (tmp_path / "s").exists()


def test_a_missing_config_file_is_named(tmp_path):
    res = CliRunner().invoke(translate, ["--config", str(tmp_path / "none.yaml")])
    assert res.exit_code == 1 and res.output.strip() == f"nmtkit-translate: error: {tmp_path / 'none.yaml'}: No such file or directory"
