"""The inference front-ends' options: typed objects, each field declared once, its default the
command line's too; keywords are sorted onto the object that declares them."""
from __future__ import annotations

import dataclasses

import pytest

from nmtkit.generate.inference_options import LoadOptions, OutputOptions, from_values, sort_settings
from nmtkit.generate.search_options import SearchOptions


def test_keywords_go_to_the_object_that_declares_them() -> None:
    search, load, output = sort_settings({"beam": 3, "device": "cpu", "replace_unk": True},
                                         output=OutputOptions(shortlist_k=7))
    assert search == SearchOptions(beam=3) and load == LoadOptions(device="cpu")
    assert output == OutputOptions(replace_unk=True, shortlist_k=7)


def test_an_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="'beam_size'"):
        sort_settings({"beam_size": 3})
    with pytest.raises(TypeError, match="expected SearchOptions"):
        sort_settings({}, 5)  # type: ignore[arg-type]  # the old positional beam


def test_no_field_is_declared_twice() -> None:
    names = [f.name for cls in (SearchOptions, LoadOptions, OutputOptions) for f in dataclasses.fields(cls)]
    assert len(names) == len(set(names))


def test_from_values_takes_the_fields_and_the_overrides() -> None:
    o = from_values(OutputOptions, {"replace_unk": "\0copy", "align_shift": 1, "beam": 5}, replace_unk=True)
    assert o == OutputOptions(replace_unk=True, align_shift=1)


def test_the_translate_flags_default_to_the_objects() -> None:
    from nmtkit.cli.translate import command

    defaults = command.make_context("translate", ["--path", "m.pt"]).params
    for cls in (SearchOptions, LoadOptions, OutputOptions):
        for f in dataclasses.fields(cls):
            if f.name in defaults and f.name not in ("device", "replace_unk"):  # --device shows "auto" (None's meaning)
                assert defaults[f.name] == f.default, f.name
