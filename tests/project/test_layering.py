"""The library never imports its command line, generation never imports training, and the
data layer imports none of generation, evaluation, training or the command line.

Why: users embed nmtkit (``from nmtkit import Translator``) in services; pulling in click
commands or the trainer there is wrong and, with cycles, fragile.  Imports are read with
``ast`` (also those inside functions), so a lazy import cannot hide a violation.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import nmtkit

PKG = Path(nmtkit.__file__).parent


def _imports(path: Path, root: Path = PKG.parent) -> list[tuple[int, str]]:
    """(line, module) for every import in ``path``, relative imports resolved."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = parts if path.name == "__init__.py" else parts[:-1]
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]  # from nmtkit import cli
    return out


def _violations(where: str, forbidden: str, exempt: tuple[str, ...] = ()) -> list[str]:
    found = []
    for path in sorted((PKG / where).rglob("*.py") if where else PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).as_posix()
        if rel.startswith(exempt):
            continue
        for line, mod in _imports(path):
            if mod == forbidden or mod.startswith(forbidden + "."):
                found.append(f"{rel}:{line} imports {mod}")
    return found


def test_nothing_outside_the_cli_imports_the_cli():
    # ``python -m nmtkit`` and the console scripts (nmtkit.launch) are the command line's entry
    # points, so they may start it
    assert _violations("", "nmtkit.cli", exempt=("nmtkit/cli/", "nmtkit/__main__.py", "nmtkit/launch.py")) == []


def test_generation_does_not_import_training():
    assert _violations("generate", "nmtkit.train") == []


@pytest.mark.parametrize("layer", ["nmtkit.generate", "nmtkit.evaluate", "nmtkit.train", "nmtkit.cli"])
def test_data_imports_no_higher_layer(layer):
    # why: preprocessing and datasets sit under everything else; an import upwards drags
    # models, torch-heavy generation or click into them and makes cycles easy
    assert _violations("data", layer) == []


def test_the_check_sees_lazy_and_relative_imports(tmp_path):
    mod = tmp_path / "nmtkit" / "utils" / "m.py"
    mod.parent.mkdir(parents=True)
    mod.write_text("def f():\n    from nmtkit.cli.common import console\n\nfrom ..cli import translate\nfrom .. import cli\n")
    mods = [m for _, m in _imports(mod, root=tmp_path)]
    assert "nmtkit.cli.common" in mods and "nmtkit.cli.translate" in mods and "nmtkit.cli" in mods


def test_only_the_sample_command_uses_the_sample_generator():
    # the demo corpus generator is a tool, not part of the library
    assert _violations("", "nmtkit.sample", exempt=("nmtkit/sample/", "nmtkit/cli/sample.py")) == []


@pytest.mark.parametrize("forbidden", ["nmtkit.generate", "nmtkit.checkpoint", "torch"])
def test_evaluation_is_pure_metrics(forbidden):
    # why: BLEU, chrF, TER, AER and the symmetrization of links are computed from text and links;
    # loading models, reading checkpoints or touching tensors belongs to generation
    assert _violations("evaluate", forbidden) == []


@pytest.mark.parametrize("layer", ["nmtkit.generate", "nmtkit.evaluate", "nmtkit.train", "nmtkit.cli",
                                   "nmtkit.checkpoint", "nmtkit.sample"])
def test_models_import_nothing_above_themselves(layer):
    # why: a model is what every layer above builds on; int8 and shortlists register their hooks
    # with models/common.py from generate/quantize.py instead of being known here
    assert _violations("models", layer) == []


def test_only_the_bundle_and_training_load_checkpoints():
    # why: one place turns checkpoint files into a ready model for inference (the bundle); the
    # trainer resumes and averages its own.  Loading is anything of nmtkit.checkpoint that reads.
    readers = ("load_checkpoint", "load_model", "build_model_from_checkpoint", "pipelines_from_checkpoint")
    allowed = ("nmtkit/checkpoint.py", "nmtkit/generate/bundle.py", "nmtkit/train/")
    found = [v for name in readers for v in _violations("", f"nmtkit.checkpoint.{name}", exempt=allowed)]
    assert found == []


#: The modules of the architectures themselves: only nmtkit/models may import them (the registry
#: maps names to classes; generate/quantize.py registers int8 products with the encoders' hook).
ARCHITECTURES = ("luong", "rnnsearch", "rnnencdec", "transformer", "transformer_presets", "presets", "multihead", "attention")


@pytest.mark.parametrize("module", ARCHITECTURES)
def test_only_the_models_import_the_architectures(module):
    assert _violations("", f"nmtkit.models.{module}", exempt=("nmtkit/models/",)) == []


def _strings(node: ast.AST) -> list[str]:
    return [c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)]


def _architecture_tests(path: Path, names: set[str], own_attributes: frozenset[str] = frozenset()) -> list[str]:
    """``x == "luong"``, ``arch in ("transformer_base", ...)``, ``name.startswith("transformer")``,
    ``isinstance(m, TransformerModel)``, ``hasattr(m, "W_c")`` (an attribute only some models have,
    ``own_attributes``) and the like in ``path``: code that asks which architecture it holds."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    classes = {"LuongModel", "RNNSearchModel", "RNNEncDecModel", "TransformerModel"}
    for node in ast.walk(tree):
        func = getattr(node, "func", None) if isinstance(node, ast.Call) else None
        called = getattr(func, "attr", "") or getattr(func, "id", "")
        if called in ("startswith", "endswith") and node.args:
            ends = _strings(node.args[0])
            hit = [e for e in ends if any(n.startswith(e) if called == "startswith" else n.endswith(e) for n in names)]
            if hit:
                found.append(f"{path.name}:{node.lineno} {called}({hit[0]!r}) matches a model or preset name")
        elif called in ("hasattr", "getattr") and len(node.args) >= 2:
            hit = [a for a in _strings(node.args[1]) if a in own_attributes]
            if hit:
                found.append(f"{path.name}:{node.lineno} {called} probes {hit[0]!r}, which only some models have")
        if isinstance(node, ast.Compare):
            consts = [c for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
            hit = [c.value for c in consts if c.value in names]
            if hit:
                found.append(f"{path.name}:{node.lineno} compares with {hit[0]!r}")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance" and len(node.args) == 2:
            kinds = [n.id if isinstance(n, ast.Name) else getattr(n, "attr", "") for n in ast.walk(node.args[1])]
            if classes & set(kinds):
                found.append(f"{path.name}:{node.lineno} isinstance against {sorted(classes & set(kinds))[0]}")
    return found


def test_generation_training_and_the_cli_never_ask_which_architecture_they_hold():
    """The model interface carries the difference (decode_step, reorder_decoder_state, capability
    attributes such as has_attention): nothing in generate/, train/ or cli/ compares a model or
    preset name, or checks a model's class."""
    from nmtkit.models import registry

    names = set(registry.REGISTRY.archs) | set(registry.REGISTRY.models)
    assert {"luong", "transformer", "transformer_tiny", "luong_tiny"} <= names
    own = _attributes_of_some_models()
    assert {"W_c", "match_rnn"} & own and "decode_step" not in own  # what it looks for, and not the interface
    found = [f"{where}/{f}" for where in ("generate", "train", "cli") for p in sorted((PKG / where).rglob("*.py"))
             for f in _architecture_tests(p, names, own)]
    assert found == []


def _attributes_of_some_models() -> frozenset[str]:
    """Attribute, submodule and parameter names that some registered models have and others lack
    (a model of each, with the preset's options and the optional parts turned on where the tests
    know them); the base class's interface is excluded."""
    from nmtkit.models.base import Seq2SeqModel
    from tests.helpers import tiny_model

    models = [tiny_model("luong_tiny"), tiny_model("luong_tiny", encoder_self_attention=True), tiny_model("rnnsearch_tiny"),
              tiny_model("rnnencdec_tiny"), tiny_model("transformer_test")]
    each = [set(dir(m)) | {n.split(".")[-1] for n, _ in m.named_modules() if n} | {n.split(".")[-1] for n, _ in m.named_parameters()}
            for m in models]
    return frozenset(set.union(*each) - set.intersection(*each) - set(dir(Seq2SeqModel)))


def test_the_architecture_check_can_fail(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("def f(m, arch):\n    if arch == 'transformer_base':\n        pass\n"
                   "    if arch.startswith('transformer') or hasattr(m, 'W_c') or getattr(m, 'match_rnn', None):\n        pass\n"
                   "    return isinstance(m, TransformerModel) or m.model_name in ('luong', 'x')\n")
    found = _architecture_tests(bad, {"transformer_base", "luong"}, frozenset({"W_c", "match_rnn"}))
    assert len(found) == 6, found
    fine = tmp_path / "ok.py"
    fine.write_text("def g(m, path):\n    return path.endswith('.pt') and getattr(m, 'has_posterior', False)\n")
    assert _architecture_tests(fine, {"transformer_base", "luong"}, frozenset({"W_c"})) == []
