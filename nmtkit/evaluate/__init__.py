"""Evaluation: translation metrics, length buckets, word alignments (AER) and figures.

Heavy dependencies (sacrebleu, matplotlib) are imported only when a function needs them.
"""
from nmtkit.data.pharaoh import GoldAlignment, parse_pharaoh_line
from nmtkit.evaluate.aer import AERResult, alignment_error_rate
from nmtkit.evaluate.alignment_io import format_pharaoh, read_alignments, read_gold, read_gold_pair, write_pharaoh
from nmtkit.evaluate.length_buckets import DEFAULT_EDGES, BucketScore, bleu_by_length
from nmtkit.evaluate.metrics import (
    BootstrapResult,
    MetricResult,
    corpus_bleu,
    corpus_chrf,
    corpus_score,
    corpus_scores,
    corpus_ter,
    paired_bootstrap,
    perplexity,
    sentence_scores,
)
from nmtkit.evaluate.symmetrize import grow_diag_final, grow_diag_final_and, intersect, symmetrize, union

__all__ = [
    "AERResult", "alignment_error_rate",
    "GoldAlignment", "format_pharaoh", "parse_pharaoh_line", "read_alignments", "read_gold",
    "read_gold_pair", "write_pharaoh",
    "DEFAULT_EDGES", "BucketScore", "bleu_by_length",
    "BootstrapResult", "MetricResult", "corpus_bleu", "corpus_chrf", "corpus_score",
    "corpus_scores", "corpus_ter", "paired_bootstrap", "perplexity", "sentence_scores",
    "grow_diag_final", "grow_diag_final_and", "intersect", "symmetrize", "union",
]
