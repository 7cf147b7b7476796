"""Model scoring: log-probabilities of given references under a checkpoint or ensemble (forced
decoding), the model half of ``nmtkit-score``, as a thin front-end over a
:class:`~nmtkit.generate.bundle.ModelBundle`.

The references are a preprocessed split (its binarized ids, read as they are: the data
directory's dictionaries must be the model's) or raw source/target files (turned into pieces
by the model's own text pipeline).  Every input is read and checked before anything is scored.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

from nmtkit.data.dictionary import EOS_ID
from nmtkit.errors import NmtkitError
from nmtkit.evaluate.metrics import perplexity
from nmtkit.utils.stdio import input_name
from nmtkit.generate.bundle import ModelBundle
from nmtkit.generate.checkpoint_paths import PathsLike
from nmtkit.generate.forced import ForcedResult, score_corpus
from nmtkit.utils.checks import text_lines
from nmtkit.utils.memory import allocation_guard
from nmtkit.utils.textio import check_parallel, read_lines

#: ``nmtkit-score --path``'s sentences per batch.
SCORE_BATCH_SIZE = 32


@dataclass
class ModelScores:
    """Reference log-probabilities (natural log, summed over tokens including ``</s>``) per sentence."""

    checkpoints: list[str]
    logprobs: list[float]
    n_tokens: list[int]

    @property
    def total_logprob(self) -> float:
        return sum(self.logprobs)

    @property
    def total_tokens(self) -> int:
        return sum(self.n_tokens)

    @property
    def perplexity(self) -> float:
        return perplexity(self.total_logprob, self.total_tokens)


class Scorer:
    """Forced decoding of references with one bundle."""

    def __init__(self, bundle: ModelBundle) -> None:
        self.bundle = bundle

    @classmethod
    def from_checkpoint(cls, path: PathsLike, *, device: Any = None, amp: str = "auto",
                        batch_size: int = SCORE_BATCH_SIZE) -> "Scorer":
        return cls(ModelBundle.load(path, device=device, amp=amp, batch_size=batch_size))

    def score_split(self, data_dir: Union[str, os.PathLike], split: str = "test") -> ModelScores:
        """A preprocessed split's references, from its binarized ids."""
        ds = self.bundle.fit_data_dir(data_dir, "ids").load_split(split)
        src_seqs = [ds.src[i].tolist() + [EOS_ID] for i in range(len(ds))]
        tgt_seqs = [ds.tgt[i].tolist() + [EOS_ID] for i in range(len(ds))]
        if not src_seqs:
            raise NmtkitError(f"nothing to score: split {split!r} of {data_dir} is empty")
        return self._score(src_seqs, tgt_seqs)

    def score_files(self, source: str, target: str) -> ModelScores:
        """Raw source/target files (``-``: standard input), line by line."""
        src_lines, tgt_lines = read_lines(source), read_lines(target)
        check_parallel([input_name(source), input_name(target)], [len(src_lines), len(tgt_lines)])
        return self.score_lines(src_lines, tgt_lines)

    def score_lines(self, src_lines: Sequence[str], tgt_lines: Sequence[str]) -> ModelScores:
        src_lines, tgt_lines = text_lines(src_lines, "src_lines"), text_lines(tgt_lines, "tgt_lines")
        b = self.bundle
        src_seqs = [b.src_dict.encode(b.src_pipe.encode(line)[1], add_eos=True) for line in src_lines]
        tgt_seqs = [b.tgt_dict.encode(b.tgt_pipe.encode(line)[1], add_eos=True) for line in tgt_lines]
        if not src_seqs:
            raise NmtkitError("nothing to score: no lines")
        return self._score(src_seqs, tgt_seqs)

    def _score(self, src_seqs: list[list[int]], tgt_seqs: list[list[int]]) -> ModelScores:
        with allocation_guard(f"force-decoding batches of --batch-size {self.bundle.batch_size} (lower it)"):
            results: list[ForcedResult] = score_corpus(self.bundle, src_seqs, tgt_seqs, need_attention=False)
        return ModelScores(list(self.bundle.paths), [float(r.log_prob) for r in results],
                           [int(r.num_tokens) for r in results])


def score_model(checkpoints: PathsLike, *, data: Optional[str] = None, split: str = "test",
                source: Optional[str] = None, target: Optional[str] = None, batch_size: int = SCORE_BATCH_SIZE,
                device: Any = None, amp: str = "auto") -> ModelScores:
    """Log-probability of references under a checkpoint or ensemble (``"a.pt:b.pt"`` or a list).

    The references are a preprocessed split (``data`` + ``split``) or raw ``source``/``target`` files.
    """
    if data is not None and (source is not None or target is not None):
        raise NmtkitError("give either --data DIR (with --split) or --source/--target, not both")
    if data is None and (source is None or target is None):
        raise NmtkitError("model scoring needs --data DIR (with --split) or both --source and --target")
    if source is not None and source == target == "-":
        raise NmtkitError("standard input ('-') can be read only once")
    scorer = Scorer.from_checkpoint(checkpoints, device=device, amp=amp, batch_size=batch_size)
    if data is not None:
        return scorer.score_split(data, split)
    assert source is not None and target is not None
    return scorer.score_files(source, target)
