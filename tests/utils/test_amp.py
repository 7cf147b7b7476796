"""``--amp`` resolves the same way for training and translation (:func:`nmtkit.utils.amp.resolve_amp`)."""
from __future__ import annotations

import pytest
import torch

from nmtkit.errors import NmtkitError
from nmtkit.utils import amp as amp_mod
from nmtkit.utils.amp import resolve_amp

CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)


def test_fp16_without_cuda_is_a_one_line_error():
    with pytest.raises(NmtkitError, match=r"^--amp fp16 needs a CUDA device \(this run is on cpu; use --amp none or auto\)$"):
        resolve_amp("fp16", CPU)


def test_bf16_on_a_cpu_with_native_bf16(monkeypatch):
    monkeypatch.setattr(amp_mod, "cpu_has_native_bf16", lambda: True)
    assert resolve_amp("bf16", CPU) == torch.bfloat16


def test_bf16_on_a_cpu_without_native_bf16_says_why(monkeypatch):
    monkeypatch.setattr(amp_mod, "cpu_has_native_bf16", lambda: False)
    with pytest.raises(NmtkitError, match=r"^--amp bf16 on CPU needs native bf16 arithmetic \(AVX512_BF16 or AMX\), "
                                          r"which this CPU lacks: emulated bf16 is slower than float32 \(use --amp none\)$"):
        resolve_amp("bf16", CPU)


def test_cpu_probe_follows_torch(monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    assert amp_mod.cpu_has_native_bf16() is False
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    assert amp_mod.cpu_has_native_bf16() is True


def test_auto_and_none_run_inference_in_full_precision_off_cuda(monkeypatch):
    monkeypatch.setattr(amp_mod, "cpu_has_native_bf16", lambda: True)
    assert resolve_amp("auto", CPU) is None and resolve_amp("none", CPU) is None and resolve_amp("none", CUDA) is None
    assert resolve_amp("none", CPU, training=True) is None


@pytest.mark.parametrize("native, want", [(True, torch.bfloat16), (False, None)])
def test_auto_trains_in_bf16_on_a_cpu_with_native_bf16(monkeypatch, native, want):
    monkeypatch.setattr(amp_mod, "cpu_has_native_bf16", lambda: native)
    assert resolve_amp("auto", CPU, training=True) == want


@pytest.mark.parametrize("bf16_ok, want", [(True, torch.bfloat16), (False, torch.float16)])
def test_auto_on_cuda_takes_bf16_where_supported(monkeypatch, bf16_ok, want):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16_ok)
    assert resolve_amp("auto", CUDA) == want
    assert resolve_amp("bf16", CUDA) == torch.bfloat16 and resolve_amp("fp16", CUDA) == torch.float16


def test_unknown_value_is_refused():
    with pytest.raises(NmtkitError, match=r"--amp must be one of auto, none, bf16, fp16, got 'fp8'"):
        resolve_amp("fp8", CPU)
