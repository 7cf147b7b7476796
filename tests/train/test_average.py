"""nmtkit average: the mean of its inputs' parameters, an ordinary checkpoint that translates,
--last N picks the newest epoch checkpoints, and different models are refused with the list
of differences."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from nmtkit.cli.average import command as average
from nmtkit.cli.translate import command as translate
from nmtkit.errors import NmtkitError
from nmtkit.train.average import average_checkpoints, last_epoch_checkpoints
from nmtkit.checkpoint import load_checkpoint, load_model

from tests.helpers import make_checkpoint

torch.set_num_threads(1)


def run_average(*args: str):
    return CliRunner().invoke(average, list(args))


def mean_of(paths) -> dict[str, torch.Tensor]:
    states = [load_checkpoint(p)["model"] for p in paths]
    return {k: torch.stack([s[k].double() for s in states]).mean(0).float() for k in states[0]}


def test_average_is_the_mean_and_translates(tmp_path):
    paths = [make_checkpoint(tmp_path / f"c{i}.pt", seed=i) for i in range(3)]
    out = tmp_path / "avg.pt"
    res = run_average("--inputs", *map(str, paths), "-o", str(out))
    assert res.exit_code == 0, res.output
    avg = load_checkpoint(out)
    expected = mean_of(paths)
    assert avg["model"].keys() == expected.keys()
    for k, v in expected.items():
        assert avg["model"][k].dtype == v.dtype
        torch.testing.assert_close(avg["model"][k], v, atol=1e-7, rtol=1e-6)
    # really a mean, not one of the inputs
    first = load_checkpoint(paths[0])["model"]
    assert any(not torch.equal(first[k], avg["model"][k]) for k in first)
    # an ordinary checkpoint: same options, dictionaries and pipelines as its inputs
    src = load_checkpoint(paths[0])
    for key in ("model_name", "model_config", "src_dict", "tgt_dict", "src_pipeline", "tgt_pipeline"):
        assert avg[key] == src[key], key
    model, _ = load_model(out)
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, expected[k], atol=1e-7, rtol=1e-6)
    res = CliRunner().invoke(translate, ["--path", str(out), "--quiet", "--threads", "1", "--beam", "2",
                                         "--max-len-b", "5"], input="the cat sees the dog .\nAnna sleeps .\n")
    assert res.exit_code == 0, res.output
    assert len(res.stdout.splitlines()) == 2


def test_average_of_one_checkpoint_is_that_checkpoint(tmp_path):
    p = make_checkpoint(tmp_path / "c.pt", arch="rnnsearch_tiny")
    payload = average_checkpoints([p])
    for k, v in load_checkpoint(p)["model"].items():
        assert torch.equal(payload["model"][k], v), k


def _epoch_dir(tmp_path: Path, epochs: list[int]) -> Path:
    d = tmp_path / "save"
    d.mkdir()
    for e in epochs:
        make_checkpoint(d / f"checkpoint{e}.pt", seed=e)
    shutil.copy(d / f"checkpoint{epochs[0]}.pt", d / "checkpoint_best.pt")
    shutil.copy(d / f"checkpoint{epochs[-1]}.pt", d / "checkpoint_last.pt")
    return d


def test_last_n_picks_the_newest_epochs_numerically(tmp_path):
    d = _epoch_dir(tmp_path, [1, 2, 9, 10])  # "checkpoint10" sorts before "checkpoint2" as text
    assert last_epoch_checkpoints(d, 2) == [d / "checkpoint9.pt", d / "checkpoint10.pt"]
    out = tmp_path / "avg.pt"
    res = run_average("--last", "2", "--save-dir", str(d), "-o", str(out))
    assert res.exit_code == 0, res.output
    expected = mean_of([d / "checkpoint9.pt", d / "checkpoint10.pt"])
    for k, v in load_checkpoint(out)["model"].items():
        torch.testing.assert_close(v, expected[k], atol=1e-7, rtol=1e-6)
    res = run_average("--last", "5", "--save-dir", str(d), "-o", str(tmp_path / "x.pt"))
    assert res.exit_code == 1 and "found 4" in res.output and len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "x.pt").exists()


@pytest.mark.parametrize("name", ["checkpoint_last.pt", "checkpoint3.pt"])
def test_the_trainers_own_names_are_refused_as_output(tmp_path, name):
    d = _epoch_dir(tmp_path, [1, 2])
    before = (d / name).read_bytes() if (d / name).exists() else None
    res = run_average("--last", "2", "--save-dir", str(d), "-o", str(d / name))
    assert res.exit_code == 1 and "is a name the trainer writes and reads" in res.output
    assert len(res.output.strip().splitlines()) == 1
    assert ((d / name).read_bytes() if (d / name).exists() else None) == before
    res = run_average("--last", "2", "--save-dir", str(d), "-o", str(d / "checkpoint2.pt"))
    assert res.exit_code == 1 and "(--last)" in res.output  # an input, named by the option that chose it


def test_average_needs_inputs_or_last(tmp_path):
    res = run_average("-o", str(tmp_path / "x.pt"))
    assert res.exit_code == 1 and "nothing to average" in res.output
    res = run_average("--last", "2", "-o", str(tmp_path / "x.pt"))
    assert res.exit_code == 1 and "--save-dir" in res.output


def test_different_model_options_are_refused_with_the_differences(tmp_path):
    a = make_checkpoint(tmp_path / "a.pt", seed=0)
    b = make_checkpoint(tmp_path / "b.pt", seed=1, hidden_size=32, encoder_bidirectional=True)
    out = tmp_path / "avg.pt"
    res = run_average("--inputs", str(a), str(b), "-o", str(out))
    assert res.exit_code == 1
    assert len(res.output.strip().splitlines()) == 1
    assert "model_config.hidden_size: 96" in res.output and "32" in res.output
    assert "model_config.encoder_bidirectional: False" in res.output
    assert not out.exists()


def test_different_dictionaries_are_refused(tmp_path):
    a = make_checkpoint(tmp_path / "a.pt", seed=0)
    b = make_checkpoint(tmp_path / "b.pt", seed=1, words="the a cat dog sees . Katze Hund Mann Frau")
    with pytest.raises(NmtkitError) as exc:
        average_checkpoints([a, b])
    assert "src_dict" in str(exc.value) and "tgt_dict" in str(exc.value)


def test_different_architecture_is_refused(tmp_path):
    a = make_checkpoint(tmp_path / "a.pt")
    b = make_checkpoint(tmp_path / "b.pt", arch="rnnsearch_tiny")
    with pytest.raises(NmtkitError, match="model_name: 'luong' in .*, 'rnnsearch' in"):
        average_checkpoints([a, b])


def test_long_differing_values_are_named_not_printed(tmp_path):
    """Two pipelines' BPE codes (often hundreds of kB) are described, so the error stays readable."""
    a = make_checkpoint(tmp_path / "a.pt", seed=0)
    b = make_checkpoint(tmp_path / "b.pt", seed=1)
    ck = load_checkpoint(b)
    ck["src_pipeline"] = {**(ck.get("src_pipeline") or {}), "bpe_codes_text": "#version: 0.2\n" + "a b\n" * 50_000}
    c = tmp_path / "c.pt"  # (not over b: its tensors are mapped from the file)
    torch.save(ck, c)
    with pytest.raises(NmtkitError) as exc:
        average_checkpoints([a, c])
    message = str(exc.value)
    assert "src_pipeline.bpe_codes_text: " in message and "None in " in message and ", a text of 200,014 characters in " in message and len(message) < 500


def test_a_directory_among_the_inputs_is_named_as_one(tmp_path):
    """``--inputs DIR`` said "no such checkpoint" of a directory that exists; checkpoints are named
    the same way everywhere (``checkpoint.not_a_checkpoint_file``), and nothing is written."""
    ck = make_checkpoint(tmp_path / "c0.pt")
    adir = tmp_path / "adir"
    adir.mkdir()
    out = tmp_path / "avg.pt"
    res = run_average("--inputs", str(ck), str(adir), "-o", str(out))
    assert res.exit_code == 1, res.output
    assert res.output.strip() == f"nmtkit-average: error: {adir}: is a directory, not a checkpoint file"
    assert not out.exists()
    res = run_average("--inputs", str(ck), "-o", str(out))
    assert res.exit_code == 0 and "averaged 1 checkpoint (" in res.output, res.output
