"""``--amp`` resolves the same way for training and translation (:func:`nmtkit.utils.amp.resolve_amp`)."""
from __future__ import annotations

import pytest
import torch

from nmtkit.errors import NmtkitError
from nmtkit.utils.amp import resolve_amp

CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_explicit_half_precision_without_cuda_is_a_one_line_error(amp):
    with pytest.raises(NmtkitError, match=rf"^--amp {amp} needs a CUDA device \(this run is on cpu; use --amp none or auto\)$"):
        resolve_amp(amp, CPU)


def test_auto_and_none_run_in_full_precision_off_cuda():
    assert resolve_amp("auto", CPU) is None and resolve_amp("none", CPU) is None and resolve_amp("none", CUDA) is None


@pytest.mark.parametrize("bf16_ok, want", [(True, torch.bfloat16), (False, torch.float16)])
def test_auto_on_cuda_takes_bf16_where_supported(monkeypatch, bf16_ok, want):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16_ok)
    assert resolve_amp("auto", CUDA) == want
    assert resolve_amp("bf16", CUDA) == torch.bfloat16 and resolve_amp("fp16", CUDA) == torch.float16


def test_unknown_value_is_refused():
    with pytest.raises(NmtkitError, match=r"--amp must be one of auto, none, bf16, fp16, got 'fp8'"):
        resolve_amp("fp8", CPU)
