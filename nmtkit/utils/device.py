"""Device choice shared by the library and the command line (``--device auto|cpu|cuda[:N]``)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Union

from nmtkit.errors import NmtkitError

if TYPE_CHECKING:
    import torch


def parse_device(name: Union[str, "torch.device", None] = "auto") -> "torch.device":
    """Resolve ``auto|cpu|cuda|cuda:N`` (or a ``torch.device``, or None = auto); ``auto`` takes a
    GPU when one is present.

    The one place devices are checked: anything else (``mps``, ``meta``, ``cuda:99``, CUDA
    without a GPU) is a one-line error naming ``--device``, not a torch traceback at the first
    tensor moved there."""
    import torch

    if isinstance(name, torch.device):
        name = str(name)
    if name is None or name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    text = str(name).strip()
    kind, _, index = text.partition(":")
    if text == "cpu":
        return torch.device("cpu")
    if kind != "cuda" or (_ and not (index.isascii() and index.isdigit())):
        raise NmtkitError(f"--device {text!r}: expected auto, cpu or cuda[:N]")
    if not torch.cuda.is_available():
        raise NmtkitError(f"--device {text} asked for, but no CUDA GPU is available")
    count = torch.cuda.device_count()
    if index and int(index) >= count:
        raise NmtkitError(f"--device {text}: no such GPU (this machine has {count}: cuda:0 to cuda:{count - 1})")
    return torch.device(text)
