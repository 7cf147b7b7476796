"""Options and files that used to reach torch unchecked: devices, seeds, sizes that cannot be
allocated, BPE codes that are not UTF-8 or not merges.  One line, a non-zero exit, no traceback.
Allocation failures are simulated (monkeypatched), so no test asks the machine for terabytes."""
from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner

from tests.helpers import make_checkpoint, one_line
from nmtkit.cli.align import command as align
from nmtkit.cli.common import handle_errors
from nmtkit.cli.preprocess import command as preprocess
from nmtkit.cli.score import command as score
from nmtkit.cli.train import command as train
from nmtkit.cli.translate import command as translate
from nmtkit.errors import NmtkitError
from nmtkit.utils.device import parse_device
from nmtkit.utils.memory import allocation_guard

ALLOC_FAILURE = ("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: "
                 "you tried to allocate 16000000000000 bytes. Error code 12 (Cannot allocate memory)")


# -- devices ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["mps", "meta", "cuda:99", "gpu", "cuda:x", "cpu:0", "xla"])
def test_parse_device_refuses_all_but_cpu_and_existing_cuda(name):
    with pytest.raises(NmtkitError, match=r"^--device "):
        parse_device(name)


def test_parse_device_accepts_cpu_and_auto():
    assert parse_device("cpu") == torch.device("cpu")
    assert parse_device("auto").type in ("cpu", "cuda")
    assert parse_device(torch.device("cpu")) == torch.device("cpu")


@pytest.mark.parametrize("device", ["mps", "meta", "cuda:99"])
@pytest.mark.parametrize("cmd", ["translate", "train", "score", "align"])
def test_bad_devices_are_one_line_in_every_command(cmd, device, data_dir, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the cat\n", encoding="utf-8")
    if cmd == "train":
        res = CliRunner().invoke(train, [str(data_dir), "--arch", "luong_tiny", "--save-dir", str(tmp_path / "ck"), "--device", device])
    else:
        ckpt = str(make_checkpoint(tmp_path / "m.pt"))
        args = {"translate": [translate, ["--path", ckpt]],
                "score": [score, ["--path", ckpt, "--source", str(text), "--target", str(text)]],
                "align": [align, ["--path", ckpt, "--source", str(text), "--target", str(text)]]}[cmd]
        res = CliRunner().invoke(args[0], [*args[1], "--device", device], input="the cat\n")
    assert res.exit_code == 1, res.output
    line = one_line(res.output)
    assert line.startswith(f"nmtkit-{cmd}: error: --device {device}") or f"--device '{device}'" in line, line
    assert not (tmp_path / "ck").exists()


# -- seeds and sizes ----------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", ["99999999999999999999", "18446744073709551616"])
def test_a_seed_out_of_range_is_a_usage_error_with_the_range(seed):
    from nmtkit.cli.sample import command as sample

    for cmd, args in ((train, ["data"]), (sample, ["out"])):  # one range for every --seed
        res = CliRunner().invoke(cmd, [*args, "--seed", seed])
        assert res.exit_code == 2
        line = one_line(res.output)
        assert "--seed" in line and "0<=x<=18446744073709551615" in line, line


def test_threads_beyond_the_bound_are_a_usage_error_in_every_command():
    from nmtkit.cli.common import MAX_THREADS

    cases = [(train, ["data"]), (translate, ["--path", "m.pt"]), (score, ["--path", "m.pt"]), (align, ["--path", "m.pt"])]
    cases = [(cmd, args) for cmd, args in cases if any(p.name == "threads" for p in cmd.params)]
    assert len(cases) >= 3
    for cmd, args in cases:  # torch crashed (SIGSEGV) with --threads 100000
        res = CliRunner().invoke(cmd, [*args, "--threads", "100000"])
        assert res.exit_code == 2
        line = one_line(res.output)
        assert "--threads" in line and f"0<=x<={MAX_THREADS}" in line, line


def test_the_largest_seed_is_accepted():
    ctx = train.make_context("train", ["data", "--arch", "luong_tiny", "--seed", str(2**64 - 1)])
    assert ctx.params["seed"] == 2**64 - 1


def _fail_allocation(*_args, **_kwargs):  # noqa: ANN002, ANN003, ANN202
    raise RuntimeError(ALLOC_FAILURE)


def test_a_model_too_large_to_allocate_names_the_size_options(data_dir, tmp_path, monkeypatch):
    from nmtkit.models import registry

    monkeypatch.setattr(registry.REGISTRY, "build_model", _fail_allocation)
    monkeypatch.setattr(registry, "build_model", _fail_allocation)
    res = CliRunner().invoke(train, [str(data_dir), "--arch", "luong_tiny", "--save-dir", str(tmp_path / "ck"), "--device", "cpu",
                                     "--hidden-size", "1000000", "--no-progress"])
    assert res.exit_code == 1, res.output
    line = one_line(res.output)
    assert line.startswith("nmtkit-train: error: out of memory building luong_tiny") and "--hidden-size 1000000" in line
    assert "--embed-dim" in line and "can't allocate memory" in line, line


@pytest.mark.parametrize("error", [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 74.51 GiB"),
                                   MemoryError(), RuntimeError(ALLOC_FAILURE)])
def test_a_beam_too_large_to_allocate_names_beam_and_batch_size(random_ckpt, monkeypatch, error):
    from nmtkit.generate.search import EagerSearch

    def fail(*_args, **_kwargs):  # noqa: ANN002, ANN003, ANN202
        raise error

    monkeypatch.setattr(EagerSearch, "__call__", fail)
    res = CliRunner().invoke(translate, ["--path", str(random_ckpt), "--beam", "100000", "--device", "cpu"],
                             input="the cat\n")
    assert res.exit_code == 1, res.output
    line = one_line(res.output)
    assert line.startswith("nmtkit-translate: error: out of memory in the search") and "--beam 100000" in line
    assert "--batch-size" in line, line


def test_other_runtime_errors_are_not_taken_for_allocation_failures():
    with pytest.raises(RuntimeError, match="shape mismatch"):
        with allocation_guard("x"):
            raise RuntimeError("shape mismatch")


def test_an_allocation_failure_anywhere_is_still_one_line():
    import click

    @click.command()
    @handle_errors("nmtkit-x")
    def cmd() -> None:
        torch.empty(0)
        raise RuntimeError(ALLOC_FAILURE)

    res = CliRunner().invoke(cmd, [])
    assert res.exit_code == 1
    assert one_line(res.output).startswith("nmtkit-x: error: out of memory: [enforce fail")


# -- BPE codes ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("codes,where,message", [
    (b"#version: 0.2\nt h\nth e</w>\nc a\xff\xfe t\n", ":4:", "invalid UTF-8 at byte 3"),
    (b"#version: 0.2\nt h\nth e r</w>\n", ":3:", "not a BPE merge"),
    (b"#version: zero\nt h\n", ":1:", "not a subword-nmt version line"),
    (b"#version: 0.3\nt h\n", ":1:", "BPE codes version 0.3 is not supported"),
    (b"#version: 1.0\nt h\n", ":1:", "BPE codes version 1.0 is not supported"),
    (b"#version: 0.2\n", ":", "holds no BPE merges"),
    (b"", ":", "holds no BPE merges"),
    (b"t h\n\nc a\n", ":2:", "not a BPE merge"),
])
def test_bad_bpe_codes_name_file_and_line(tiny_parallel, tmp_path, codes, where, message):
    path = tmp_path / "bad.codes"
    path.write_bytes(codes)
    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(tiny_parallel / "train"),
                                          "--destdir", str(tmp_path / "bin"), "--bpe", "subword-nmt",
                                          "--bpe-codes", str(path)])
    assert res.exit_code == 1, res.output
    line = one_line(res.output)
    assert line.startswith(f"nmtkit-preprocess: error: {path}{where} {message}"), line
    assert not (tmp_path / "bin").exists()


def test_bad_codes_in_a_data_directory_stop_training_before_it_starts(data_dir, tmp_path):
    import json

    meta = json.loads((data_dir / "meta.json").read_text(encoding="utf-8"))
    meta["bpe"] = {"type": "subword-nmt", "codes": {"en": "bpe.codes", "de": "bpe.codes"}}
    (data_dir / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    (data_dir / "bpe.codes").write_bytes(b"#version: 0.2\nd i\n\xc3(\n")
    res = CliRunner().invoke(train, [str(data_dir), "--arch", "luong_tiny", "--save-dir", str(tmp_path / "ck"), "--device", "cpu",
                                     "--max-update", "1", "--no-progress"])
    assert res.exit_code == 1, res.output
    assert one_line(res.output).startswith(f"nmtkit-train: error: {data_dir / 'bpe.codes'}:3: invalid UTF-8")


# -- values beyond what the arithmetic holds ------------------------------------------------------
@pytest.mark.parametrize("flag, value, message", [
    ("--beam", "99999999999999999999999", "--beam must be <= 100000"),
    ("--max-len-a", "1e18", "--max-len-a must be <= 1000"),
    ("--max-len-b", "9223372036854775807", "--max-len-b must be <= 1000000"),
    ("--lenpen", "1000", "--lenpen must be <= 10"),
    ("--lenpen", "-1000", "--lenpen must be >= -10"),
    ("--unkpen", "-1e308", "--unkpen must be >= -1000"),
])
def test_search_options_that_overflowed_are_one_line(random_ckpt, flag, value, message):
    res = CliRunner().invoke(translate, ["--path", str(random_ckpt), "--threads", "1", flag, value], input="the cat\n")
    assert res.exit_code == 2 and message in one_line(res.output)  # out of range: a usage error (README)
    from nmtkit.generate.search_options import SearchOptions

    name = flag[2:].replace("-", "_")
    with pytest.raises(NmtkitError, match=message):  # the library says the same
        SearchOptions(**{name: type(getattr(SearchOptions(), name))(float(value))})


def test_model_sizes_that_overflowed_torch_are_one_line(data_dir, tmp_path):
    res = CliRunner().invoke(train, [str(data_dir), "--arch", "luong_tiny", "--save-dir", str(tmp_path / "ck"), "--embed-dim", "99999999999999999999999"])
    assert res.exit_code == 1
    assert "embed_dim must be <= 2147483647" in one_line(res.output)
    assert not (tmp_path / "ck").exists()


@pytest.mark.parametrize("cmd, args", [
    ("score", ["--sys", "a", "--sys", "b", "--ref", "r", "--paired-bootstrap", "--bootstrap-samples", "99999999999999999999999"]),
    ("preprocess", ["-s", "en", "-t", "de", "--trainpref", "t", "--destdir", "d", "--bpe", "subword-nmt",
                    "--bpe-merges", "99999999999999999999999"]),
])
def test_counts_beyond_their_bound_are_usage_errors(cmd, args):
    res = CliRunner().invoke({"score": score, "preprocess": preprocess}[cmd], args)
    assert res.exit_code == 2 and "<=10000000" in one_line(res.output).replace(" ", "")
