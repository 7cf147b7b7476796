"""Validation BLEU during training (``nmtkit-train --eval-bleu``).

Why: validation perplexity and BLEU disagree late in training (label smoothing, dropout,
overconfident models), and BLEU is what users select models by.  The valid split is
translated by ``nmtkit-translate``'s own Translator with its defaults, from the binarized ids
(no re-tokenization), and scored with sacreBLEU, cased and detokenized after the model's own
text pipeline: hypotheses are BPE-merged and Moses-detokenized; references are the split's
tokenized text (``.tok``, written by preprocess) detokenized the same way.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, cast

import torch

from nmtkit.data.dataset import ParallelDataset
from nmtkit.data.text_pipeline import TextPipeline, merge_bpe, split_words
from nmtkit.evaluate.metrics import corpus_bleu
from nmtkit.generate.bundle import ModelBundle
from nmtkit.generate.search_options import SearchOptions
from nmtkit.generate.translator import Translator
from nmtkit.train.ema import averaged
from nmtkit.utils.amp import resolve_amp

if TYPE_CHECKING:
    from nmtkit.train.run import TrainingRun


@dataclass
class ValidBleu:
    bleu: float
    sentences: int
    signature: str


def detokenized_references(dataset: ParallelDataset, tgt_pipe: TextPipeline, limit: Optional[int] = None) -> list[str]:
    """The split's target sentences as text a user would read (pre-BPE tokens, detokenized)."""
    lines = dataset.tokens_text(dataset.data.tgt_lang)[: limit if limit else None]
    return [tgt_pipe.detokenize(split_words(line)) for line in lines]


@torch.inference_mode()
def translate_split(
    model: Any,  # a Seq2SeqModel
    dataset: ParallelDataset,
    tgt_pipe: TextPipeline,
    device: torch.device,
    beam: int = SearchOptions.beam,
    max_sentences: Optional[int] = None,
    amp_dtype: Optional[torch.dtype] = None,
) -> list[str]:
    """Beam-search translations of the first ``max_sentences`` pairs of ``dataset``, detokenized,
    in dataset order: :class:`~nmtkit.generate.translator.Translator` with ``nmtkit-translate``'s
    defaults (batches, search options), from the split's ids."""
    was_training = model.training
    model.eval()
    try:
        n = len(dataset) if not max_sentences else min(max_sentences, len(dataset))
        bundle = ModelBundle.of_model(model, TextPipeline(dataset.data.src_lang), tgt_pipe, device, amp_dtype=amp_dtype)
        hyps = Translator(bundle, SearchOptions(beam=beam)).translate_ids([cast(Sequence[int], dataset.src[i]) for i in range(n)])
        return [tgt_pipe.detokenize(merge_bpe(model.tgt_dict.decode(nbest[0].tokens))) for nbest in hyps]
    finally:
        model.train(was_training)


def valid_bleu(
    model: Any,  # a Seq2SeqModel
    dataset: ParallelDataset,
    tgt_pipe: TextPipeline,
    device: torch.device,
    beam: int = SearchOptions.beam,
    max_sentences: Optional[int] = None,
    amp_dtype: Optional[torch.dtype] = None,
) -> ValidBleu:
    """Translate (part of) a split and score it with cased, detokenized sacreBLEU."""
    hyps = translate_split(model, dataset, tgt_pipe, device, beam=beam, max_sentences=max_sentences, amp_dtype=amp_dtype)
    refs = detokenized_references(dataset, tgt_pipe, limit=len(hyps))
    result = corpus_bleu(hyps, [refs])
    return ValidBleu(bleu=result.score, sentences=len(hyps), signature=result.signature)


def run_valid_bleu(run: "TrainingRun", say: Callable[[str], None]) -> dict:
    """:func:`valid_bleu` of a training run's model (its weight average, with ``--ema-decay``) on
    its valid split, with the run's ``--eval-bleu-*`` options, as train_log.jsonl records it;
    ``say`` prints the line that tells that translating begins."""
    assert run.valid_set is not None
    t0 = time.perf_counter()
    say(f"translating {run.valid_set.split} for BLEU (beam {run.opt.eval_bleu_beam})...")
    with averaged(run.ema, run.model):
        r = valid_bleu(run.model, run.valid_set, run.data.pipeline(run.data.tgt_lang), run.device,
                       beam=run.opt.eval_bleu_beam, max_sentences=run.opt.eval_bleu_max_sentences or None,
                       amp_dtype=resolve_amp(run.opt.amp, run.device))  # what nmtkit-translate --amp would use
    return {"valid_bleu": round(r.bleu, 2), "valid_bleu_sentences": r.sentences,
            "valid_bleu_seconds": round(time.perf_counter() - t0, 1)}
