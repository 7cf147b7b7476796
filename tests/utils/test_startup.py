"""Start-up of the inference commands: the collector paused while they load, and the text
pipelines built before the first line."""
from __future__ import annotations

import gc

from click.testing import CliRunner

from nmtkit.cli.translate import command as translate
from nmtkit.data.text_pipeline import TextPipeline
from nmtkit.generate.translator import Translator
from nmtkit.utils.startup import long_lived


def test_long_lived_pauses_the_collector_then_freezes_what_the_block_made():
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    try:
        with long_lived():
            assert not gc.isenabled()
            kept = [[i] for i in range(1000)]  # container objects the collector tracks
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(kept)
    finally:
        gc.unfreeze()


def test_long_lived_leaves_a_disabled_collector_disabled_and_survives_errors():
    gc.disable()
    try:
        try:
            with long_lived():
                raise ValueError("boom")
        except ValueError:
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()
    try:
        with long_lived():
            raise KeyError("x")
    except KeyError:
        pass
    assert gc.isenabled()
    gc.unfreeze()


def test_build_makes_the_tokenizer_and_bpe_tables_at_once(tmp_path):
    pipe = TextPipeline("en", "moses", bpe_codes_text="#version: 0.2\nt h\nth e</w>\n")
    assert "_moses" not in pipe.__dict__ and pipe._bpe is None
    assert pipe.build() is pipe
    assert "_moses" in pipe.__dict__ and pipe._bpe is not None
    assert pipe.encode("the cat") == (["the", "cat"], ["the", "c@@", "a@@", "t"])


def test_translate_loads_the_model_and_builds_its_pipelines_with_the_collector_paused(random_ckpt, monkeypatch):
    import nmtkit.utils.heap as heap

    loads, builds, heap_calls = [], [], []
    load = Translator.from_checkpoint.__func__
    build = TextPipeline.build

    def spy_load(cls, *args, **kwargs):
        loads.append(gc.isenabled())
        return load(cls, *args, **kwargs)

    def spy_build(self):
        builds.append(gc.isenabled())
        return build(self)

    monkeypatch.setattr(Translator, "from_checkpoint", classmethod(spy_load))
    monkeypatch.setattr(TextPipeline, "build", spy_build)
    monkeypatch.setattr(heap, "keep_freed_memory", lambda: heap_calls.append(1) or True)
    try:
        res = CliRunner().invoke(translate, ["--quiet", "--threads", "1", "--device", "cpu", "--path", str(random_ckpt)],
                                 input="the cat .\n")
    finally:
        gc.unfreeze()
    assert res.exit_code == 0, res.output
    assert loads == [False] and len(builds) >= 2 and not any(builds) and gc.isenabled()
    assert heap_calls == [1]  # a CPU run keeps freed memory in the heap


def test_a_bad_search_setting_is_refused_before_the_model_loads(random_ckpt, monkeypatch):
    def loaded(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the model was loaded before the search options were checked")

    monkeypatch.setattr(Translator, "from_checkpoint", classmethod(loaded))
    res = CliRunner().invoke(translate, ["--quiet", "--path", str(random_ckpt), "--beam", "2", "--nbest", "3"], input="a\n")
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.output.strip() == "nmtkit-translate: error: --nbest must be <= --beam (2), got 3 (see --help)"


def _torch_imported_after(command: str, args: list[str]) -> tuple[int, bool]:
    """Run a command's click entry in a fresh interpreter -> (exit code, whether torch got imported)."""
    import json
    import subprocess
    import sys

    code = ("import sys, json; from click.testing import CliRunner; "
            f"from nmtkit.cli.{command} import command; r = CliRunner().invoke(command, {json.dumps(args)}); "
            "print(json.dumps([r.exit_code, 'torch' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    exit_code, imported = json.loads(out.strip().splitlines()[-1])
    return exit_code, imported


def test_option_and_path_errors_come_before_torch_is_imported(random_ckpt, tmp_path):
    """A wrong flag or checkpoint path is a one-line error at once, not after about a second of
    importing torch."""
    text = tmp_path / "x.txt"
    text.write_text("a\n", encoding="utf-8")
    assert _torch_imported_after("translate", ["--path", str(random_ckpt), "--beam", "2", "--nbest", "3"]) == (2, False)
    assert _torch_imported_after("translate", ["--path", str(tmp_path / "missing.pt"), "--input", str(text)]) == (1, False)
    assert _torch_imported_after("align", ["--path", str(tmp_path / "missing.pt"), "--source", str(text),
                                           "--target", str(text)]) == (1, False)
    assert _torch_imported_after("align", ["--path", str(random_ckpt), "--source", str(text), "--target", str(text),
                                           "--possible", str(text)]) == (1, False)
