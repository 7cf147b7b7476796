"""Checkpoint averaging (``nmtkit average``): the mean of the parameters of several checkpoints
of one training run, written as an ordinary checkpoint.

Why: the last few epoch checkpoints of a run lie around one minimum; their mean usually
translates better than any of them (Junczys-Dowmunt et al. 2016; fairseq's
``average_checkpoints.py``, Marian's ``--average``) at no training cost.  Averaging only makes
sense for checkpoints of the same model, so any difference in model options, dictionaries or
text pipeline is refused with the list of differences.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence


from nmtkit.errors import NmtkitError
from nmtkit.checkpoint import check_finite_weights, epoch_checkpoints, load_checkpoint

#: What must be identical for checkpoints to be averaged (and is copied to the result).
SAME_KEYS = ("model_name", "model_config", "src_dict", "tgt_dict", "src_pipeline", "tgt_pipeline")


def last_epoch_checkpoints(save_dir: str | os.PathLike, n: int) -> list[Path]:
    """The ``n`` highest-numbered ``checkpoint{epoch}.pt`` files of a save dir, oldest first."""
    d = Path(save_dir)
    if not d.is_dir():
        raise NmtkitError(f"{d}: no such directory")
    numbered = epoch_checkpoints(d)
    if len(numbered) < n:
        raise NmtkitError(f"{d}: --last {n} asks for {n} epoch checkpoints, found {len(numbered)}")
    return numbered[-n:]


#: Longest value shown in a difference; longer ones (a pipeline's BPE codes) are only named.
SHOWN_VALUE_CHARS = 60


def _shown(value: Any) -> str:
    text = repr(value)
    if len(text) <= SHOWN_VALUE_CHARS:
        return text
    if isinstance(value, str):
        return f"a text of {len(value):,} characters"
    return f"a {type(value).__name__} of {len(value):,} entries" if isinstance(value, (list, tuple, dict)) else text[:SHOWN_VALUE_CHARS] + "..."


def _differences(name_a: str, a: dict, name_b: str, b: dict) -> list[str]:
    """What differs between two checkpoints' model options, dictionaries and pipelines, each short
    enough for a one-line error (long values are described, not printed)."""
    out = []
    for key in SAME_KEYS:
        va, vb = a.get(key), b.get(key)
        if va == vb:
            continue
        if isinstance(va, dict) and isinstance(vb, dict):
            for k in sorted(set(va) | set(vb)):
                if va.get(k) != vb.get(k):
                    out.append(f"{key}.{k}: {_shown(va.get(k))} in {name_a}, {_shown(vb.get(k))} in {name_b}")
        elif key.endswith("_dict"):
            out.append(f"{key}: {len(va or [])} vs {len(vb or [])} entries ({name_a} vs {name_b}) or different words")
        else:
            out.append(f"{key}: {_shown(va)} in {name_a}, {_shown(vb)} in {name_b}")
    return out


def refuse_repeats(paths: Sequence[str | os.PathLike]) -> None:
    """One line when two inputs are one file (the same path, another spelling, a link): every input
    weighs 1/N, so a repeat would silently weigh that checkpoint twice."""
    seen: dict[str, str] = {}
    for path in paths:
        real = os.path.realpath(path)
        if real in seen:
            raise NmtkitError(f"{path} and {seen[real]} are the same checkpoint: each input weighs 1/N, "
                              "so it would count twice; give it once")
        seen[real] = str(path)


def average_checkpoints(paths: Sequence[str | os.PathLike]) -> dict[str, Any]:
    """Load ``paths`` and return a checkpoint payload whose weights are their mean.

    The mean is taken in float64 and cast back to each parameter's dtype; integer buffers
    (none in nmtkit's models today) are taken from the last checkpoint.  The result has no
    training state: it is for translating, scoring and aligning, not for resuming.  A checkpoint
    with NaN or infinite weights is refused, naming it: the mean would hold them too, a file that
    translate, score and align refuse, found only when it is used."""
    if not paths:
        raise NmtkitError("no checkpoints to average")
    refuse_repeats(paths)
    first_path = str(paths[0])
    first = load_checkpoint(first_path)
    check_finite_weights(first["model"], first_path)
    sums = {k: v.double().clone() if v.is_floating_point() else v.clone() for k, v in first["model"].items()}
    problems: list[str] = []
    for path in paths[1:]:
        ckpt = load_checkpoint(path)
        check_finite_weights(ckpt["model"], path)
        problems += _differences(first_path, first, str(path), ckpt)
        if not problems:
            if ckpt["model"].keys() != sums.keys():
                problems.append(f"{path}: other parameter names than {first_path}")
                continue
            for k, v in ckpt["model"].items():
                if v.is_floating_point():
                    sums[k] += v.double()
                else:
                    sums[k] = v.clone()
    if problems:
        raise NmtkitError("cannot average checkpoints of different models: " + "; ".join(problems))
    n = len(paths)
    averaged = {k: (v / n).to(first["model"][k].dtype) if v.is_floating_point() else v for k, v in sums.items()}
    payload = {key: first[key] for key in SAME_KEYS}
    payload["arch"] = first.get("arch")
    payload["model"] = averaged
    payload["averaged_from"] = [str(p) for p in paths]
    return payload
