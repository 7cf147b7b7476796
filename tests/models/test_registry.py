"""The registry: presets fill only unset options, overrides win, mistakes are one-line errors."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from nmtkit.data.dictionary import Dictionary
from nmtkit.errors import NmtkitError
from nmtkit.models import (
    arch_description,
    build_model,
    config_from_dict,
    config_to_dict,
    list_archs,
    list_models,
    resolve_config,
)
from nmtkit.models.base import Seq2SeqModel
from nmtkit.models.common import BaseConfig
from nmtkit.models.registry import Registry
from nmtkit.models.registry import train_defaults as registry_train_defaults

torch.set_num_threads(1)


# -- a private registry with a dummy model -------------------------------------------------------
@dataclass
class DummyConfig(BaseConfig):
    mode: str = "a"
    width: int = 3


class TeacherForced:
    """The teacher-forced pass every registered model brings (never called here)."""

    def forward_features(self, src_tokens, src_lengths, prev_output_tokens, need_attention=True):  # noqa: ANN001, ANN201
        raise AssertionError("not called")


class Dummy(TeacherForced, Seq2SeqModel):
    Config = DummyConfig


@pytest.fixture
def reg() -> Registry:
    r = Registry()
    r.register_model("dummy")(Dummy)

    @r.register_arch("dummy", "dummy_big")
    def dummy_big(cfg: dict) -> None:
        """A big dummy."""
        cfg.setdefault("hidden_size", 1000)
        cfg.setdefault("mode", "b")

    return r


def test_preset_fills_unset_options_and_defaults_fill_the_rest(reg: Registry) -> None:
    name, cfg = reg.resolve_config("dummy_big", {})
    assert name == "dummy" and Dummy.model_name == "dummy"
    assert (cfg.hidden_size, cfg.mode, cfg.width, cfg.embed_dim) == (1000, "b", 3, 256)


def test_overrides_win_and_none_counts_as_unset(reg: Registry) -> None:
    _, cfg = reg.resolve_config("dummy_big", {"hidden_size": 7, "mode": None, "width": 9})
    assert (cfg.hidden_size, cfg.mode, cfg.width) == (7, "b", 9)


def test_duplicate_registration_is_an_error(reg: Registry) -> None:
    with pytest.raises(ValueError, match="already registered"):
        reg.register_model("dummy")(Dummy)
    with pytest.raises(ValueError, match="already registered"):
        reg.register_arch("dummy", "dummy_big")(lambda cfg: None)
    with pytest.raises(ValueError, match="not registered"):
        reg.register_arch("nosuchmodel", "x")(lambda cfg: None)


def test_a_forward_without_need_attention_is_refused_at_registration() -> None:
    """A model written against the older three-argument forward fails when registered, not
    with a TypeError inside the first training step."""
    class OldForward(Dummy):
        def forward(self, src_tokens, src_lengths, prev_output_tokens):  # noqa: ANN001, ANN201
            raise AssertionError("not called")

    with pytest.raises(TypeError, match="forward must take need_attention"):
        Registry().register_model("old")(OldForward)

    class OldStep(Dummy):
        def decode_step(self, prev_tokens, state, enc):  # noqa: ANN001, ANN201
            raise AssertionError("not called")

    with pytest.raises(TypeError, match="decode_step must take need_attention"):
        Registry().register_model("old_step")(OldStep)


def test_a_model_without_a_teacher_forced_pass_cannot_be_built() -> None:
    """forward_features is abstract: a model without it fails when built, before any training
    step; one whose forward_features lacks need_attention is refused at registration."""
    assert "forward_features" in Seq2SeqModel.__abstractmethods__
    assert "forward" not in Seq2SeqModel.__abstractmethods__  # it maps the features to logits

    class NoPass(Seq2SeqModel):
        Config = DummyConfig
        encode = init_decoder_state = decode_step = None  # everything else is there

    with pytest.raises(TypeError, match="forward_features"):
        NoPass(DummyConfig(), None, None)

    class OldFeatures(Dummy):
        def forward_features(self, src_tokens, src_lengths, prev_output_tokens):  # noqa: ANN001, ANN201
            raise AssertionError("not called")

    with pytest.raises(TypeError, match="forward_features must take need_attention"):
        Registry().register_model("old_features")(OldFeatures)


def test_preset_that_overwrites_a_user_option_is_caught(reg: Registry) -> None:
    @reg.register_arch("dummy", "dummy_bad")
    def dummy_bad(cfg: dict) -> None:
        cfg["width"] = 1

    with pytest.raises(RuntimeError, match="overwrote"):
        reg.resolve_config("dummy_bad", {"width": 5})


def test_unknown_arch_lists_known_archs(reg: Registry) -> None:
    with pytest.raises(NmtkitError, match="unknown arch 'nope'; known archs: dummy_big"):
        reg.resolve_config("nope", {})
    with pytest.raises(NmtkitError, match="luong_wmt_en_de"):
        resolve_config("luong_wmt_en_dee", {})


def test_unknown_option_is_an_error(reg: Registry) -> None:
    with pytest.raises(NmtkitError, match="unknown option colour"):
        reg.resolve_config("dummy_big", {"colour": 1})
    with pytest.raises(NmtkitError, match="unknown option maxout_size"):
        resolve_config("luong_small", {"maxout_size": 3})
    with pytest.raises(NmtkitError, match="unknown option bogus"):
        config_from_dict("luong", {"bogus": True})


def test_option_values_are_converted_or_rejected() -> None:
    _, cfg = resolve_config("luong_tiny", {"window": "5", "dropout": 0, "input_feeding": "false"})
    assert cfg.window == 5 and isinstance(cfg.dropout, float) and cfg.input_feeding is False
    with pytest.raises(NmtkitError, match="option window expects int"):
        resolve_config("luong_tiny", {"window": "five"})
    with pytest.raises(NmtkitError, match="option source_reversal expects bool"):
        resolve_config("luong_tiny", {"source_reversal": "maybe"})


@pytest.mark.parametrize(
    "arch,overrides,reason",
    [
        ("luong_t1_base", {"input_feeding": True}, "input_feeding needs attention"),
        ("luong_small", {"attention": "local-p", "window": 0}, "window must be >= 1, got 0"),
        ("luong_small", {"attention": "global", "window": 0}, "window must be >= 1, got 0"),
        ("luong_small", {"score": "bilinear"}, "score must be one of dot, general, concat, location"),
        ("luong_small", {"attention": "local"}, "attention must be one of"),
        ("luong_small", {"score": "location", "max_source_positions": 0}, "max_source_positions >= 1"),
        ("luong_small", {"dropout": 1.0}, r"dropout must be in \[0, 1\)"),
        ("luong_small", {"layers": 0}, "layers must be >= 1"),
        ("rnnencdec_tiny", {"cell": "rnn"}, "cell must be one of lstm, gru"),
        ("rnnsearch_tiny", {"maxout_size": 0}, "maxout_size must be >= 1"),
    ],
)
def test_contradictory_or_bad_options_are_one_line_errors(arch: str, overrides: dict, reason: str) -> None:
    with pytest.raises(NmtkitError, match=reason) as info:
        resolve_config(arch, overrides)
    assert "\n" not in str(info.value)


REQUIRED = {
    "luong_wmt_en_de": "luong",
    "luong_t1_base": "luong",
    "luong_t1_base_reverse": "luong",
    "luong_t1_base_reverse_dropout": "luong",
    "luong_t1_global_location": "luong",
    "luong_t1_global_location_feed": "luong",
    "luong_t1_local_p_general_feed": "luong",
    "luong_t4_global_location": "luong",
    "luong_t4_global_dot": "luong",
    "luong_t4_global_general": "luong",
    "luong_t4_local_m_dot": "luong",
    "luong_t4_local_m_general": "luong",
    "luong_t4_local_p_dot": "luong",
    "luong_t4_local_p_general": "luong",
    "luong_small": "luong",
    "luong_medium": "luong",
    "luong_tiny": "luong",
    "rnnsearch_50": "rnnsearch",
    "rnnsearch_small": "rnnsearch",
    "rnnsearch_tiny": "rnnsearch",
    "rnnencdec_50": "rnnencdec",
    "rnnencdec_tiny": "rnnencdec",
}


def test_all_presets_are_listed_resolved_and_described() -> None:
    archs = list_archs()
    assert set(list_models()) == {"luong", "rnnsearch", "rnnencdec", "transformer"}
    for arch, model in REQUIRED.items():
        assert archs[arch][0] == model
        assert archs[arch][1] == config_to_dict(resolve_config(arch, {})[1])
        assert arch_description(arch)
    for arch, (_, options) in archs.items():
        # Luong et al.'s presets use U(-0.1, 0.1), Bahdanau et al.'s their appendix B.1 scheme;
        # CPU-sized and tiny ones torch's defaults (see presets.py)
        cpu_sized = arch.endswith(("_tiny", "_small", "_medium", "_m30k"))
        if arch.startswith("transformer"):  # Xavier-uniform, as the Transformer is usually trained
            assert options["init"] == "xavier", arch
        elif arch.endswith("_50"):
            assert options["init"] == "bahdanau", arch
        else:
            assert options["init"] == "uniform", arch
            assert options["init_scale"] == (0.0 if cpu_sized else 0.1), arch


# (arch, options that define the row in the paper)
PAPER_ROWS = [
    ("luong_t1_base", dict(attention="none", source_reversal=False, dropout=0.0, input_feeding=False)),
    ("luong_t1_base_reverse", dict(attention="none", source_reversal=True, dropout=0.0)),
    ("luong_t1_base_reverse_dropout", dict(attention="none", source_reversal=True, dropout=0.2)),
    ("luong_t1_global_location", dict(attention="global", score="location", input_feeding=False, dropout=0.2)),
    ("luong_t1_global_location_feed", dict(attention="global", score="location", input_feeding=True)),
    ("luong_t1_local_p_general_feed", dict(attention="local-p", score="general", input_feeding=True)),
    ("luong_t4_local_m_dot", dict(attention="local-m", score="dot", input_feeding=True, window=10)),
    # every attentional WMT model of Luong et al. reverses the source
    ("luong_wmt_en_de", dict(attention="local-p", score="general", input_feeding=True, dropout=0.2, source_reversal=True)),
]


@pytest.mark.parametrize("arch,expected", PAPER_ROWS)
def test_luong_presets_match_the_paper(arch: str, expected: dict) -> None:
    options = list_archs()[arch][1]
    assert (options["layers"], options["hidden_size"], options["embed_dim"]) == (4, 1000, 1000)
    assert {k: options[k] for k in expected} == expected


def test_bahdanau_presets_match_the_paper() -> None:
    s = list_archs()["rnnsearch_50"][1]
    assert (s["hidden_size"], s["embed_dim"], s["maxout_size"]) == (1000, 620, 500)
    e = list_archs()["rnnencdec_50"][1]
    assert (e["hidden_size"], e["embed_dim"], e["cell"], e["maxout_size"]) == (1000, 620, "gru", 500)
    # RNNencdec has RNNsearch's maxout deep output and s_0 = tanh(W_s c)
    assert e["bahdanau_decoder"] and e["feed_context"]
    assert s["init"] == e["init"] == "bahdanau"
    assert registry_train_defaults("rnnsearch_50")["clip_norm"] == 1.0
    assert registry_train_defaults("rnnencdec_50")["clip_norm"] == 1.0


def test_build_model_from_checkpoint_dict_round_trips() -> None:
    d = Dictionary.from_symbols(["<pad>", "<s>", "</s>", "<unk>", "a", "b"])
    name, cfg = resolve_config("rnnsearch_tiny", {"hidden_size": 16})
    torch.manual_seed(0)
    model = build_model(name, cfg, d, d)
    saved = config_to_dict(model.cfg)
    torch.manual_seed(0)
    again = build_model(name, saved, d, d)
    assert again.cfg == cfg and again.model_name == "rnnsearch"
    for (k, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), k
    with pytest.raises(TypeError):
        build_model("luong", cfg, d, d)
    with pytest.raises(NmtkitError, match="unknown model 'conformer'"):
        build_model("conformer", {}, d, d)


def test_a_model_missing_part_of_the_contract_cannot_be_built() -> None:
    with pytest.raises(TypeError, match="abstract"):
        Dummy(DummyConfig(), None, None)


# -- model options: the union that nmtkit-train makes its flags from -----------------------------------
def _flags(r: Registry) -> dict[str, object]:
    import click

    from nmtkit.cli.model_options import model_options

    cmd = click.command()(model_options(r)(lambda **kw: None))
    return {o: p for p in cmd.params for o in (*p.opts, *p.secondary_opts)}


def test_a_new_config_field_is_a_new_flag_with_its_help_and_choices(reg: Registry) -> None:
    from dataclasses import field

    from nmtkit.models.common import option

    before = _flags(reg)
    assert "--width" in before and "--mode" in before and "--hidden-size" in before and "--depth" not in before

    @dataclass
    class DeeperConfig(DummyConfig):
        depth: int = option(2, "How deep.")
        shade: str = option("dark", "Which shade.", choices=("dark", "light"))
        tidy: bool = option(False, "Tidy up.")
        secret: int = option(0, "Only --model-opt sets this.", flag=False)
        plain: float = field(default=0.5)

    class Deeper(TeacherForced, Seq2SeqModel):
        Config = DeeperConfig

    reg.register_model("deeper")(Deeper)
    after = _flags(reg)
    assert after["--depth"].help == "deeper: How deep." and after["--depth"].default is None
    assert after["--shade"].metavar == "dark|light"
    assert after["--tidy"] is after["--no-tidy"] and after["--tidy"].default is None
    assert "--plain" in after and "--secret" not in after
    opts = reg.model_options()
    assert opts["width"].models == ("dummy", "deeper") and opts["secret"].flag is False


def test_a_field_with_two_types_in_two_models_is_refused(reg: Registry) -> None:
    @dataclass
    class OtherConfig(BaseConfig):
        width: str = "wide"

    class Other(TeacherForced, Seq2SeqModel):
        Config = OtherConfig

    reg.register_model("other")(Other)
    with pytest.raises(TypeError, match="width is int in dummy but str in other"):
        reg.model_options()


def test_every_built_in_model_option_has_help() -> None:
    from nmtkit.models.registry import model_options

    missing = [o.name for o in model_options().values() if not o.help]
    assert not missing, f"model options without help (give them nmtkit.models.common.option(...)): {missing}"


def test_pop_model_overrides_takes_flags_and_model_opts() -> None:
    from nmtkit.cli.model_options import pop_model_overrides

    kw = {"hidden_size": 8, "attention": None, "model_opt": ("window=3", "cell=gru"), "lr": 0.1}
    out = pop_model_overrides(kw)
    assert out["hidden_size"] == 8 and out["attention"] is None and out["window"] == 3 and out["cell"] == "gru"
    assert kw == {"lr": 0.1}
