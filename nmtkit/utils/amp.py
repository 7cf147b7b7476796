"""The one place that turns ``--amp auto|none|bf16|fp16`` into an autocast dtype, and the one
autocast context every command runs its model under.

Why one function: training, translation, scoring and alignment used to decide differently;
now they refuse the same things with the same words and agree on what ``auto`` means.

bf16 on CPU: on a CPU with native bf16 arithmetic (AVX512_BF16 or AMX) matrix products run
at about twice the float32 rate, so ``--amp bf16`` is allowed there: weights, optimizer state
and checkpoints stay float32, autocast runs the matrix products in bf16, and the softmax, the
loss and the LSTM cell state stay float32 (the models take ``log_softmax`` of float32 logits;
the cell update promotes to the float32 state).  Without native bf16, torch emulates it and
is slower than float32, so it is refused.

What ``auto`` means on such a CPU, from measurements (bench/RESULTS.md, "quality" and "train
speed"): **training** runs in bf16, because the recipe model reached the same valid BLEU and
perplexity epoch for epoch as in float32 while training clearly faster; **inference**
(translate, score, align) stays float32, so that a checkpoint's output is exact and the same on
every machine; ``--amp bf16`` and ``--quantize int8`` are its opt-in fast paths.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, ContextManager, Optional

from nmtkit.errors import NmtkitError

if TYPE_CHECKING:  # torch is imported where it is used: the CLI modules read AMP_CHOICES without it
    import torch

AMP_CHOICES = ("auto", "none", "bf16", "fp16")


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512_BF16 or AMX tiles), as torch sees it."""
    import torch

    cpu = getattr(torch, "cpu", None)
    for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        fn = getattr(cpu, probe, None)
        try:
            if fn is not None and fn():
                return True
        except Exception:  # noqa: BLE001 - a probe that fails means "not known to be there"
            continue
    return False


def resolve_amp(amp: str, device: torch.device, *, training: bool = False) -> Optional[torch.dtype]:
    """Autocast dtype for ``amp`` on ``device``; None means full precision.

    ``auto``: bf16 on CUDA devices that support it, else fp16; on a CPU, bf16 for ``training``
    where the CPU has native bf16 and full precision otherwise (see the module docstring).
    ``bf16`` on CPU needs native bf16; ``fp16`` needs CUDA.  Anything refused is a one-line
    :class:`NmtkitError` saying why, never a silent full-precision run.
    """
    import torch

    if amp not in AMP_CHOICES:
        raise NmtkitError(f"--amp must be one of {', '.join(AMP_CHOICES)}, got {amp!r}")
    if amp == "none":
        return None
    if device.type == "cuda":
        if amp == "auto":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.bfloat16 if amp == "bf16" else torch.float16
    if amp == "auto":
        return torch.bfloat16 if training and device.type == "cpu" and cpu_has_native_bf16() else None
    if amp == "bf16" and device.type == "cpu":
        if not cpu_has_native_bf16():
            raise NmtkitError("--amp bf16 on CPU needs native bf16 arithmetic (AVX512_BF16 or AMX), which this "
                              "CPU lacks: emulated bf16 is slower than float32 (use --amp none)")
        return torch.bfloat16
    raise NmtkitError(f"--amp {amp} needs a CUDA device (this run is on {device}; use --amp none or auto)")


def precision_name(dtype: Optional[torch.dtype]) -> str:
    """How a run computes, for its log: ``float32`` or ``bf16 autocast`` (``auto`` does not say which it chose)."""
    return "float32" if dtype is None else f"{str(dtype).removeprefix('torch.').replace('bfloat16', 'bf16').replace('float16', 'fp16')} autocast"


def autocast(device: torch.device, dtype: Optional[torch.dtype]) -> ContextManager:
    """Mixed precision on ``device`` with ``dtype`` (from :func:`resolve_amp`); None: a no-op."""
    if dtype is None:
        return nullcontext()
    import torch

    return torch.autocast(device_type=device.type, dtype=dtype)


def autocast_key() -> tuple:
    """CUDA autocast's state as a cache key: a graph captured under one precision is not another's."""
    import torch

    cast = torch.is_autocast_enabled("cuda")
    return cast, torch.get_autocast_dtype("cuda") if cast else None


def uncached_autocast() -> ContextManager:
    """CUDA autocast as it stands, without its weight-cast cache, for CUDA graph capture: the cache
    is emptied when the outer context closes, so a graph must make its casts on every replay."""
    import torch

    cast = torch.is_autocast_enabled("cuda")
    return torch.autocast("cuda", dtype=torch.get_autocast_dtype("cuda"), enabled=cast, cache_enabled=False)
