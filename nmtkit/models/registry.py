"""The one place that maps model and architecture names to code.

* A **model** is a :class:`~nmtkit.models.base.Seq2SeqModel` subclass with a ``Config``
  dataclass listing every option and its default (``@register_model("luong")``).
* An **arch** (preset) is a function ``fn(cfg: dict) -> None`` that fills, with
  ``cfg.setdefault``, only the options the user left unset (``@register_arch("luong",
  "luong_wmt_en_de")``).  Its docstring's first line is what ``--list-archs`` prints.

Resolution order for every option: user override (not None) > preset > ``Config`` default.

A preset may also carry *training* defaults (``register_arch(..., train_defaults={...})``),
for the papers' optimisers, clipping and loss normalisation; ``nmtkit-train`` applies them to
the options the user left unset, with the same precedence.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Mapping, Optional, cast

from nmtkit.errors import NmtkitError
from nmtkit.models.base import Seq2SeqModel
from nmtkit.models.common import coerce_option, init_uniform_, initialize_, option_types

__all__ = [
    "Registry",
    "ModelOption",
    "model_options",
    "register_model",
    "register_arch",
    "resolve_config",
    "build_model",
    "config_from_dict",
    "config_to_dict",
    "list_archs",
    "list_models",
    "arch_description",
    "train_defaults",
    "get_model_class",
    "init_uniform_",
]

ArchFn = Callable[[dict], None]


@dataclasses.dataclass(frozen=True)
class ModelOption:
    """One model option as the command line sees it: declared type, help, choices (if the
    model module names them), whether it gets its own flag, and which models have it."""

    name: str
    type: type
    help: str
    choices: Optional[tuple[str, ...]]
    flag: bool
    models: tuple[str, ...]


def field_metadata(config_cls: type, name: str) -> Mapping[str, Any]:
    """The metadata of field ``name`` (``nmtkit.models.common.option``), from the nearest class in
    the MRO that declares it with some: a subclass may redeclare a field only to change its default."""
    for klass in config_cls.__mro__:
        fields = {f.name: f for f in dataclasses.fields(klass)} if dataclasses.is_dataclass(klass) else {}
        if name in fields and fields[name].metadata:
            return fields[name].metadata
    return {}


class Registry:
    """Models and presets by name.  The module-level functions use one shared instance;
    tests make their own so that registering test models leaves the real one untouched."""

    def __init__(self) -> None:
        self.models: dict[str, type[Seq2SeqModel]] = {}
        self.archs: dict[str, tuple[str, ArchFn]] = {}
        self.arch_train_defaults: dict[str, dict[str, Any]] = {}

    # -- registration ---------------------------------------------------------------------
    def register_model(self, name: str) -> Callable[[type], type]:
        def deco(cls: type) -> type:
            if name in self.models:
                raise ValueError(f"model {name!r} is already registered ({self.models[name].__name__})")
            if not (isinstance(cls, type) and issubclass(cls, Seq2SeqModel)):
                raise TypeError(f"model {name!r}: {cls!r} is not a Seq2SeqModel subclass")
            config = getattr(cls, "Config", None)
            if config is None or not dataclasses.is_dataclass(config):
                raise TypeError(f"model {name!r}: {cls.__name__}.Config must be a dataclass")
            option_types(cast(type, config))  # fails early if an annotation cannot be resolved
            for method, who in (("forward", "training and scoring pass it"),
                                ("forward_features", "training and scoring pass it"),
                                ("decode_step", "the search passes it")):
                params = inspect.signature(getattr(cls, method)).parameters
                if "need_attention" not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
                    raise TypeError(f"model {name!r}: {cls.__name__}.{method} must take need_attention "
                                    f"(Seq2SeqModel.{method}): {who}")
            cls.model_name = name
            self.models[name] = cls
            return cls

        return deco

    def register_arch(
        self, model_name: str, arch_name: str, train_defaults: Mapping[str, Any] | None = None
    ) -> Callable[[ArchFn], ArchFn]:
        def deco(fn: ArchFn) -> ArchFn:
            if arch_name in self.archs:
                raise ValueError(f"arch {arch_name!r} is already registered")
            if model_name not in self.models:
                raise ValueError(f"arch {arch_name!r}: model {model_name!r} is not registered")
            self.archs[arch_name] = (model_name, fn)
            self.arch_train_defaults[arch_name] = dict(train_defaults or {})
            return fn

        return deco

    # -- lookup ---------------------------------------------------------------------------
    def get_model_class(self, model_name: str) -> type[Seq2SeqModel]:
        try:
            return self.models[model_name]
        except KeyError:
            known = ", ".join(sorted(self.models)) or "(none)"
            raise NmtkitError(f"unknown model {model_name!r}; known models: {known}") from None

    def _arch(self, arch: str) -> tuple[str, ArchFn]:
        try:
            return self.archs[arch]
        except KeyError:
            known = ", ".join(sorted(self.archs)) or "(none)"
            raise NmtkitError(f"unknown arch {arch!r}; known archs: {known}") from None

    def train_defaults(self, arch: str) -> dict[str, Any]:
        """The training options (``TrainOptions`` names) the preset sets, e.g. the papers'
        optimiser and clipping; empty for most presets."""
        self._arch(arch)
        return dict(self.arch_train_defaults.get(arch, {}))

    def list_models(self) -> list[str]:
        return sorted(self.models)

    def model_options(self) -> dict[str, ModelOption]:
        """Every option of every registered model's Config, by name (the union, in declaration
        order): what ``nmtkit-train`` makes its model flags from, so a new field is a new flag."""
        out: dict[str, ModelOption] = {}
        for model_name, cls in self.models.items():
            for name, typ in option_types(cls.Config).items():
                meta = field_metadata(cls.Config, name)
                seen = out.get(name)
                if seen is None:
                    out[name] = ModelOption(name, typ, meta.get("help", ""), meta.get("choices"),
                                            meta.get("flag", True), (model_name,))
                elif seen.type is not typ:
                    raise TypeError(f"model option {name} is {seen.type.__name__} in {', '.join(seen.models)} "
                                    f"but {getattr(typ, '__name__', typ)} in {model_name}")
                else:  # each model checks its own choices (Config.validate); the flag accepts them all
                    choices = seen.choices
                    if choices is not None and meta.get("choices") is not None:
                        choices = (*choices, *(c for c in meta["choices"] if c not in choices))
                    out[name] = dataclasses.replace(seen, models=(*seen.models, model_name), choices=choices)
        return out

    def arch_description(self, arch: str) -> str:
        """First line of the preset's docstring (empty when it has none)."""
        _, fn = self._arch(arch)
        doc = (fn.__doc__ or "").strip()
        return doc.splitlines()[0].strip() if doc else ""

    # -- configs --------------------------------------------------------------------------
    def config_from_dict(self, model_name: str, d: Mapping[str, Any]) -> Any:
        """Build and validate ``model_name``'s Config from a plain dict (e.g. a checkpoint).

        Unknown keys are an error; missing keys take the Config default; values are
        converted to the declared types (so ``"5"`` works for an int option)."""
        cls = self.get_model_class(model_name)
        types = option_types(cls.Config)
        unknown = sorted(set(d) - set(types))
        if unknown:
            raise NmtkitError(
                f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for model "
                f"{model_name}; valid options: {', '.join(types)}"
            )
        values = {k: coerce_option(k, types[k], v) for k, v in d.items()}
        cfg = cls.Config(**values)
        cfg.validate()
        return cfg

    def resolve_config(self, arch: str, overrides: Mapping[str, Any] | None = None) -> tuple[str, Any]:
        """Arch + user overrides -> ``(model_name, validated Config)``.

        Overrides whose value is None count as unset, so click options can default to None."""
        model_name, fn = self._arch(arch)
        types = option_types(self.get_model_class(model_name).Config)
        given = {k: v for k, v in (overrides or {}).items() if v is not None}
        unknown = sorted(set(given) - set(types))
        if unknown:
            raise NmtkitError(
                f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for arch "
                f"{arch} (model {model_name}); valid options: {', '.join(types)}"
            )
        given = {k: coerce_option(k, types[k], v) for k, v in given.items()}
        cfg = dict(given)
        fn(cfg)
        # A preset must only fill gaps; catching a buggy preset here keeps overrides reliable.
        for k, v in given.items():
            if cfg.get(k) != v:
                raise RuntimeError(f"arch {arch!r} overwrote the user's option {k}")
        return model_name, self.config_from_dict(model_name, cfg)

    def list_archs(self) -> dict[str, tuple[str, dict]]:
        """arch -> (model name, every option of the preset resolved without overrides)."""
        out = {}
        for arch in sorted(self.archs):
            model_name, cfg = self.resolve_config(arch, {})
            out[arch] = (model_name, config_to_dict(cfg))
        return out

    # -- building -------------------------------------------------------------------------
    def build_model(self, model_name: str, cfg: Any, src_dict, tgt_dict) -> Seq2SeqModel:  # noqa: ANN001
        """Instantiate a model; ``cfg`` is its Config (or a dict, as stored in checkpoints).

        Parameters are initialised as the config's ``init`` says (``initialize_``), so call
        ``torch.manual_seed`` first for a reproducible model."""
        cls = self.get_model_class(model_name)
        if isinstance(cfg, Mapping):
            cfg = self.config_from_dict(model_name, cfg)
        elif not isinstance(cfg, cls.Config):
            raise TypeError(f"build_model({model_name!r}) needs a {cls.__name__}.Config, got {type(cfg).__name__}")
        else:
            cast(Any, cfg).validate()
        model = cls(cfg, src_dict, tgt_dict)
        initialize_(model, cfg)
        return model


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """A Config as a plain JSON-able dict (what checkpoints store)."""
    return dataclasses.asdict(cfg)


#: The registry every model and preset in nmtkit registers into.
REGISTRY = Registry()

register_model = REGISTRY.register_model
register_arch = REGISTRY.register_arch
resolve_config = REGISTRY.resolve_config
build_model = REGISTRY.build_model
config_from_dict = REGISTRY.config_from_dict
list_archs = REGISTRY.list_archs
list_models = REGISTRY.list_models
model_options = REGISTRY.model_options
arch_description = REGISTRY.arch_description
train_defaults = REGISTRY.train_defaults
get_model_class = REGISTRY.get_model_class
