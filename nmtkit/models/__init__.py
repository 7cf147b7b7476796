"""Models and presets.  Importing this package registers every model and arch, so
``from nmtkit.models import resolve_config, build_model`` is all a caller needs."""
from nmtkit.models import luong, rnnencdec, rnnsearch, transformer  # noqa: F401  (registration)
from nmtkit.models import presets, transformer_presets  # noqa: F401  (registration; after the models)
from nmtkit.models.base import DecoderState, EncoderOutput, Seq2SeqModel, reorder_tensors
from nmtkit.models.registry import (
    arch_description,
    build_model,
    config_from_dict,
    config_to_dict,
    get_model_class,
    init_uniform_,
    list_archs,
    list_models,
    register_arch,
    register_model,
    resolve_config,
)

__all__ = [
    "DecoderState",
    "EncoderOutput",
    "Seq2SeqModel",
    "reorder_tensors",
    "arch_description",
    "build_model",
    "config_from_dict",
    "config_to_dict",
    "get_model_class",
    "init_uniform_",
    "list_archs",
    "list_models",
    "register_arch",
    "register_model",
    "resolve_config",
]
