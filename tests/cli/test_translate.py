"""nmtkit-translate: never loses or reorders a line; batching, ensembles and options behave."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st


from tests.helpers import invoke_translate, make_checkpoint


line_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=40)
word_line = st.lists(st.sampled_from("the a cat dog sees Anna . , xyzzy Zoë".split() + ["\u2028", "\r", "\x85", "  "]), max_size=30).map(" ".join)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(line_text, word_line), max_size=12), buffer=st.sampled_from([1, 3, 100]))
def test_one_output_line_per_input_line(random_ckpt, lines, buffer):
    data = "".join(l + "\n" for l in lines).encode("utf-8")
    res = invoke_translate(["--path", str(random_ckpt), "--beam", "2", "--max-len-b", "5", "--buffer-size", str(buffer)], data)
    assert res.exit_code == 0, res.output
    out = res.stdout_bytes.decode("utf-8").split("\n")
    assert out[-1] == "" and len(out) - 1 == len(lines)
    for src, hyp in zip(lines, out):
        if not src.rstrip("\r").strip(" \t"):  # words are separated by spaces and tabs only
            assert hyp == ""  # empty input line -> empty output line


def test_batched_equals_one_at_a_time(random_ckpt):
    src = "the cat sees the dog .\nAnna sleeps\n\na dog runs , the cat sits .\nthe\n"
    batched = invoke_translate(["--path", str(random_ckpt), "--batch-size", "16", "--buffer-size", "100", "-v"], src)
    single = invoke_translate(["--path", str(random_ckpt), "--batch-size", "1", "--buffer-size", "1", "-v"], src)
    assert batched.exit_code == 0 and single.exit_code == 0
    assert batched.stdout == single.stdout


def test_ensemble_of_one_model_twice_equals_the_model(random_ckpt):
    src = "the cat sees the dog .\nAnna sleeps .\n"
    one = invoke_translate(["--path", str(random_ckpt), "-v", "--nbest", "3"], src)
    two = invoke_translate(["--path", f"{random_ckpt}:{random_ckpt}", "-v", "--nbest", "3"], src)
    assert one.exit_code == 0 and one.stdout == two.stdout


def test_verbose_and_nbest_formats(random_ckpt):
    res = invoke_translate(["--path", str(random_ckpt), "-v", "--nbest", "2", "--beam", "3"], "the cat .\n")
    tags = [l.split("\t")[0] for l in res.stdout.splitlines()]
    assert tags == ["S-0", "H-0", "D-0", "P-0", "A-0", "H-0", "D-0", "P-0", "A-0"]
    res = invoke_translate(["--path", str(random_ckpt), "--nbest", "2", "--beam", "3"], "the cat .\nthe dog\n")
    lines = res.stdout.splitlines()
    assert [l.split(" ||| ")[0] for l in lines] == ["0", "0", "1", "1"]
    scores = [float(l.split(" ||| ")[2]) for l in lines[:2]]
    assert scores[0] >= scores[1]


def test_alignment_indexes_input_and_output_words(random_ckpt, tmp_path):
    src = "the cat sees the dog .\n"
    res = invoke_translate(["--path", str(random_ckpt), "--print-alignment"], src)
    hyp, links = res.stdout.rstrip("\n").split(" ||| ")
    for link in links.split():
        i, j = map(int, link.split("-"))
        assert 0 <= i < len(src.split()) and 0 <= j < len(hyp.split())
    res2 = invoke_translate(["--path", str(random_ckpt), "--alignment-file", str(tmp_path / "a.txt")], src)
    assert res2.stdout.rstrip("\n") == hyp and (tmp_path / "a.txt").read_text().strip() == links


def test_alignment_file_has_a_line_per_nbest_entry_matching_the_inline_ones(random_ckpt, tmp_path):
    src = "the cat sees the dog .\nthe man sleeps .\n"
    inline = invoke_translate(["--path", str(random_ckpt), "--nbest", "3", "--beam", "3", "--print-alignment"], src)
    wanted = [line.split(" ||| ")[3] for line in inline.stdout.splitlines()]
    res = invoke_translate(["--path", str(random_ckpt), "--nbest", "3", "--beam", "3", "--alignment-file", str(tmp_path / "a.txt")], src)
    assert res.exit_code == 0 and len(res.stdout.splitlines()) == 6
    assert (tmp_path / "a.txt").read_text().splitlines() == wanted  # line k of the file: line k of the output


def test_long_line_is_truncated_with_warning_not_dropped(random_ckpt):
    long = " ".join(["cat"] * 30)
    res = invoke_translate(["--path", str(random_ckpt), "--max-source-len", "10", "--max-len-b", "3", "--max-len-a", "0"], f"the\n{long}\nthe dog\n")
    assert res.exit_code == 0
    assert len(res.stdout.split("\n")) - 1 == 3
    assert "nmtkit-translate: warning: <stdin>:2: 30 source tokens, truncated to 10" in res.stderr.splitlines()


def test_invalid_utf8_with_strict_is_an_error_after_earlier_lines(random_ckpt, tmp_path):
    res = invoke_translate(["--path", str(random_ckpt), "--buffer-size", "100", "--strict"], b"the cat\nthe dog\nbad \xff\nlater\n")
    assert res.exit_code == 1
    assert len(res.stdout.splitlines()) == 2  # both earlier lines were written
    assert "<stdin>:3: invalid UTF-8" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_invalid_utf8_with_strict_leaves_output_files_as_they_were(random_ckpt, tmp_path):
    outs = tmp_path / "outs"
    outs.mkdir()
    out, align = outs / "keep.txt", outs / "keep.align"
    out.write_text("old 1\nold 2\n")
    align.write_text("0-0\n")
    res = invoke_translate(["--path", str(random_ckpt), "--buffer-size", "1", "--strict", "--output", str(out),
               "--alignment-file", str(align)], b"the cat\nthe dog\nbad \xff\nlater\n")
    assert res.exit_code == 1 and "<stdin>:3: invalid UTF-8" in res.stderr
    assert out.read_text() == "old 1\nold 2\n" and align.read_text() == "0-0\n"
    assert sorted(p.name for p in outs.iterdir()) == ["keep.align", "keep.txt"]  # no temporary file left


@pytest.mark.parametrize("args, message, status", [
    (["--beam", "0"], "--beam must be >= 1, got 0", 2),  # refused when parsed, in the library's words
    (["--beam", "2", "--nbest", "3"], "--nbest must be <= --beam (2), got 3", 2),  # a combination: a usage error too
])
def test_bad_search_options(random_ckpt, args, message, status):
    res = invoke_translate(["--path", str(random_ckpt), *args], "the\n")
    assert res.exit_code == status and message in res.stderr


def test_missing_corrupt_and_mismatched_checkpoints(random_ckpt, tmp_path):
    res = invoke_translate(["--path", str(tmp_path / "nope.pt")], "x\n")
    assert res.exit_code == 1 and "nope.pt" in res.stderr
    bad = tmp_path / "bad.pt"
    bad.write_bytes(random_ckpt.read_bytes()[:500])
    res = invoke_translate(["--path", str(bad)], "x\n")
    assert res.exit_code == 1 and "bad.pt: not a readable nmtkit checkpoint" in res.stderr
    other = make_checkpoint(tmp_path / "other.pt", words="completely different words here")
    res = invoke_translate(["--path", f"{random_ckpt}:{other}"], "x\n")
    assert res.exit_code == 1 and "dictionar" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_a_checkpoint_with_flipped_bits_in_a_weight_is_refused(random_ckpt, tmp_path):
    import struct
    import zipfile

    raw = bytearray(random_ckpt.read_bytes())
    with zipfile.ZipFile(random_ckpt) as archive:
        entry = max((i for i in archive.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    name_len, extra_len = struct.unpack("<HH", raw[entry.header_offset + 26 : entry.header_offset + 30])
    start = entry.header_offset + 30 + name_len + extra_len
    for k in range(start, start + min(64, entry.file_size)):
        raw[k] ^= 0x10  # small changes of value: still finite numbers, so only the checksum can tell
    bad = tmp_path / "flipped.pt"
    bad.write_bytes(bytes(raw))
    res = invoke_translate(["--path", str(bad)], "the cat\n")
    assert res.exit_code == 1 and res.stdout == ""
    assert res.stderr.strip() == f"nmtkit-translate: error: {bad}: corrupt checkpoint (a weight's bytes do not match the checksum stored with them)"


@pytest.mark.parametrize("output, alignments", [("-", "-"), (None, "-"), ("-", "/dev/stdout"), ("/dev/stdout", "-")])
def test_alignments_and_translations_both_on_stdout_are_refused(random_ckpt, output, alignments):
    args = ["--path", str(random_ckpt), "--alignment-file", alignments, *(["--output", output] if output else [])]
    res = invoke_translate(args, "the cat\nthe dog\n")
    assert res.exit_code == 1 and res.stdout == ""
    assert res.stderr.strip().startswith("nmtkit-translate: error: <stdout>: --alignment-file would interleave")


def test_a_checkpoint_replaced_while_it_loads_is_read_from_the_file_first_opened(random_ckpt, tmp_path, monkeypatch):
    import os

    import nmtkit.checkpoint as ck

    live, other = tmp_path / "live.pt", make_checkpoint(tmp_path / "other.pt", seed=3)
    live.write_bytes(random_ckpt.read_bytes())
    real_validate = ck.validate

    def validate_then_replace(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        real_validate(*args, **kwargs)
        os.replace(other, live)  # a trainer saving over the checkpoint being loaded

    monkeypatch.setattr(ck, "validate", validate_then_replace)
    loaded = ck.load_checkpoint(live)  # was "corrupt checkpoint": new checksums against old bytes
    monkeypatch.setattr(ck, "validate", real_validate)
    want = ck.load_checkpoint(random_ckpt)["model"]
    assert all(torch.equal(loaded["model"][k], want[k]) for k in want)


def test_console_script_streams_stdin(random_ckpt):
    proc = subprocess.run([sys.executable, "-m", "nmtkit.cli.translate", "--path", str(random_ckpt), "--threads", "1"],
                          input=b"the cat\n\nthe dog .\n", capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(b"\n") == 3
    assert b"sentences/s" in proc.stderr


def test_data_dir_with_other_dictionaries_is_refused(random_ckpt, tiny_parallel, tmp_path):
    from nmtkit.cli.preprocess import command as preprocess

    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(tiny_parallel / "train"),
                                          "--destdir", str(tmp_path / "bin"), "--thresholdsrc", "2"])
    assert res.exit_code == 0, res.output
    res = invoke_translate(["--path", str(random_ckpt), "--data", str(tmp_path / "bin")], "the cat\n")
    assert res.exit_code == 1 and "the source dictionaries differ" in res.stderr


def test_verbose_without_attention_has_no_alignment_lines(tmp_path):
    ckpt = make_checkpoint(tmp_path / "noattn.pt", arch="rnnencdec_tiny")
    res = invoke_translate(["--path", str(ckpt), "-v"], "the cat .\n")
    assert res.exit_code == 0, res.output
    assert [l.split("\t")[0] for l in res.stdout.splitlines()] == ["S-0", "H-0", "D-0", "P-0"]
    res = invoke_translate(["--path", str(ckpt), "--replace-unk"], "the cat .\n")
    assert res.exit_code == 1 and "needs attention" in res.stderr


def test_alignment_layer_and_heads_options_choose_what_translate_and_align_read(tmp_path):
    """--alignment-layer/--alignment-heads on the command line (fairseq's names): they change the
    links printed, never the translation; a layer the model does not have is a one-line error."""
    from nmtkit.cli.align import command as align

    ckpt = make_checkpoint(tmp_path / "t.pt", "transformer_test", seed=2, init="uniform", init_scale=0.5)
    src = "the cat sees the dog .\nAnna sees a man .\nthe dog sits , the cat runs .\n"
    base = ["--path", str(ckpt), "--print-alignment", "--beam", "2"]
    out = {}
    for extra in ((), ("--alignment-layer", "1"), ("--alignment-layer", "1", "--alignment-heads", "1")):
        res = invoke_translate(base + list(extra), src)
        assert res.exit_code == 0, res.output
        out[extra] = [line.split(" ||| ") for line in res.stdout.splitlines()]
    hyps = {tuple(h for h, _ in lines) for lines in out.values()}
    links = [tuple(a for _, a in lines) for lines in out.values()]
    assert len(hyps) == 1 and len(set(links)) == 3  # the same translations, three different readings
    bad = invoke_translate(base + ["--alignment-layer", "5"], src)
    assert bad.exit_code != 0 and "alignment_layer must be in [-2, 1]" in bad.output
    assert "Traceback" not in bad.output and len(bad.output.strip().splitlines()) == 1
    (tmp_path / "s.txt").write_text(src)
    (tmp_path / "t.txt").write_text("".join(h + "\n" for h, _ in out[()]))
    read = {}
    for extra in ((), ("--alignment-layer", "1")):
        res = CliRunner().invoke(align, ["--path", str(ckpt), "--source", str(tmp_path / "s.txt"), "--target",
                                         str(tmp_path / "t.txt"), "--device", "cpu", "--threads", "1", *extra])
        assert res.exit_code == 0, res.output
        read[extra] = res.stdout
    assert read[()] != read[("--alignment-layer", "1")]
