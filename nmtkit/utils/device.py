"""Device choice shared by the library and the command line (``--device auto|cpu|cuda[:N]``)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Union

from nmtkit.errors import NmtkitError

if TYPE_CHECKING:
    import torch


def parse_device(name: Union[str, "torch.device", None] = "auto") -> "torch.device":
    """Resolve ``auto|cpu|cuda[:N]`` (or a ``torch.device``, or None = auto); ``auto`` takes a
    GPU when one is present.  Asking for CUDA without a GPU is a one-line error, not torch's."""
    import torch

    if isinstance(name, torch.device):
        name = str(name)
    if name is None or name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise NmtkitError(f"--device {name} asked for, but no CUDA GPU is available")
    try:
        return torch.device(name)
    except RuntimeError:
        raise NmtkitError(f"--device {name!r}: expected auto, cpu or cuda[:N]") from None
