"""``--quantize int8``: every model type runs quantised, stays close to float32, and CUDA is refused.

Closeness is measured twice: per step on untrained models of every architecture (log-probs
differ by int8 rounding only), and on translations of a small model trained on the sample
corpus (greedy outputs mostly identical, BLEU nearly unchanged).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import sacrebleu
import torch
from click.testing import CliRunner
from torch import nn

from tests.helpers import make_checkpoint, search_options, train_sample_model
from nmtkit.cli.translate import command as translate
from nmtkit.errors import NmtkitError
from nmtkit.generate.search import beam_search
from nmtkit.generate.bundle import load_ensemble
from nmtkit.generate.quantize import QuantizedRNN, check_quantize, quantize_ensemble

VARIANTS = [
    ("luong_tiny", {}),
    ("luong_tiny", {"encoder_bidirectional": True, "score": "concat", "attention": "local-p", "layers": 2}),
    ("luong_tiny", {"attention": "none", "input_feeding": False}),
    ("rnnsearch_tiny", {}),
    ("rnnencdec_tiny", {}),
    ("rnnencdec_tiny", {"cell": "gru", "bahdanau_decoder": True, "maxout_size": 16}),
    ("transformer_test", {}),
    ("transformer_test", {"normalize_before": True, "share_all_embeddings": True}),
]


def _batch(vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, vocab, (3, 7), generator=g)
    lengths = torch.tensor([7, 5, 3])
    for row, n in enumerate(lengths.tolist()):
        src[row, n - 1] = 2  # </s>
        src[row, n:] = 0
    return src, lengths


@pytest.mark.parametrize("arch,overrides", VARIANTS, ids=lambda v: str(v))
def test_every_model_type_runs_quantized_and_stays_close(tmp_path, arch, overrides):
    ckpt = str(make_checkpoint(tmp_path / "m.pt", arch, **overrides))
    ref, _ = load_ensemble(ckpt)
    q, _ = load_ensemble(ckpt)
    quantize_ensemble(q, "int8", torch.device("cpu"))
    member = q.models[0]
    float_layers = [m for m in member.modules() if isinstance(m, (nn.Linear, nn.LSTM, nn.GRU))]
    # all float layers replaced, but the feedback layers where the CPU has no native bf16
    assert float_layers == [getattr(member, n) for n in member.feedback_layers if isinstance(getattr(member, n), nn.Linear)]
    if arch.startswith(("luong", "rnnsearch")) or (arch == "rnnencdec_tiny" and overrides):  # recurrent cells to quantize
        assert any(isinstance(m, QuantizedRNN) for m in member.modules())
    src, lengths = _batch(len(ref.src_dict))
    with torch.inference_mode():
        states = [m.init_decoder_state(e) for m, e in ((ref, ref.encode(src, lengths)), (q, q.encode(src, lengths)))]
        encs = [ref.encode(src, lengths), q.encode(src, lengths)]
        prev = torch.full((3,), 1, dtype=torch.long)
        for _ in range(4):  # a few steps, both fed the float model's greedy tokens
            lp_ref, a_ref, states[0] = ref.decode_step(prev, states[0], encs[0])
            lp_q, a_q, states[1] = q.decode_step(prev, states[1], encs[1])
            assert lp_q.shape == lp_ref.shape
            assert (lp_q - lp_ref).abs().max() < 0.15  # int8 rounding, not a different computation
            assert (a_ref is None) == (a_q is None)
            prev = lp_ref.argmax(dim=1)
    hyps = beam_search(q, src, lengths, search_options(beam=3, nbest=2, max_len_b=8))
    assert all(len(h) == 2 and all(0 <= t < len(q.tgt_dict) for x in h for t in x.tokens) for h in hyps)


def test_quantized_ensemble(tmp_path):
    paths = ":".join(str(make_checkpoint(tmp_path / f"m{k}.pt", arch, seed=k))
                     for k, arch in enumerate(("luong_tiny", "rnnsearch_tiny")))
    ref, _ = load_ensemble(paths)
    q, _ = load_ensemble(paths)
    quantize_ensemble(q, "int8", torch.device("cpu"))
    assert all(isinstance(m.decoder, QuantizedRNN) for m in q.models)  # every member quantised
    src, lengths = _batch(len(ref.src_dict))
    prev = torch.full((3,), 1, dtype=torch.long)
    with torch.inference_mode():
        lps = []
        for model in (ref, q):
            encs = model.encode(src, lengths)
            lps.append(model.decode_step(prev, model.init_decoder_state(encs), encs)[0])
    assert (lps[0] - lps[1]).abs().max() < 0.15
    assert all(len(h) == 1 for h in beam_search(q, src, lengths, search_options(beam=2, max_len_b=6)))


def test_quantize_is_refused_off_the_cpu(tmp_path):
    with pytest.raises(NmtkitError, match=r"^--quantize int8 runs on the CPU only .*use --device cpu$"):
        check_quantize("int8", torch.device("cuda", 0))
    check_quantize("none", torch.device("cuda", 0))  # no quantisation: any device
    check_quantize("int8", torch.device("cpu"))
    with pytest.raises(NmtkitError, match="must be one of none, int8"):
        check_quantize("int4", torch.device("cpu"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cli_refuses_quantize_on_cuda(random_ckpt, tmp_path):
    inp = tmp_path / "in.txt"
    inp.write_text("the cat sits .\n", encoding="utf-8")
    res = CliRunner().invoke(translate, ["--path", str(random_ckpt), "--device", "cuda", "--quantize", "int8",
                                         "--input", str(inp)])
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        "nmtkit-translate: error: --quantize int8 runs on the CPU only (got device cuda:0); use --device cpu"]


# ---------------------------------------------------------------------------------------------
# a trained model: translations stay close
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    return train_sample_model(tmp_path_factory.mktemp("quant"), n_test=100, max_update=300)


def run_translate(root: Path, *extra: str) -> list[str]:
    res = CliRunner().invoke(translate, ["--path", str(root / "ckpt" / "checkpoint_last.pt"), "--quiet", "--threads",
                                         "1", "--device", "cpu", "--input", str(root / "raw" / "test.en"), *extra])
    assert res.exit_code == 0, res.output
    return res.stdout.splitlines()


@pytest.mark.slow
def test_quantized_translations_stay_close(trained):
    refs = (trained / "raw" / "test.de").read_text(encoding="utf-8").splitlines()
    fp32 = run_translate(trained, "--beam", "1")
    int8 = run_translate(trained, "--beam", "1", "--quantize", "int8")
    assert len(fp32) == len(int8) == len(refs) == 100
    same = sum(a == b for a, b in zip(fp32, int8))
    assert same >= 60, f"only {same}/100 greedy outputs identical"  # 73 measured; float noise flips near-ties
    bleu32 = sacrebleu.corpus_bleu(fp32, [refs]).score
    bleu8 = sacrebleu.corpus_bleu(int8, [refs]).score
    assert bleu32 > 4  # (5.9 measured) the model learnt something, so the comparison means something
    assert abs(bleu8 - bleu32) < 2.0, (bleu32, bleu8)
    beam8 = run_translate(trained, "--quantize", "int8")  # beam 5 runs too
    assert len(beam8) == 100 and sum(bool(x) for x in beam8) >= 95


def test_int8_linears_have_per_row_scales_and_shortlists_keep_them():
    """quantize_model gives every Linear one scale per output row; a shortlist's rows keep their
    own scales, so the restricted layer computes exactly the full layer's columns."""
    from nmtkit.generate.quantize import Int8Linear, quantize_model
    from nmtkit.models.common import select_output_rows

    torch.manual_seed(0)
    float_lin = torch.nn.Linear(16, 40)
    with torch.no_grad():
        float_lin.weight.mul_(torch.logspace(-2, 1, 40)[:, None])  # rows of very different norms
    model = quantize_model(torch.nn.Sequential(float_lin))
    lin = model[0]
    assert isinstance(lin, Int8Linear) and lin.scales.numel() == 40
    x = torch.randn(5, 16)
    # per-row scales keep small rows accurate: one scale for the matrix would round them to 0
    assert (lin(x) - float_lin(x)).abs().div(float_lin(x).abs().amax(0) + 1e-6).max() < 0.1
    ids = torch.tensor([0, 1, 5, 17, 39])
    torch.testing.assert_close(select_output_rows(lin, ids)(x), lin(x)[:, ids], rtol=0, atol=0)


@pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU])
def test_int8_decoder_cells_follow_the_float_cells(cell):
    """QuantizedRNN: the same arithmetic as the float stacked RNN, the products rounded to
    int8 (per-row weight scales, so small and large rows alike stay close)."""
    from nmtkit.generate.quantize import QuantizedRNN
    from nmtkit.models.common import rnn_step

    torch.manual_seed(0)
    rnn = cell(24, 32, num_layers=2, batch_first=True).eval()
    q = QuantizedRNN(rnn, full_range=False)
    x, h, c = torch.randn(6, 24), torch.randn(6, 2, 32) * 0.5, torch.randn(6, 2, 32)
    c = c if cell is nn.LSTM else None
    with torch.no_grad():
        ref = rnn_step(rnn, x, h, c)
        got = rnn_step(q, x, h, c)
        for a, b in zip(ref, got):
            if a is not None:
                assert a.shape == b.shape and (a - b).abs().max() < 0.05
        seq_out, _ = q(torch.randn(6, 5, 24), (h.transpose(0, 1), c.transpose(0, 1)) if c is not None else h.transpose(0, 1))
        assert seq_out.shape == (6, 5, 32)


@pytest.mark.skipif(not __import__("nmtkit.generate.quantize", fromlist=["x"]).full_range_activations(),
                    reason="8-bit activations are only used on a CPU with VNNI")
def test_full_range_activations_halve_the_rounding_error():
    """Where the CPU has VNNI, activations use all 8 bits (fbgemm's default is 7): about half
    the error against float32, measured on a decoder-sized product."""
    from nmtkit.generate.quantize import Int8Linear

    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 512)
    x = torch.randn(320, 256)
    ref = lin(x).detach()
    err = {full: (Int8Linear.from_linear(lin, full)(x) - ref).abs().mean().item() for full in (True, False)}
    assert err[True] < 0.7 * err[False], err


def test_an_unknown_or_failing_vnni_probe_means_seven_bit_activations(monkeypatch):
    from nmtkit.generate import quantize

    def broken() -> bool:
        raise RuntimeError("no cpuinfo")

    monkeypatch.setattr(torch.cpu, "_is_vnni_supported", broken, raising=False)
    assert quantize.full_range_activations() is False
    monkeypatch.delattr(torch.cpu, "_is_vnni_supported", raising=False)
    assert quantize.full_range_activations() is False
    model = quantize.quantize_model(torch.nn.Sequential(torch.nn.Linear(4, 4)))
    assert model[0].reduce_range is True


@pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU])
def test_int8_bidirectional_encoder_loop_follows_the_float_rnn(cell):
    """An encoder RNN becomes a QuantizedRNN run by masked_rnn: outputs and final states stay
    close to the float module's over packed sequences, and padding stays zero."""
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    from nmtkit.generate.quantize import QuantizedRNN
    from nmtkit.models.encoders import masked_rnn

    torch.manual_seed(0)
    rnn = cell(12, 16, num_layers=2, batch_first=True, bidirectional=True).eval()
    x, lengths = torch.randn(3, 6, 12), torch.tensor([6, 4, 1])
    with torch.no_grad():
        packed, hidden = rnn(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
        ref_out, _ = pad_packed_sequence(packed, batch_first=True, total_length=6)
        ref_h = hidden[0] if cell is nn.LSTM else hidden
        out, h_n, c_n = masked_rnn(QuantizedRNN(rnn, full_range=False), x, lengths)
    assert out.shape == ref_out.shape and (out - ref_out).abs().max() < 0.05
    assert (out[2, 1:] == 0).all()  # padding of the 1-token sentence
    assert h_n.shape == ref_h.shape and (h_n - ref_h).abs().max() < 0.05
    assert (c_n is None) == (cell is nn.GRU)
    with pytest.raises(ValueError, match="no single step"):
        QuantizedRNN(rnn, full_range=False).step(x[:, 0], torch.zeros(3, 2, 16))


@pytest.mark.parametrize("native_bf16", [True, False])
@pytest.mark.parametrize("input_feeding", [True, False])
def test_feedback_layers_stay_bf16_or_float32(tmp_path, monkeypatch, native_bf16, input_feeding):
    """Luong's W_c feeds the next step under input feeding: int8 leaves it in bf16 where the CPU
    has native bf16, in float32 elsewhere; without input feeding it is an int8 layer like the rest."""
    from nmtkit.generate.quantize import Bf16Linear, Int8Linear
    from nmtkit.utils import amp

    monkeypatch.setattr(amp, "cpu_has_native_bf16", lambda: native_bf16)
    ckpt = str(make_checkpoint(tmp_path / "m.pt", "luong_tiny", input_feeding=input_feeding))
    ref, _ = load_ensemble(ckpt)
    q, _ = load_ensemble(ckpt)
    quantize_ensemble(q, "int8", torch.device("cpu"))
    w_c = q.models[0].W_c
    if not input_feeding:
        assert q.models[0].feedback_layers == () and isinstance(w_c, Int8Linear)
    elif native_bf16:
        assert isinstance(w_c, Bf16Linear)
        x = torch.randn(4, w_c.in_features)
        assert (w_c(x) - ref.models[0].W_c(x)).abs().max() < 0.05 and w_c(x).dtype == torch.float32
    else:
        assert w_c is not ref.models[0].W_c and type(w_c) is type(ref.models[0].W_c)  # the float layer, kept
    src, lengths = _batch(len(ref.src_dict))
    assert all(len(h) == 1 for h in beam_search(q, src, lengths, search_options(beam=2, max_len_b=6)))
