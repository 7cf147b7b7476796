"""Attention posteriors (nmtkit-align --posterior): the math, its padding behaviour, and the refusals."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from nmtkit.cli.align import command as align
from nmtkit.data.dictionary import Dictionary
from nmtkit.models import build_model, resolve_config
from nmtkit.models import posterior as posterior_mod
from nmtkit.models.rnnsearch import next_tokens
from tests.helpers import make_checkpoint, write

SRC = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
SLEN = torch.tensor([4, 3])
PREV = torch.tensor([[1, 10, 11, 12], [1, 13, 0, 0]])


#: Every model with an attention posterior, and the attention variants whose prior differs.
MODELS = {
    "rnnsearch": ("rnnsearch_tiny", {}),
    "luong-global-feed": ("luong_tiny", {}),
    "luong-no-feed": ("luong_tiny", {"input_feeding": False, "score": "concat"}),
    "luong-local-p": ("luong_tiny", {"attention": "local-p", "window": 1}),
    "luong-bidir-location": ("luong_tiny", {"score": "location", "encoder_bidirectional": True}),
    "luong-wide-encoder": ("luong_tiny", {"encoder_bidirectional": True, "encoder_hidden_size": 24}),
}


def build(arch: str = "rnnsearch_tiny", **overrides):  # noqa: ANN201
    d = Dictionary.from_symbols(["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(20)])
    torch.manual_seed(0)
    name, cfg = resolve_config(arch, {"dropout": 0.0, **overrides} if arch.startswith("luong") else overrides)
    model = build_model(name, cfg, d, d).eval()
    with torch.no_grad():  # weights large enough for the nonlinearities to matter (tiny ones are near linear)
        for param in model.parameters():
            param.normal_(0.0, 0.5)
    return model


def brute_force_posterior(model, src, slen, prev) -> torch.Tensor:  # noqa: ANN001
    """Bayes' rule spelled out with the step API beam search uses (not the teacher-forced code
    under test): at step i, decode_step is run once per source position j with the attention
    module made to return h_j as the context, giving p(y_i | y_<i, x, c_i = h_j); then the real
    step advances the state and gives the prior alpha_i."""
    targets = next_tokens(prev)
    enc = model.encode(src, slen)
    state = model.init_decoder_state(enc)
    real = model.attention.forward
    out = torch.zeros(src.size(0), prev.size(1), src.size(1))
    for i in range(prev.size(1)):
        loglik = torch.full_like(out[:, 0], float("-inf"))
        for j in range(src.size(1)):
            def attend_j(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
                context, weights = real(*args, **kwargs)
                # what the weights average: the states, or (luong's search) their W_c projection
                values = args[6] if len(args) > 6 else kwargs.get("values")
                return (enc.states if values is None else values)[:, j].reshape(context.shape), weights
            model.attention.forward = attend_j
            try:
                lp, _, _ = model.decode_step(prev[:, i], state, enc)
            finally:
                model.attention.forward = real
            loglik[:, j] = lp.gather(1, targets[:, i : i + 1]).squeeze(1)
        _, prior, state = model.decode_step(prev[:, i], state, enc)
        scores = (prior.log() + loglik).masked_fill(~enc.mask, float("-inf"))
        out[:, i] = torch.softmax(scores, dim=-1).masked_fill(~enc.mask, 0.0)
    return out


@pytest.mark.parametrize("chunk", [posterior_mod.CHUNK_FLOATS, 1])  # 1: one target position per chunk
@pytest.mark.parametrize("variant", MODELS)
def test_posterior_is_prior_times_likelihood_normalised(monkeypatch, chunk, variant):
    monkeypatch.setattr(posterior_mod, "CHUNK_FLOATS", chunk)
    arch, overrides = MODELS[variant]
    model = build(arch, **overrides)
    with torch.no_grad():
        logits, post = model.forward_with_posterior(SRC, SLEN, PREV, next_tokens(PREV))
        logits_f, attn = model(SRC, SLEN, PREV)
        torch.testing.assert_close(logits, logits_f)  # the scores are those of forward
        real = next_tokens(PREV).ne(0)  # target rows beyond a sentence's length are not computed
        # float32 tolerance: the teacher-forced loop joins each layer's two products into one and
        # the step API does not, so they round differently (a float64 model agrees to 1e-7, the
        # posterior's own float32 rounding); these N(0, 0.5) weights amplify the last bits
        torch.testing.assert_close(post[real], brute_force_posterior(model, SRC, SLEN, PREV)[real], atol=1e-4, rtol=1e-4)
    assert not torch.allclose(post, attn)  # it is not the attention itself
    torch.testing.assert_close(post.sum(-1), torch.ones(2, 4))
    assert post[1, :, 3].abs().max() == 0  # padding gets exactly nothing
    if variant == "luong-local-p":  # outside the window the prior is 0, and so is the posterior
        assert (attn == 0).any() and ((attn == 0) <= (post == 0)).all()


def test_rows_whose_target_is_pad_are_skipped_and_keep_the_prior():
    """How a caller (--unk-posterior) asks for some rows only: the others are the prior."""
    from nmtkit.data.dictionary import PAD_ID

    model = build()
    targets = next_tokens(PREV)
    some = targets.clone()
    some[0, [0, 2]] = PAD_ID
    with torch.no_grad():
        _, full = model.forward_with_posterior(SRC, SLEN, PREV, targets)
        _, part = model.forward_with_posterior(SRC, SLEN, PREV, some)
        _, prior = model(SRC, SLEN, PREV)
    torch.testing.assert_close(part[0, [1, 3]], full[0, [1, 3]])
    torch.testing.assert_close(part[1], full[1])
    torch.testing.assert_close(part[0, [0, 2]], prior[0, [0, 2]])


def test_posterior_of_a_sentence_does_not_depend_on_its_batch():
    model = build()
    with torch.no_grad():
        _, both = model.forward_with_posterior(SRC, SLEN, PREV, next_tokens(PREV))
        _, alone = model.forward_with_posterior(SRC[1:, :3], SLEN[1:], PREV[1:, :2], next_tokens(PREV[1:, :2]))
    torch.testing.assert_close(both[1, :2, :3], alone[0])


def test_posterior_depends_on_the_word_being_aligned():
    model = build()
    other = PREV.clone()
    other[0, 2] = 15  # y_2 changes: its own row (row 1) changes, the row before does not
    with torch.no_grad():
        _, a = model.forward_with_posterior(SRC, SLEN, PREV, next_tokens(PREV))
        _, b = model.forward_with_posterior(SRC, SLEN, other, next_tokens(other))
    assert not torch.allclose(a[0, 1], b[0, 1]) and torch.allclose(a[0, 0], b[0, 0])


@pytest.fixture
def pair_files(tmp_path: Path) -> tuple[Path, Path]:
    return write(tmp_path / "s.en", "the cat sees a dog .\nthe man sleeps .\n"), \
        write(tmp_path / "t.de", "die Katze sieht einen Hund .\nder Mann schläft .\n")


def test_align_posterior_cli_writes_one_link_per_target_word(tmp_path, pair_files):
    ckpt = make_checkpoint(tmp_path / "rs.pt", arch="rnnsearch_tiny")
    src, tgt = pair_files
    out = tmp_path / "links"
    res = CliRunner().invoke(align, ["--path", str(ckpt), "--source", str(src), "--target", str(tgt), "--posterior",
                                     "-o", str(out), "--device", "cpu"])
    assert res.exit_code == 0, res.output
    lines = out.read_text().splitlines()
    assert [len(line.split()) for line in lines] == [6, 4]  # every target word gets its link


@pytest.mark.parametrize("arch, extra, message", [
    ("rnnencdec_tiny", [], "m.pt: it has no attention (rnnsearch and luong models with attention compute one)"),
    ("transformer_test", [], "no one context to replace by a single source word"),
    ("rnnsearch_tiny", ["--align-shift", "1"], "use it with --align-shift 0"),
])
def test_align_posterior_refusals_are_one_line(tmp_path, pair_files, arch, extra, message):
    ckpt = make_checkpoint(tmp_path / "m.pt", arch=arch)
    src, tgt = pair_files
    out = tmp_path / "links"
    res = CliRunner().invoke(align, ["--path", str(ckpt), "--source", str(src), "--target", str(tgt), "--posterior",
                                     "-o", str(out), *extra])
    assert res.exit_code == 1
    msg = res.output.strip()
    assert msg.startswith("nmtkit-align: error: ") and "\n" not in msg and message in msg, msg
    assert not out.exists()


@pytest.mark.slow
def test_posterior_aligns_better_than_the_attention_on_the_sample_corpus(tmp_path):
    """The same trained rnnsearch_tiny aligned twice: the posterior knows the word it aligns."""
    from tests.helpers import train_sample_model

    root = train_sample_model(tmp_path, n_test=100, max_update=150)
    raw, ckpt = root / "raw", root / "ckpt" / "checkpoint_last.pt"
    aer = {}
    for label, extra in (("attention", []), ("posterior", ["--posterior"])):
        res = CliRunner().invoke(align, ["--path", str(ckpt), "--source", str(raw / "test.en"), "--target",
                                         str(raw / "test.de"), "--gold", str(raw / "test.align"), "--json",
                                         "--device", "cpu", *extra])
        assert res.exit_code == 0, res.output
        aer[label] = json.loads(res.stdout)["aer"]
    print(f"AER attention {aer['attention']:.3f}, posterior {aer['posterior']:.3f}")
    assert aer["posterior"] < aer["attention"] - 0.05, aer


# -- nmtkit-translate --replace-unk --unk-posterior ----------------------------------------------
def test_unk_posterior_copies_the_source_word_with_the_highest_posterior(tmp_path, monkeypatch):
    """Every output word is <unk> (unkpen -100). The posterior is made to point at a source word
    the search's attention does not pick: --unk-posterior must copy that word at every <unk>,
    and the forced pass must ask for the <unk> rows (the targets it passes are <unk> or <pad>)."""
    from nmtkit.data.dictionary import PAD_ID, UNK_ID
    from nmtkit.generate.translator import Translator
    from nmtkit.models.rnnsearch import RNNSearchModel

    ckpt = make_checkpoint(tmp_path / "rs.pt", arch="rnnsearch_tiny")
    line = "the cat sees a dog ."
    words = line.split()
    opts = dict(beam=2, device="cpu", unkpen=-100.0, max_len_b=3)
    by_search = Translator.from_checkpoint(ckpt, replace_unk=True, **opts).translate([line], details=True)[0]
    copied = by_search.candidates[0].pieces
    assert copied and all(w in words for w in copied)
    target = next(k for k, w in enumerate(words) if w not in copied)
    asked = []

    def pointing_posterior(self, src_tokens, src_lengths, prev, targets):  # noqa: ANN001, ANN202
        asked.append(set(targets.unique().tolist()))
        logits, _ = self(src_tokens, src_lengths, prev)
        post = torch.zeros(*targets.shape, src_tokens.size(1))
        post[..., target] = 1.0
        return logits, post

    monkeypatch.setattr(RNNSearchModel, "forward_with_posterior", pointing_posterior)
    t = Translator.from_checkpoint(ckpt, replace_unk=True, unk_posterior=True, **opts)
    got = t.translate([line], details=True)[0].candidates[0].pieces
    assert got == [words[target]] * len(copied)
    assert asked and asked[0] <= {UNK_ID, PAD_ID} and UNK_ID in asked[0]


@pytest.mark.parametrize("arch, extra, message", [
    ("rnnsearch_tiny", ["--unk-posterior"], "give --replace-unk too"),
    ("rnnencdec_tiny", ["--replace-unk", "--unk-posterior"], "needs attention"),
    ("luong_tiny", ["--replace-unk", "--unk-posterior", "--quantize", "int8", "--device", "cpu"], "not with --quantize"),
    ("transformer_test", ["--replace-unk", "--unk-posterior"], "its output mixes every decoder layer's attention heads"),
])
def test_unk_posterior_refusals_are_one_line(tmp_path, arch, extra, message):
    from nmtkit.cli.translate import command as translate

    ckpt = make_checkpoint(tmp_path / "m.pt", arch=arch)
    res = CliRunner().invoke(translate, ["--path", str(ckpt), *extra], input="the cat .\n")
    assert res.exit_code == 1
    msg = res.output.strip()
    assert msg.startswith("nmtkit-translate: error: ") and "\n" not in msg and message in msg, msg


@pytest.mark.parametrize("arch, overrides, why", [
    ("rnnencdec_tiny", {}, "computes no attention posterior: it has no attention"),
    ("luong_tiny", {"attention": "none", "input_feeding": False}, r"without attention \(--attention none\) has no attention posterior"),
    ("transformer_test", {}, "computes no attention posterior: its output mixes every decoder layer's attention heads"),
])
def test_models_without_a_posterior_refuse_with_an_nmtkit_error(arch, overrides, why):
    from nmtkit.errors import NmtkitError

    model = build(arch, **overrides)
    assert not model.has_posterior
    with pytest.raises(NmtkitError, match=why):
        model.forward_with_posterior(SRC, SLEN, PREV, next_tokens(PREV))
