"""Failed allocations as one-line errors naming the options that asked for the memory.

Why: ``--hidden-size 1000000`` or ``--beam 100000000`` make torch try to allocate terabytes;
torch answers with a ``RuntimeError``/``torch.OutOfMemoryError`` traceback that says nothing
about which option to change.  Wrap the step that allocates in :func:`allocation_guard`.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

from nmtkit.errors import NmtkitError

#: How torch's allocators word a failed allocation (CPU and CUDA).
_ALLOC_MESSAGES = ("can't allocate memory", "out of memory", "not enough memory")


def is_allocation_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a failed memory allocation (Python's or torch's, CPU or GPU)."""
    if isinstance(exc, MemoryError):
        return True
    if isinstance(exc, RuntimeError):  # torch.OutOfMemoryError is a RuntimeError
        text = str(exc).lower()
        return type(exc).__name__ == "OutOfMemoryError" or any(m in text for m in _ALLOC_MESSAGES)
    return False


def allocation_failure_message(exc: BaseException) -> str:
    """The first line of torch's message, for the end of ours (``MemoryError`` has none)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return first[:200]


@contextlib.contextmanager
def allocation_guard(what: str) -> Iterator[None]:
    """Turn a failed allocation inside the block into ``out of memory <what> (<torch's reason>)``.

    ``what`` names the step and the options that size it, e.g. ``"building the model (check
    --hidden-size, --embed-dim, --layers)"``.  Other errors pass through unchanged."""
    try:
        yield
    except (MemoryError, RuntimeError) as exc:
        if not is_allocation_failure(exc):
            raise
        raise NmtkitError(f"out of memory {what}: {allocation_failure_message(exc)}") from None


#: The model options that decide how much memory the weights take.
MODEL_SIZE_OPTIONS = ("hidden_size", "embed_dim", "ffn_dim", "layers", "encoder_layers", "decoder_layers", "maxout_size",
                      "attention_dim", "max_positions")


def model_size_hint(cfg: object) -> str:
    """``--hidden-size 1000000, --embed-dim 256, ...``: the size options a model config has, as
    the options that set them, so an allocation error says what to lower."""
    given = [f"--{name.replace('_', '-')} {getattr(cfg, name)}" for name in MODEL_SIZE_OPTIONS if hasattr(cfg, name)]
    return "lower " + ", ".join(given) if given else "a smaller --arch"
