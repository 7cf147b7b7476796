"""The one place that turns ``--amp auto|none|bf16|fp16`` into an autocast dtype.

Why one function: training and translation used to decide differently (translation silently
ignored ``--amp bf16`` on CPU and turned it into fp16 on GPUs without bf16); now both refuse
an explicit half precision without CUDA and agree on what ``auto`` means.
"""
from __future__ import annotations

from typing import Optional

import torch

from nmtkit.errors import NmtkitError

AMP_CHOICES = ("auto", "none", "bf16", "fp16")


def resolve_amp(amp: str, device: torch.device) -> Optional[torch.dtype]:
    """Autocast dtype for ``amp`` on ``device``; None means full precision.

    ``auto``: bf16 on CUDA devices that support it, else fp16; full precision off CUDA.
    ``bf16``/``fp16`` without CUDA is an error rather than a silent full-precision run.
    """
    if amp not in AMP_CHOICES:
        raise NmtkitError(f"--amp must be one of {', '.join(AMP_CHOICES)}, got {amp!r}")
    if amp == "none":
        return None
    if device.type != "cuda":
        if amp == "auto":
            return None
        raise NmtkitError(f"--amp {amp} needs a CUDA device (this run is on {device}; use --amp none or auto)")
    if amp == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if amp == "bf16" else torch.float16
