"""Validation BLEU during training (``nmtkit-train --eval-bleu``).

Why: validation perplexity and BLEU disagree late in training (label smoothing, dropout,
overconfident models), and BLEU is what users select models by.  The valid split is
translated with the same batched beam search as ``nmtkit-translate``, from the binarized ids
(no re-tokenization), and scored with sacreBLEU, cased and detokenized after the model's own
text pipeline: hypotheses are BPE-merged and Moses-detokenized; references are the split's
tokenized text (``.tok``, written by preprocess) detokenized the same way.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from nmtkit.data.dataset import ParallelDataset, pad_sequences
from nmtkit.data.text_pipeline import TextPipeline, merge_bpe, split_words
from nmtkit.evaluate.metrics import corpus_bleu
from nmtkit.generate.beam import beam_search
from nmtkit.generate.ensemble import EnsembleModel


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
    model: torch.nn.Module,
    dataset: ParallelDataset,
    tgt_pipe: TextPipeline,
    device: torch.device,
    beam: int = 5,
    max_sentences: Optional[int] = None,
    batch_size: int = 64,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
) -> list[str]:
    """Beam-search translations of the first ``max_sentences`` pairs of ``dataset``, detokenized,
    in dataset order (batched by source length for speed)."""
    was_training = model.training
    model.eval()
    try:
        n = len(dataset) if not max_sentences else min(max_sentences, len(dataset))
        order = sorted(range(n), key=lambda i: int(dataset.src_sizes[i]))
        ensemble = EnsembleModel([model])
        out: list[str] = [""] * n
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            src, lengths = pad_sequences([dataset.src[i] for i in idx])
            hyps = beam_search(
                ensemble, src.to(device), lengths.to(device), beam=beam, nbest=1,
                max_len_a=max_len_a, max_len_b=max_len_b, return_attention=False,
            )
            for i, nbest in zip(idx, hyps):
                pieces = model.tgt_dict.decode(nbest[0].tokens)
                out[i] = tgt_pipe.detokenize(merge_bpe(pieces))
        return out
    finally:
        model.train(was_training)


def valid_bleu(
    model: torch.nn.Module,
    dataset: ParallelDataset,
    tgt_pipe: TextPipeline,
    device: torch.device,
    beam: int = 5,
    max_sentences: Optional[int] = None,
) -> ValidBleu:
    """Translate (part of) a split and score it with cased, detokenized sacreBLEU."""
    hyps = translate_split(model, dataset, tgt_pipe, device, beam=beam, max_sentences=max_sentences)
    refs = detokenized_references(dataset, tgt_pipe, limit=len(hyps))
    result = corpus_bleu(hyps, [refs])
    return ValidBleu(bleu=result.score, sentences=len(hyps), signature=result.signature)
