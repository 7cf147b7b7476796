#!/usr/bin/env python3
"""CTranslate2 as a decoder in the translation-speed suite: BPE pieces on stdin, pieces on stdout.

Runs in the fairseq peer's interpreter (where ``pip install ctranslate2`` put it), on a model that
``ct2-fairseq-converter`` made from the fairseq Transformer of the quality-per-hour run
(bench/translate_speed.py converts it, untimed).  The search is the suite's (bench/peers.py): beam
``--beam``, the score divided by the length (``length_penalty`` 1), and at most
``--max-len-a`` x the longest source of the batch + ``--max-len-b`` target pieces (CTranslate2
takes one bound per batch, not one per sentence).  Batches of ``--batch-size`` sentences in input
order, one thread pool of ``--threads``.

    python bench/ct2_translate.py MODEL_DIR --compute-type int8 --threads 1 < test.bpe.en > out.bpe.de
"""
from __future__ import annotations

import argparse
import sys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a CTranslate2 model directory")
    ap.add_argument("--compute-type", default="float32", help="int8, float32, ... (CTranslate2's compute_type)")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (one translator)")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--lenpen", type=float, default=1.0)
    ap.add_argument("--max-len-a", type=float, default=1.5)
    ap.add_argument("--max-len-b", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()
    import ctranslate2

    translator = ctranslate2.Translator(args.model, device="cpu", compute_type=args.compute_type, inter_threads=1,
                                        intra_threads=args.threads)
    lines = sys.stdin.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out = sys.stdout
    for start in range(0, len(lines), args.batch_size):
        batch = [line.split() for line in lines[start:start + args.batch_size]]
        longest = max((len(toks) for toks in batch), default=0)
        results = translator.translate_batch(batch, beam_size=args.beam, length_penalty=args.lenpen,
                                             max_decoding_length=int(args.max_len_a * longest + args.max_len_b),
                                             max_batch_size=args.batch_size)
        for r in results:
            out.write(" ".join(r.hypotheses[0]) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
