"""What ``nmtkit-preprocess`` is asked to do, and the text of a split as it goes through it.

Apart from :mod:`nmtkit.data.preprocess` (the job) so that the job's parts
(:mod:`nmtkit.data.subwords`) can take the options without importing the job.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

#: What writes the directories that ``--overwrite`` may replace (named when refusing another one).
WRITER = "nmtkit-preprocess (no nmtkit meta.json)"
#: ``--bpe`` choices: subword-nmt codes, a SentencePiece model (:func:`nmtkit.data.subwords.learn_sentencepiece`), or none.
BPE_CHOICES = ("subword-nmt", "sentencepiece", "none")
#: ``--spm-type``: the SentencePiece model types offered.
SPM_TYPES = ("unigram", "bpe")


@dataclass
class PreprocessOptions:
    source_lang: str
    target_lang: str
    destdir: str
    trainpref: Optional[str] = None
    validpref: Optional[str] = None
    testpref: Optional[str] = None
    workers: int = 1
    nwordssrc: int = -1
    nwordstgt: int = -1
    thresholdsrc: int = 0
    thresholdtgt: int = 0
    joined_dictionary: bool = False
    srcdict: Optional[str] = None
    tgtdict: Optional[str] = None
    tokenizer: str = "none"
    lowercase: bool = False
    bpe: str = "none"
    bpe_merges: int = 10000
    joint_bpe: bool = True
    bpe_codes: Optional[str] = None  # reuse these codes (e.g. the other direction's) instead of learning
    #: --bpe sentencepiece: the model type (unigram | bpe) and the vocabulary size to learn
    spm_type: str = "unigram"
    spm_vocab_size: int = 8000
    #: Word alignments of the training pairs: PREFIX.align per --trainpref prefix (see nmtkit.data.alignments).
    alignfile: Optional[str] = None
    max_len: int = 50
    max_len_ratio: float = 9.0
    strict: bool = False
    overwrite: bool = False


@dataclass
class SplitText:
    """The tokenized text of one split, both sides, with where each line came from."""

    name: str
    src_tokens: list[list[str]]
    tgt_tokens: list[list[str]]
    removed: dict[str, int] = field(default_factory=dict)
    kept: Optional[list[int]] = None  # train: the line index of each pair the filters kept
