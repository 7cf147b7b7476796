"""Issue 20, kinds 1-3: outputs that are not regular files, outputs over inputs, UTF-8 in any locale.

Devices, FIFOs, ``/dev/stdout`` and ``-`` are written in place and in order (never replaced by a
regular file); no command writes over what it reads, and ``--overwrite`` replaces only a directory
nmtkit wrote; every stream is UTF-8 whatever the locale, and a closed or full stdout/stdin is one
line.  Stream and locale cases run the commands as subprocesses (``python -m nmtkit.cli.X``)."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import make_checkpoint, one_line, write
from nmtkit.cli.align import command as align
from nmtkit.cli.average import command as average
from nmtkit.cli.preprocess import command as preprocess
from nmtkit.cli.sample import command as sample
from nmtkit.cli.score import command as score
from nmtkit.cli.train import command as train
from nmtkit.cli.translate import command as translate
from nmtkit.utils.stdio import direct_target
from nmtkit.utils.textio import atomic_write

LINES = [f"the cat sees Anna {k} ." if k % 3 else "der Hund läuft ." for k in range(30)]
#: A word outside the checkpoint's vocabulary: --replace-unk copies it into the output.
CJK = "東京"


def error_line(module: str, stderr: bytes) -> str:
    """The one error line of a subprocess (nmtkit-score prints its tables on stderr before it)."""
    text = stderr.decode("utf-8")
    assert "Traceback" not in text and "Exception ignored" not in text, text
    errors = [line for line in text.splitlines() if ": error: " in line]
    assert len(errors) == 1 and text.rstrip().endswith(errors[0]), text
    return errors[0] if module.endswith("score") else one_line(text)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    return make_checkpoint(tmp_path_factory.mktemp("ckpt") / "m.pt")


@pytest.fixture
def src(tmp_path) -> Path:
    return write(tmp_path / "in.txt", "".join(line + "\n" for line in LINES))


def tr_args(ckpt: Path, *extra: str) -> list[str]:
    return ["--path", str(ckpt), "--quiet", "--threads", "1", "--beam", "1", "--max-len-b", "3", *extra]


def run_module(module: str, args: list[str], **kw) -> subprocess.CompletedProcess:  # noqa: ANN003
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, timeout=120, **kw)


def expected_output(ckpt: Path, src: Path, tmp_path: Path, *extra: str) -> bytes:
    ref = tmp_path / "ref.out"
    res = CliRunner().invoke(translate, tr_args(ckpt, "--input", str(src), "--output", str(ref), *extra))
    assert res.exit_code == 0, res.output
    return ref.read_bytes()


# -- 1. outputs that are not regular files --------------------------------------------------------
def null_node(tmp_path: Path) -> Path:
    node = tmp_path / "null"
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # the device numbers of /dev/null
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    return node


def test_a_character_device_output_stays_a_device(ckpt, src, tmp_path):
    node = null_node(tmp_path)
    res = CliRunner().invoke(translate, tr_args(ckpt, "--input", str(src), "--output", str(node),
                                                "--alignment-file", str(node)))
    assert res.exit_code == 0, res.output
    assert stat.S_ISCHR(node.lstat().st_mode) and node.lstat().st_rdev == os.makedev(1, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "null"]  # no temporary file left


def test_a_symlink_to_a_device_is_written_through(tmp_path):
    node = null_node(tmp_path)
    link = tmp_path / "out.txt"
    link.symlink_to(node)
    with atomic_write(link) as fh:
        fh.write("x\n")
    assert link.is_symlink() and stat.S_ISCHR(node.lstat().st_mode)


def test_align_writes_links_to_a_device_and_the_dictionary_to_a_file(ckpt, src, tmp_path):
    node = null_node(tmp_path)
    lex = tmp_path / "lex.txt"
    res = CliRunner().invoke(align, ["--path", str(ckpt), "--source", str(src), "--target", str(src),
                                     "--output", str(node), "--build-dict", str(lex), "--dict-min-count", "1"])
    assert res.exit_code == 0, res.output
    assert stat.S_ISCHR(node.lstat().st_mode) and lex.is_file()


def test_a_fifo_reader_gets_every_line_in_order(ckpt, src, tmp_path):
    want = expected_output(ckpt, src, tmp_path, "-v")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    res = CliRunner().invoke(translate, tr_args(ckpt, "-v", "--input", str(src), "--output", str(fifo)))
    reader.join(timeout=30)
    assert res.exit_code == 0, res.output
    assert got == [want] and stat.S_ISFIFO(fifo.lstat().st_mode)
    ids = [int(line.split(b"\t")[0][2:]) for line in want.splitlines() if line.startswith(b"S-")]
    assert ids == list(range(len(LINES)))


@pytest.mark.parametrize("target", ["/dev/stdout", "-", "/proc/self/fd/1"])
def test_dev_stdout_and_dash_write_to_the_pipe(ckpt, src, tmp_path, target):
    want = expected_output(ckpt, src, tmp_path, "--replace-unk")
    res = run_module("nmtkit.cli.translate", tr_args(ckpt, "--input", str(src), "--output", target, "--replace-unk"),
                     cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == want and len(res.stdout.splitlines()) == len(LINES)
    assert not (tmp_path / "-").exists()


def test_dash_is_stdout_for_every_writer(ckpt, src, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # score prints its scores on stdout, so a plot there would be mixed with them: refused, in one line
    res = CliRunner().invoke(score, ["--sys", str(src), "--ref", str(src), "--plot", "-"])
    assert res.exit_code == 1 and res.output.strip().splitlines() == [
        "nmtkit-score: error: --plot -: the scores are written to standard output; give the plot a file name"]
    res = CliRunner().invoke(average, ["-i", str(ckpt), "-o", "-"])
    assert res.exit_code == 0, res.output
    assert res.stdout_bytes.startswith(b"PK\x03\x04")
    res = CliRunner().invoke(align, ["--path", str(ckpt), "--source", str(src), "--target", str(src), "--output", "-"])
    assert res.exit_code == 0, res.output
    assert len(res.stdout.splitlines()) == len(LINES)
    assert not (tmp_path / "-").exists()


def test_direct_targets(tmp_path):
    regular = write(tmp_path / "f.txt", "x\n")
    link = tmp_path / "to_stdout"
    link.symlink_to("/dev/stdout")
    assert direct_target("-") == direct_target("/dev/stdout") == direct_target(link) == 1
    assert direct_target(f"/proc/{os.getpid()}/fd/2") == direct_target("/dev/fd/2") == 2
    assert direct_target(regular) is None and direct_target(tmp_path / "new.txt") is None
    assert direct_target("/dev/null") == "/dev/null"


# -- 2. never delete what was read -------------------------------------------------------------
def pre_args(corpus: Path, dest: Path | str, *extra: str) -> list[str]:
    return ["-s", "en", "-t", "de", "--trainpref", str(corpus / "train"), "--destdir", str(dest), *extra]


def corpus_bytes(corpus: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in corpus.iterdir() if p.is_file()}


@pytest.mark.parametrize("dest", ["corp", ".", "corp/../corp", "link", "link/"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_preprocess_never_replaces_its_corpus(tiny_parallel, tmp_path, monkeypatch, dest, overwrite):
    corpus = tmp_path / "corp"
    tiny_parallel.rename(corpus)
    (tmp_path / "link").symlink_to(corpus)
    before = corpus_bytes(corpus)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(preprocess, pre_args(Path("corp"), dest, *(["--overwrite"] if overwrite else [])))
    assert res.exit_code == 1
    line = one_line(res.output)
    assert line.startswith(f"nmtkit-preprocess: error: {dest}") and "--overwrite" not in line, line
    assert corpus_bytes(corpus) == before and sorted(os.listdir(tmp_path)) == ["corp", "link"]


def test_preprocess_refuses_a_destdir_holding_its_dictionary_or_codes(tiny_parallel, tmp_path):
    dest = tmp_path / "bin"
    assert CliRunner().invoke(preprocess, pre_args(tiny_parallel, dest)).exit_code == 0
    before = corpus_bytes(dest)
    for opt, name in (("--srcdict", "dict.en.txt"), ("--tgtdict", "dict.de.txt")):
        res = CliRunner().invoke(preprocess, pre_args(tiny_parallel, dest, opt, str(dest / name), "--overwrite"))
        assert res.exit_code == 1 and f"the input {dest / name} ({opt})" in one_line(res.output)
    assert corpus_bytes(dest) == before


def test_preprocess_input_reached_through_a_symlink_into_destdir(tiny_parallel, tmp_path):
    (tmp_path / "view").symlink_to(tiny_parallel)
    res = CliRunner().invoke(preprocess, pre_args(tmp_path / "view", tiny_parallel, "--overwrite"))
    assert res.exit_code == 1 and "contains the input" in one_line(res.output)


def test_overwrite_replaces_only_what_nmtkit_wrote(tiny_parallel, tmp_path):
    dest = tmp_path / "bin"
    write(dest / "meta.json", '{"format": "something-else"}\n')
    res = CliRunner().invoke(preprocess, pre_args(tiny_parallel, dest, "--overwrite"))
    assert res.exit_code == 1
    line = one_line(res.output)
    assert "not written by nmtkit-preprocess" in line and "--overwrite" not in line
    assert (dest / "meta.json").read_text() == '{"format": "something-else"}\n'
    out = tmp_path / "mine"
    write(out / "notes.txt", "keep\n")
    res = CliRunner().invoke(sample, ["--out", str(out), "--train", "5", "--valid", "2", "--test", "2", "--overwrite"])
    assert res.exit_code == 1 and "--overwrite" not in one_line(res.output)
    assert (out / "notes.txt").read_text() == "keep\n"


def test_translate_output_over_its_input_is_refused(ckpt, src, tmp_path):
    hard = tmp_path / "hard.txt"
    os.link(src, hard)
    soft = tmp_path / "soft.txt"
    soft.symlink_to(src)
    before = src.read_bytes()
    for out in (src, hard, soft, tmp_path / "sub" / ".." / "in.txt"):
        for opt in ("--output", "--alignment-file"):
            res = CliRunner().invoke(translate, tr_args(ckpt, "--input", str(src), opt, str(out)))
            assert res.exit_code == 1, res.output
            assert one_line(res.output).startswith(f"nmtkit-translate: error: {out}: {opt} is the input")
    res = CliRunner().invoke(translate, tr_args(ckpt, "--output", str(ckpt)), input="the cat\n")
    assert res.exit_code == 1 and "(--path)" in one_line(res.output)
    assert src.read_bytes() == before


def test_two_outputs_in_one_file_are_refused(ckpt, src, tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("kept\n")
    for second in (out, tmp_path / "sub" / ".." / "out.txt"):
        res = CliRunner().invoke(translate, tr_args(ckpt, "--input", str(src), "--output", str(out),
                                                    "--alignment-file", str(second)))
        assert res.exit_code == 1, res.output
        assert one_line(res.output).startswith(f"nmtkit-translate: error: {second}: --alignment-file is the same file as --output")
    assert out.read_text() == "kept\n"
    res = CliRunner().invoke(align, ["--path", str(ckpt), "--source", str(src), "--target", str(src), "--output", str(out),
                                     "--build-dict", str(out)])
    assert res.exit_code == 1 and "is the same file as --output" in one_line(res.output)
    res = CliRunner().invoke(translate, tr_args(ckpt, "--input", str(src), "--output", os.devnull, "--alignment-file", os.devnull))
    assert res.exit_code == 0, res.output


def test_other_commands_refuse_outputs_over_inputs(ckpt, src, tmp_path, data_dir):
    before = src.read_bytes(), ckpt.read_bytes()
    cases = [
        (align, ["--path", str(ckpt), "--source", str(src), "--target", str(src), "--output", str(src)]),
        (align, ["--path", str(ckpt), "--source", str(src), "--target", str(src), "--build-dict", str(src)]),
        (align, ["--path", str(ckpt), "--data", str(data_dir), "--split", "valid", "--output", str(data_dir / "x")]),
        (score, ["--sys", str(src), "--ref", str(src), "--plot", str(src)]),
        (average, ["-i", str(ckpt), str(ckpt), "-o", str(ckpt)]),
        (train, [str(data_dir), "--arch", "luong_tiny", "--save-dir", str(data_dir)]),
        (train, [str(data_dir), "--arch", "luong_tiny", "--save-dir", str(data_dir / "ckpt")]),
    ]
    for cmd, args in cases:
        res = CliRunner().invoke(cmd, args)
        assert res.exit_code == 1, (args, res.output)
        assert "nmtkit never writes over what it reads" in one_line(res.output)
    assert (src.read_bytes(), ckpt.read_bytes()) == before and not (data_dir / "ckpt").exists()


# -- 3. UTF-8 whatever the locale, closed and full streams ----------------------------------------
def locales() -> list[dict[str, str]]:
    out = [{"LC_ALL": "C", "PYTHONUTF8": "0"}]
    have = subprocess.run(["locale", "-a"], capture_output=True, text=True).stdout.lower().split() \
        if os.path.exists("/usr/bin/locale") else []
    latin1 = [name for name in have if name.replace("-", "").endswith(("iso88591", "iso885915"))]
    out.append({"LC_ALL": latin1[0], "PYTHONUTF8": "0"} if latin1 else {})
    return out


@pytest.mark.parametrize("loc", locales(), ids=["C", "latin1"])
def test_output_is_utf8_in_any_locale(ckpt, tmp_path, loc):
    if not loc:
        pytest.skip("no ISO-8859-1 locale installed (locale -a)")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "LANG", "LC_CTYPE")} | loc
    src = write(tmp_path / "in.txt", "".join(f"{CJK}\n" if k % 2 else "Zoë\n" for k in range(40)))
    args = tr_args(ckpt, "--replace-unk", "--unkpen", "-1000")
    want = expected_output(ckpt, src, tmp_path, "--replace-unk", "--unkpen", "-1000")
    assert CJK.encode("utf-8") in want
    for how in (["--input", str(src)], ["--input", "-"]):
        res = run_module("nmtkit.cli.translate", [*args, *how], env=env, input=src.read_bytes())
        assert res.returncode == 0, res.stderr.decode("utf-8", "replace")
        assert res.stdout == want and res.stdout.count(b"\n") == 40
    for module in (["nmtkit.cli.align"], ["nmtkit", "align"]):  # click's own help text, "∝" included
        res = run_module(module[0], [*module[1:], "--help"], env=env)
        assert res.returncode == 0 and "∝".encode("utf-8") in res.stdout, res.stderr


def test_stderr_is_utf8_in_the_c_locale(tmp_path):
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0"}
    missing = tmp_path / "Zoë.txt"
    res = run_module("nmtkit.cli.score", ["--sys", str(missing), "--ref", str(missing)], env=env)
    assert res.returncode == 1
    assert one_line(res.stderr.decode("utf-8")) == f"nmtkit-score: error: {missing}: no such file"


def close_fd(fd: int):  # noqa: ANN201
    return lambda: os.close(fd)


def test_closed_stdin_is_one_line(ckpt, src):
    for module, args in (("nmtkit.cli.translate", tr_args(ckpt)), ("nmtkit.cli.score", ["--ref", str(src)])):
        res = run_module(module, args, preexec_fn=close_fd(0))
        assert res.returncode == 1
        line = one_line(res.stderr.decode())
        assert line.startswith(f"{module.replace('.cli.', '-')}: error: <stdin>: standard input is closed"), line


def test_closed_stdout_is_one_line(ckpt, src):
    for module, args in (("nmtkit.cli.translate", tr_args(ckpt, "--input", str(src))),
                         ("nmtkit.cli.score", ["--sys", str(src), "--ref", str(src)]),
                         ("nmtkit.cli.align", ["--path", str(ckpt), "--source", str(src), "--target", str(src)])):
        res = run_module(module, args, preexec_fn=close_fd(1))
        assert res.returncode == 1
        line = error_line(module, res.stderr)
        assert line.startswith(f"{module.replace('.cli.', '-')}: error: <stdout>: standard output is closed"), line


def test_closed_stdout_does_not_stop_a_run_writing_to_a_file(ckpt, src, tmp_path):
    out = tmp_path / "hyp.txt"
    res = run_module("nmtkit.cli.translate", tr_args(ckpt, "--input", str(src), "--output", str(out)),
                     preexec_fn=close_fd(1))
    assert res.returncode == 0, res.stderr
    assert out.read_bytes() == expected_output(ckpt, src, tmp_path)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_stdout_on_dev_full_is_one_line(ckpt, src):
    for module, args in (("nmtkit.cli.translate", tr_args(ckpt, "--input", str(src))),
                         ("nmtkit.cli.score", ["--sys", str(src), "--ref", str(src), "--sentence-level"])):
        with open("/dev/full", "wb") as full:
            res = subprocess.run([sys.executable, "-m", module, *args], stdout=full, stderr=subprocess.PIPE, timeout=120)
        assert res.returncode == 1
        assert error_line(module, res.stderr) == f"{module.replace('.cli.', '-')}: error: <stdout>: No space left on device"


def test_align_json_and_links_on_stdout_are_refused(ckpt, src, tmp_path):
    gold = tmp_path / "gold.align"
    gold.write_text("".join("0-0\n" for _ in LINES), encoding="utf-8")
    res = CliRunner().invoke(align, ["--path", str(ckpt), "--source", str(src), "--target", str(src), "--gold", str(gold),
                                     "--json", "--output", "-"])
    assert res.exit_code == 1 and res.output.strip().splitlines() == [
        "nmtkit-align: error: --json prints the scores on standard output: give --output a file for the links"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_failed_output_is_named_not_the_alignment_file(ckpt, src, tmp_path):
    """--output on a full device and --alignment-file on a good file: the error names the output."""
    align_file = tmp_path / "hyp.align"
    res = run_module("nmtkit.cli.translate", tr_args(ckpt, "--input", str(src), "--output", "/dev/full",
                                                    "--alignment-file", str(align_file), "--print-alignment"))
    assert res.returncode == 1
    assert error_line("nmtkit.cli.translate", res.stderr) == "nmtkit-translate: error: /dev/full: No space left on device"
