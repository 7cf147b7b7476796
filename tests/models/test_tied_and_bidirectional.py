"""Tied embeddings, luong's bidirectional encoder with its bridge, separate dropout rates, and
Bahdanau's initialisation; every new model option survives a checkpoint round trip.

Issue 8 section 3/4: ``--share-decoder-input-output-embed`` / ``--share-all-embeddings`` (errors
when sizes or dictionaries cannot match), ``--encoder-bidirectional`` (alignments and unk
replacement still work), ``dropout_embed/hidden/output``, ``--init bahdanau``.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from nmtkit.data.dictionary import EOS_ID, PAD_ID, Dictionary
from nmtkit.errors import NmtkitError
from nmtkit.models import build_model, resolve_config
from nmtkit.checkpoint import load_checkpoint, load_model, save_checkpoint

from tests.helpers import make_checkpoint, make_dict

torch.set_num_threads(1)


def build(arch: str, src: Dictionary | None = None, tgt: Dictionary | None = None, seed: int = 0, **overrides):
    torch.manual_seed(seed)
    name, cfg = resolve_config(arch, overrides)
    d = make_dict(26)
    return build_model(name, cfg, src or d, tgt or d)


def sample(vocab: int = 30):
    gen = torch.Generator().manual_seed(2)
    src = torch.randint(4, vocab, (3, 6), generator=gen)
    src[:, -1] = EOS_ID
    src[1, 3:] = PAD_ID
    src[1, 3] = EOS_ID
    lengths = torch.tensor([6, 4, 6])
    prev = torch.randint(4, vocab, (3, 5), generator=gen)
    return src, lengths, prev


# -- tied embeddings --------------------------------------------------------------------------
# (arch, overrides under which the output layer's input size equals embed_dim)
TIE_OK = [
    ("luong_tiny", dict(embed_dim=16, hidden_size=16)),
    ("rnnsearch_tiny", dict(embed_dim=16, hidden_size=12, attention_dim=8, maxout_size=16)),
    ("rnnencdec_tiny", dict(embed_dim=16, hidden_size=16)),
    ("rnnencdec_tiny", dict(cell="gru", bahdanau_decoder=True, embed_dim=16, hidden_size=12, maxout_size=16)),
]


@pytest.mark.parametrize("arch, sizes", TIE_OK, ids=["luong", "rnnsearch", "rnnencdec", "rnnencdec-bahdanau"])
def test_share_decoder_input_output_embed_ties_one_parameter(arch, sizes):
    plain = build(arch, **sizes)
    tied = build(arch, share_decoder_input_output_embed=True, **sizes)
    assert tied.output_projection.weight is tied.tgt_embed.weight
    assert tied.encoder.embed.weight is not tied.tgt_embed.weight
    vocab, dim = tied.tgt_embed.weight.shape
    assert plain.num_parameters() - tied.num_parameters() == vocab * dim
    # training keeps them one tensor: a step moves both "copies" identically
    src, lengths, prev = sample()
    tied.train()
    logits, _ = tied(src, lengths, prev)
    logits.logsumexp(-1).sum().backward()
    assert tied.tgt_embed.weight.grad is not None
    opt = torch.optim.SGD(tied.parameters(), lr=0.1)
    opt.step()
    assert tied.output_projection.weight is tied.tgt_embed.weight


@pytest.mark.parametrize("arch, sizes", TIE_OK, ids=["luong", "rnnsearch", "rnnencdec", "rnnencdec-bahdanau"])
def test_share_all_embeddings_ties_three(arch, sizes):
    plain = build(arch, **sizes)
    model = build(arch, share_all_embeddings=True, **sizes)
    w = model.encoder.embed.weight
    assert model.tgt_embed.weight is w and model.output_projection.weight is w
    vocab, dim = w.shape
    assert plain.num_parameters() - model.num_parameters() == 2 * vocab * dim


@pytest.mark.parametrize("arch, sizes, numbers", [
    ("luong_tiny", dict(embed_dim=16, hidden_size=24), ("24", "16")),
    ("rnnsearch_tiny", dict(embed_dim=16, maxout_size=10), ("10", "16")),
    ("rnnencdec_tiny", dict(embed_dim=16, hidden_size=20), ("20", "16")),
])
@pytest.mark.parametrize("option", ["share_decoder_input_output_embed", "share_all_embeddings"])
def test_tying_mismatched_sizes_is_a_one_line_error(arch, sizes, numbers, option):
    with pytest.raises(NmtkitError) as exc:
        build(arch, **sizes, **{option: True})
    msg = str(exc.value)
    assert "\n" not in msg and "embed_dim" in msg
    assert all(n in msg for n in numbers), msg


@pytest.mark.parametrize("arch", ["luong_tiny", "rnnsearch_tiny", "rnnencdec_tiny"])
def test_share_all_embeddings_needs_one_dictionary(arch):
    sizes = dict(TIE_OK[["luong_tiny", "rnnsearch_tiny", "rnnencdec_tiny"].index(arch)][1])
    with pytest.raises(NmtkitError) as exc:
        build(arch, src=make_dict(26, "s"), tgt=make_dict(26, "t"), share_all_embeddings=True, **sizes)
    assert "--joined-dictionary" in str(exc.value) and "\n" not in str(exc.value)
    # sizes equal but words differ: still refused (the same row must mean the same word)
    with pytest.raises(NmtkitError):
        build(arch, src=make_dict(26, "s"), tgt=make_dict(26, "w"), share_all_embeddings=True, **sizes)
    # different dictionaries are fine for tying only the decoder side
    build(arch, src=make_dict(20, "s"), tgt=make_dict(26, "t"), share_decoder_input_output_embed=True, **sizes)


def _preprocess(raw: Path, dest: Path, *extra: str):
    from nmtkit.cli.preprocess import command as preprocess

    res = CliRunner().invoke(preprocess, ["-s", "en", "-t", "de", "--trainpref", str(raw / "train"),
                                          "--validpref", str(raw / "valid"), "--destdir", str(dest), *extra])
    assert res.exit_code == 0, res.output
    return dest


def test_train_share_all_embeddings_with_and_without_joined_dictionary(tiny_parallel, tmp_path):
    from nmtkit.cli.train import command as train

    common = ["--arch", "luong_tiny", "--embed-dim", "16", "--hidden-size", "16", "--batch-size", "3",
              "--max-update", "2", "--max-epoch", "0", "--no-progress", "--share-all-embeddings"]
    separate = _preprocess(tiny_parallel, tmp_path / "sep")
    res = CliRunner().invoke(train, [str(separate), "--save-dir", str(tmp_path / "a"), *common])
    assert res.exit_code == 1
    assert res.output.startswith("nmtkit-train: error:") and "--joined-dictionary" in res.output
    assert len(res.output.strip().splitlines()) == 1
    joined = _preprocess(tiny_parallel, tmp_path / "joined", "--joined-dictionary")
    res = CliRunner().invoke(train, [str(joined), "--save-dir", str(tmp_path / "b"), *common])
    assert res.exit_code == 0, res.output
    model, ckpt = load_model(tmp_path / "b" / "checkpoint_last.pt")
    assert ckpt["model_config"]["share_all_embeddings"] is True
    assert model.encoder.embed.weight is model.tgt_embed.weight is model.output_projection.weight


# -- bidirectional luong encoder --------------------------------------------------------------
def test_bidirectional_encoder_shapes_and_bridge():
    model = build("luong_tiny", encoder_bidirectional=True, embed_dim=10, hidden_size=12, layers=2).eval()
    rnn = model.encoder.rnn
    assert rnn.bidirectional and rnn.hidden_size == 6 and rnn.num_layers == 2
    assert model.bridge_h.in_features == model.bridge_h.out_features == 2 * 12
    assert model.bridge_c.in_features == 2 * 12
    src, lengths, prev = sample()
    with torch.no_grad():
        enc = model.encode(src, lengths)
        assert enc.states.shape == (3, 6, 12)
        assert enc.extra["h0"].shape == enc.extra["c0"].shape == (3, 2, 12)
        assert (enc.extra["h0"].abs() < 1).all()  # tanh(W_h [->h; <-h] + b_h)
        logits, attn = model(src, lengths, prev)
    assert logits.shape == (3, 5, 30) and attn.shape == (3, 5, 6)
    torch.testing.assert_close(attn.sum(-1), torch.ones(3, 5))
    assert (attn[1, :, 4:] == 0).all()
    # the bridge is used: changing it changes the decoder's start and so the output
    with torch.no_grad():
        model.bridge_c.bias.add_(1.0)
        logits2, _ = model(src, lengths, prev)
    assert not torch.allclose(logits, logits2)


def test_bidirectional_encoder_reads_the_whole_sentence_both_ways():
    """The decoder's initial state depends on the first source word through the backward
    direction's final state and on the last through the forward one."""
    model = build("luong_tiny", encoder_bidirectional=True, embed_dim=10, hidden_size=12, layers=1).eval()
    src, lengths, _ = sample()
    with torch.no_grad():
        base = model.encode(src, lengths).extra["h0"]
        first = src.clone()
        first[:, 0] = 5 if int(src[0, 0]) != 5 else 6
        changed = model.encode(first, lengths).extra["h0"]
    assert not torch.allclose(base[0], changed[0])


def test_bidirectional_needs_even_hidden_size():
    with pytest.raises(NmtkitError, match="even"):
        build("luong_tiny", encoder_bidirectional=True, hidden_size=13)


def test_encoder_hidden_size_sizes_a_bidirectional_encoder():
    model = build("luong_tiny", encoder_bidirectional=True, hidden_size=13, encoder_hidden_size=10, embed_dim=8)
    assert model.encoder.rnn.hidden_size == 10 and model.bridge_h.weight.shape == (model.cfg.layers * 13, model.cfg.layers * 20)
    assert model.W_c.weight.shape == (13, 20 + 13) and model.attention.W_a.weight.shape == (13, 20)
    with pytest.raises(NmtkitError, match="bidirectional"):
        build("luong_tiny", encoder_hidden_size=10)
    with pytest.raises(NmtkitError, match="dot score"):
        build("luong_tiny", encoder_bidirectional=True, encoder_hidden_size=10, score="dot")
    with pytest.raises(NmtkitError, match="encoder_hidden_size"):
        build("luong_tiny", encoder_bidirectional=True, encoder_hidden_size=-1)


def test_bidirectional_alignments_and_unk_replacement_through_translate(tmp_path):
    """A random bidirectional luong checkpoint whose output layer always prefers <unk>: every
    output word is then replaced by the source word the attention points at, which must be the
    word --print-alignment links it to (both come from the same attention rows)."""
    from nmtkit.cli.translate import command as translate

    path = make_checkpoint(tmp_path / "bi.pt", arch="luong_tiny", encoder_bidirectional=True)
    ckpt = load_checkpoint(path)
    unk = ckpt["tgt_dict"].index("<unk>")
    ckpt["model"]["output_projection.bias"][unk] += 50.0
    ckpt["model"]["output_projection.bias"][EOS_ID] -= 100.0  # </s> only when forced at max length
    save_checkpoint(path, ckpt)
    src = "the cat Zorro sees Xavier .\nQuux\n"

    def run(*extra):
        res = CliRunner().invoke(translate, ["--path", str(path), "--quiet", "--threads", "1", "--beam", "2",
                                             "--max-len-a", "0", "--max-len-b", "4", *extra], input=src)
        assert res.exit_code == 0, res.output
        return res.stdout.splitlines()

    plain = run()
    assert plain[0].split() == ["<unk>"] * 4
    replaced = run("--replace-unk", "--print-alignment")
    assert len(replaced) == 2
    for line, hyp_line in zip(src.splitlines(), replaced):
        hyp, links = hyp_line.split(" ||| ")
        words, out = line.split(), hyp.split()
        assert len(out) == 4 and "<unk>" not in out
        assert all(w in words for w in out), (words, out)
        pairs = [tuple(map(int, link.split("-"))) for link in links.split()]
        assert sorted(j for _, j in pairs) == list(range(4))
        for i, j in pairs:
            assert out[j] == words[i]
    assert replaced[1].split(" ||| ")[0] == "Quux Quux Quux Quux"


# -- separate dropout rates ---------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["luong_tiny", "rnnsearch_tiny", "rnnencdec_tiny"])
def test_dropout_rates_fall_back_to_dropout_or_take_their_own(arch):
    model = build(arch, dropout=0.3, layers=2)
    assert model.embed_dropout.p == model.output_dropout.p == model.encoder.dropout.p == 0.3
    assert model.decoder.dropout == model.encoder.rnn.dropout == 0.3
    model = build(arch, dropout=0.3, dropout_embed=0.1, dropout_hidden=0.0, dropout_output=0.5, layers=2)
    assert model.embed_dropout.p == model.encoder.dropout.p == 0.1
    assert model.decoder.dropout == model.encoder.rnn.dropout == 0.0
    assert model.output_dropout.p == 0.5
    with pytest.raises(NmtkitError, match="dropout_output"):
        build(arch, dropout_output=1.0)


def test_dropout_output_acts_in_training_only():
    """Only dropout_output set: train-mode outputs are random, eval-mode outputs are not, and
    with every rate 0 train mode is deterministic (so the rate is what makes the difference)."""
    src, lengths, prev = sample()
    model = build("luong_tiny", dropout=0.0, dropout_output=0.5, embed_dim=10, hidden_size=12)
    model.train()
    with torch.no_grad():
        a, _ = model(src, lengths, prev)
        b, _ = model(src, lengths, prev)
    assert not torch.allclose(a, b)
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(src, lengths, prev)[0], model(src, lengths, prev)[0])
    still = build("luong_tiny", dropout=0.0, embed_dim=10, hidden_size=12).train()
    with torch.no_grad():
        assert torch.equal(still(src, lengths, prev)[0], still(src, lengths, prev)[0])


# -- Bahdanau et al.'s initialisation -----------------------------------------------------------
@pytest.mark.parametrize("arch, sizes", [
    ("rnnsearch_tiny", dict(embed_dim=64, hidden_size=64, attention_dim=64, maxout_size=32)),
    ("rnnencdec_tiny", dict(cell="gru", bahdanau_decoder=True, embed_dim=64, hidden_size=64, maxout_size=32, layers=1)),
    ("luong_tiny", dict(embed_dim=64, hidden_size=64, layers=2)),
])
def test_init_bahdanau_statistics(arch, sizes):
    torch.manual_seed(0)
    name, cfg = resolve_config(arch, {"init": "bahdanau", **sizes})
    d = Dictionary.from_symbols(["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(300)])
    model = build_model(name, cfg, d, d)
    seen = {"recurrent": 0, "alignment": 0, "other": 0, "bias": 0}
    for pname, p in model.named_parameters():
        p = p.detach()
        if "bias" in pname:
            assert (p == 0).all(), pname
            seen["bias"] += 1
        elif pname.endswith("v_a.weight"):
            assert (p == 0).all(), pname
        elif "weight_hh" in pname:
            h = p.size(1)
            assert p.size(0) % h == 0
            for block in p.split(h, dim=0):  # one square matrix per gate
                torch.testing.assert_close(block.t() @ block, torch.eye(h), atol=1e-4, rtol=0, msg=pname)
            seen["recurrent"] += 1
        elif pname.endswith(("attention.W_a.weight", "attention.U_a.weight")):
            assert abs(float(p.std()) - 0.001) < 0.0002 and abs(float(p.mean())) < 0.0002, pname
            seen["alignment"] += 1
        else:
            values = p[1:] if pname.endswith("embed.weight") else p  # padding row is zero
            assert abs(float(values.std()) - 0.01) < 0.002 and abs(float(values.mean())) < 0.002, pname
            seen["other"] += 1
    for m in model.modules():
        if isinstance(m, torch.nn.Embedding):
            assert (m.weight[PAD_ID] == 0).all()
    assert seen["recurrent"] >= 2 and seen["bias"] >= 2 and seen["other"] >= 3
    if name == "rnnsearch":
        assert seen["alignment"] == 2
    # the uniform default is different (so the test above can fail)
    torch.manual_seed(0)
    name, cfg = resolve_config(arch, {"init": "uniform", "init_scale": 0.1, **sizes})
    plain = build_model(name, cfg, d, d)
    assert any((p != 0).any() for n, p in plain.named_parameters() if "bias" in n)


def test_paper_presets_default_to_bahdanau_init():
    for arch in ("rnnsearch_50", "rnnencdec_50"):
        assert resolve_config(arch, {})[1].init == "bahdanau"
    assert resolve_config("rnnsearch_50", {"init": "uniform"})[1].init == "uniform"
    with pytest.raises(NmtkitError):
        resolve_config("rnnsearch_tiny", {"init": "xavier"})[1].validate()


# -- checkpoint round trip of every new option -----------------------------------------------
ROUND_TRIP = [
    ("luong_tiny", dict(encoder_bidirectional=True, share_decoder_input_output_embed=True, embed_dim=96,
                        dropout_embed=0.2, dropout_hidden=0.1, dropout_output=0.3, source_reversal=True)),
    ("luong_tiny", dict(share_all_embeddings=True, embed_dim=96, init="bahdanau", attention="local-p")),
    ("rnnsearch_tiny", dict(share_all_embeddings=True, maxout_size=64, init="bahdanau", dropout_output=0.25)),
    ("rnnencdec_tiny", dict(cell="gru", bahdanau_decoder=True, maxout_size=64, share_decoder_input_output_embed=True,
                            init="bahdanau", layers=1)),
]


@pytest.mark.parametrize("arch, options", ROUND_TRIP, ids=["luong-bi-tied", "luong-all", "rnnsearch-all", "rnnencdec-bahdanau"])
def test_new_options_survive_a_checkpoint_round_trip(tmp_path, arch, options):
    path = make_checkpoint(tmp_path / "m.pt", arch=arch, seed=3, **options)
    model, ckpt = load_model(path)
    for key, value in options.items():
        assert ckpt["model_config"][key] == value, key
        assert getattr(model.cfg, key) == value, key
    # the same model, built here with the same seed, gives identical outputs
    from nmtkit.models import registry

    torch.manual_seed(3)
    name, cfg = registry.resolve_config(arch, options)
    d = model.src_dict
    fresh = registry.build_model(name, cfg, d, model.tgt_dict).eval()
    ref_state = fresh.state_dict()
    for k, v in model.state_dict().items():
        assert torch.equal(v, ref_state[k]), k
    vocab = len(d)
    src, lengths, prev = sample(vocab)
    with torch.no_grad():
        a = model(src, lengths, prev)
        b = fresh(src, lengths, prev)
    assert torch.equal(a[0], b[0])
    if options.get("share_all_embeddings"):
        assert model.encoder.embed.weight is model.tgt_embed.weight is model.output_projection.weight
    elif options.get("share_decoder_input_output_embed"):
        assert model.output_projection.weight is model.tgt_embed.weight
    if options.get("encoder_bidirectional"):
        assert model.encoder.rnn.bidirectional and hasattr(model, "bridge_h")


@pytest.mark.parametrize("extra", [[], ["--quantize", "int8"]], ids=["fp32", "int8"])
def test_a_wide_encoder_checkpoint_translates_with_alignments(tmp_path, extra):
    from nmtkit.cli.translate import command as translate

    path = make_checkpoint(tmp_path / "wide.pt", arch="luong_tiny", encoder_bidirectional=True, encoder_hidden_size=20)
    w_c = load_checkpoint(path)["model"]["W_c.weight"]
    assert w_c.shape[1] == 2 * 20 + w_c.shape[0]  # [c_t; h_t]: annotations of 2 x 20, then the decoder state
    src = "the cat sees the dog .\nAnna sleeps .\n"
    res = CliRunner().invoke(translate, ["--path", str(path), "--quiet", "--threads", "1", "--beam", "3",
                                         "--print-alignment", *extra], input=src)
    assert res.exit_code == 0, res.output
    assert len(res.output.splitlines()) == 2
