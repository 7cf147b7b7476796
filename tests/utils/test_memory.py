"""An allocation failure names the options that size the model, for every architecture."""
from __future__ import annotations

from nmtkit.models import resolve_config
from nmtkit.utils.memory import model_size_hint


def test_the_size_hint_names_each_architectures_own_size_options() -> None:
    _, luong = resolve_config("luong_tiny", {})
    _, transformer = resolve_config("transformer_test", {})
    assert "--hidden-size" in model_size_hint(luong) and "--ffn-dim" not in model_size_hint(luong)
    hint = model_size_hint(transformer)
    assert all(f"--{name}" in hint for name in ("embed-dim", "ffn-dim", "encoder-layers", "decoder-layers"))
    assert "--hidden-size" not in hint
    assert model_size_hint(object()) == "a smaller --arch"
