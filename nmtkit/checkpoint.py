"""Self-contained checkpoints, written atomically, and loading models back through the registry.

A checkpoint carries everything needed to translate without the data directory: the model
name, arch and resolved options, both dictionaries, the text pipeline (tokenizer, lowercasing,
BPE codes inlined), the weights, and (for resuming) the full training state.

It sits at the package root because training writes checkpoints and generation (translate,
score, align) reads them: neither may depend on the other.
"""
from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator, Optional

import torch

from nmtkit import __version__
from nmtkit.data.dictionary import Dictionary
from nmtkit.data.text_pipeline import TextPipeline, check_bpe_codes
from nmtkit.errors import NmtkitError
from nmtkit.utils.checks import not_a_checkpoint_file
from nmtkit.utils.schema import Choice, DictOf, ListOf, Nullable, validate
from nmtkit.utils.textio import atomic_write

CHECKPOINT_FORMAT = "nmtkit-checkpoint"
CHECKPOINT_VERSION = 1
#: ``torch.save`` writes a zip archive; anything else cannot be an nmtkit checkpoint.
ZIP_MAGIC = b"PK\x03\x04"

#: What rebuilding and running the model reads (:mod:`nmtkit.utils.schema`); training state is
#: checked where it is resumed.
PIPELINE_SCHEMA = {"lang": str, "tokenizer": Choice(("moses", "none")), "lowercase": bool,
                   "bpe_codes_text?": Nullable(str), "sp_model_b64?": Nullable(str)}
CHECKPOINT_SCHEMA = {
    "model_name": str,
    "arch?": Nullable(str),
    "model_config": DictOf(object),
    "src_dict": ListOf(str),
    "tgt_dict": ListOf(str),
    "src_pipeline": PIPELINE_SCHEMA,
    "tgt_pipeline": PIPELINE_SCHEMA,
    "model": DictOf(torch.Tensor),
}


def save_checkpoint(path: str | os.PathLike, payload: dict[str, Any]) -> None:
    """``torch.save`` into memory, then the bytes through :func:`atomic_write`: a full disk or
    ``ulimit -f`` is one error naming ``path`` (``No space left on device``, ``File too large``),
    and the previous checkpoint stays intact.

    Why not ``torch.save`` straight into the file: its zip writer turns a failed write into a
    RuntimeError about stream positions, losing the errno and the file name.  The price is one
    in-memory copy of the checkpoint while it is written."""
    buf = io.BytesIO()
    torch.save({"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "nmtkit_version": __version__, **payload}, buf)
    with atomic_write(path, "wb") as fh, buf.getbuffer() as data:
        fh.write(data)


def epoch_number(path: str | os.PathLike) -> Optional[int]:
    """N for a file named ``checkpoint{N}.pt`` (what the trainer writes each epoch), else None."""
    p = Path(path)
    number = p.stem[len("checkpoint"):]
    return int(number) if p.suffix == ".pt" and p.stem.startswith("checkpoint") and number.isascii() and number.isdigit() else None


def epoch_checkpoints(save_dir: str | os.PathLike) -> list[Path]:
    """The ``checkpoint{epoch}.pt`` files of a training directory, by epoch number (not by
    name: checkpoint10 comes after checkpoint9)."""
    numbered = [(n, p) for p in Path(save_dir).glob("checkpoint*.pt") if (n := epoch_number(p)) is not None]
    return [p for _, p in sorted(numbered)]


def load_checkpoint(path: str | os.PathLike, mmap: bool = True) -> dict[str, Any]:
    """Read a checkpoint; a missing, truncated or foreign file is a one-line :class:`NmtkitError`.

    ``mmap=False`` reads every byte now: what resuming wants, since the optimizer keeps the loaded
    state tensors, and mapped ones would keep the replaced checkpoint's disk space for the whole run."""
    p = Path(path)
    if not p.is_file():
        raise NmtkitError(f"{p}: {not_a_checkpoint_file(str(p))}")
    # one open file for every read: a checkpoint replaced meanwhile (the trainer saving the one a
    # translate run is loading) must not mix the old file's bytes with the new one's checksums
    with open(p, "rb") as fh:
        magic = fh.read(len(ZIP_MAGIC))
        if magic != ZIP_MAGIC:  # a PNG, a text file ...: say so, rather than torch's advice on weights_only
            raise NmtkitError(f"{p} is not an nmtkit checkpoint")
        same_file = f"/proc/self/fd/{fh.fileno()}"
        source = same_file if mmap and os.path.exists(same_file) else p
        fh.seek(0)
        try:
            # mmap: tensors are read as they are used (copy-on-write), so an inference command does
            # not read a checkpoint's optimizer state (two thirds of its bytes)
            ckpt = torch.load(source if mmap else fh, map_location="cpu", weights_only=True, mmap=mmap)
        except pickle.UnpicklingError:  # a torch file holding objects nmtkit never writes (another toolkit's)
            raise NmtkitError(f"{p} is not an nmtkit checkpoint") from None
        except Exception as exc:  # noqa: BLE001 - torch raises RuntimeError/EOFError/... for damaged files
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise NmtkitError(f"{p}: not a readable nmtkit checkpoint (truncated or corrupt? {first})") from None
        if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
            raise NmtkitError(f"{p}: not an nmtkit checkpoint")
        if ckpt.get("version") != CHECKPOINT_VERSION:
            raise NmtkitError(f"{p}: checkpoint format version {ckpt.get('version')}, this nmtkit reads {CHECKPOINT_VERSION}")
        validate(ckpt, CHECKPOINT_SCHEMA, str(p))
        # what is read anyway: the model's tensors, or (read whole, for resuming) every tensor
        check_stored_checksums(p, fh, ckpt["model"].values() if mmap else _all_tensors(ckpt))
    for side in ("src_pipeline", "tgt_pipeline"):
        if ckpt[side].get("bpe_codes_text") is not None:
            check_bpe_codes(ckpt[side]["bpe_codes_text"], f"{p} ({side}.bpe_codes_text)")
    return ckpt


def _all_tensors(obj: Any) -> Iterator[torch.Tensor]:
    """Every tensor inside nested dicts, lists and tuples (a checkpoint's optimizer and EMA state)."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _all_tensors(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _all_tensors(value)


def check_stored_checksums(path: Path, archive_file: BinaryIO, tensors: Iterable[torch.Tensor]) -> None:
    """The bytes of each tensor must match the CRC-32 its archive entry stored.

    Why: ``torch.load`` never checks them, so a checkpoint with flipped bits in its weights (a bad
    disk or copy) was translated without a word.  :func:`load_checkpoint` passes what it reads
    anyway: the model's tensors when mapped for inference, every tensor
    (optimizer and EMA state too) when read whole for resuming."""
    import zipfile
    import zlib

    archive_file.seek(0)
    with zipfile.ZipFile(archive_file) as archive:  # the file the tensors came from, even if replaced since
        stored = {(info.file_size, info.CRC) for info in archive.infolist()}
    seen: set[int] = set()
    for tensor in tensors:
        storage = tensor.untyped_storage()
        if storage.data_ptr() in seen:  # tied weights share one entry
            continue
        seen.add(storage.data_ptr())
        data = torch.empty(0, dtype=torch.uint8).set_(storage).numpy()
        if (storage.nbytes(), zlib.crc32(data)) not in stored:
            raise NmtkitError(f"{path}: corrupt checkpoint (a weight's bytes do not match the checksum stored with them)")


def model_payload(model: torch.nn.Module, arch: str, src_pipe: TextPipeline, tgt_pipe: TextPipeline) -> dict[str, Any]:
    """The part of a checkpoint that describes and holds the model (no training state)."""
    from dataclasses import asdict

    return {
        "model_name": model.model_name,
        "arch": arch,
        "model_config": asdict(model.cfg),
        "src_dict": list(model.src_dict.symbols),
        "tgt_dict": list(model.tgt_dict.symbols),
        "src_pipeline": src_pipe.to_dict(),
        "tgt_pipeline": tgt_pipe.to_dict(),
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
    }


def build_model_from_checkpoint(ckpt: dict[str, Any], path: str | os.PathLike = "<checkpoint>"):  # noqa: ANN201
    """Rebuild the model through the registry and load its weights (CPU, eval mode).

    For inference only: weights that are not finite (NaN/inf, a diverged run) are refused here,
    naming the checkpoint, rather than translated into empty or garbage output."""
    from nmtkit.models import registry
    from nmtkit.utils.memory import allocation_guard

    dicts = []
    for field in ("src_dict", "tgt_dict"):
        try:
            dicts.append(Dictionary.from_symbols(ckpt[field]))
        except ValueError as exc:
            raise NmtkitError(f"{path}: field '{field}': {exc}") from None
    check_finite_weights(ckpt["model"], path)
    try:
        cfg = registry.config_from_dict(ckpt["model_name"], ckpt["model_config"])
        with allocation_guard(f"building the model of {path}"):
            model = registry.build_model(ckpt["model_name"], cfg, *dicts)
    except NmtkitError as exc:
        raise NmtkitError(f"{path}: {exc}") from None
    load_weights(model, ckpt["model"], path, ckpt["model_name"])
    model.eval()
    return model


def load_weights(model: torch.nn.Module, state: dict[str, torch.Tensor], path: str | os.PathLike, name: str) -> None:
    """``model.load_state_dict(state)``, or one line naming the file and what does not fit: the
    first missing and unexpected weights (a checkpoint of another version of the model, e.g. one
    trained before an option gained weights), else the first shape mismatch."""
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        own = model.state_dict()
        missing, unexpected = [k for k in own if k not in state], [k for k in state if k not in own]

        def some(keys: list[str]) -> str:
            return ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")

        parts = ([f"missing {some(missing)}"] if missing else []) + ([f"unexpected {some(unexpected)}"] if unexpected else [])
        detail = "; ".join(parts) or next((line.strip() for line in str(exc).splitlines()[1:] if line.strip()),
                                          str(exc).strip().splitlines()[0])
        raise NmtkitError(f"{path}: weights do not fit model {name!r} ({detail})") from None


def check_finite_weights(state: dict[str, torch.Tensor], path: str | os.PathLike) -> None:
    """Every floating tensor of a state dict must be finite; the first one that is not is named."""
    for name, tensor in state.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise NmtkitError(f"{path}: weight '{name}' holds NaN or infinite values (a diverged run?)")


def load_model(path: str | os.PathLike, device: Optional[torch.device] = None):  # noqa: ANN201
    """Checkpoint path -> (model in eval mode on ``device``, checkpoint dict)."""
    ckpt = load_checkpoint(path)
    model = build_model_from_checkpoint(ckpt, path)
    if device is not None:
        model.to(device)
    return model, ckpt


def pipelines_from_checkpoint(ckpt: dict[str, Any]) -> tuple[TextPipeline, TextPipeline]:
    return TextPipeline.from_dict(ckpt["src_pipeline"]), TextPipeline.from_dict(ckpt["tgt_pipeline"])
