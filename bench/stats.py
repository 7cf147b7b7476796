"""Statistics of quality figures: mean and spread over seeds, and a paired bootstrap.

``paired_bootstrap`` is sacrebleu's own paired bootstrap resampling (``sacrebleu.significance.
PairedTest``, the ``--paired-bs`` of its command line; Koehn 2004): the baseline (the best peer)
first, the system second, 1,000 resamples of the test sentences, BLEU and chrF.  Its p-value is the
(approximate) probability that the system's advantage over the baseline arises by chance.
"""
from __future__ import annotations

import statistics
from typing import Sequence


def mean_spread(values: Sequence[float]) -> dict:
    """Mean, sample standard deviation (0 for one value), min and max."""
    vals = list(values)
    return {"n": len(vals), "mean": round(statistics.mean(vals), 2),
            "sd": round(statistics.stdev(vals), 2) if len(vals) > 1 else 0.0,
            "min": min(vals), "max": max(vals)}


def paired_bootstrap(baseline: Sequence[str], system: Sequence[str], refs: Sequence[str], n_samples: int = 1000,
                     names: tuple[str, str] = ("baseline", "system")) -> dict:
    """sacrebleu's paired bootstrap of ``system`` against ``baseline`` on one reference stream:
    {metric: {"baseline": score, "system": score, "delta": ..., "p": p-value, "ci95": (lo, hi) of the system}}."""
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    if not (len(baseline) == len(system) == len(refs)):
        raise ValueError(f"line counts differ: {len(baseline)}, {len(system)}, {len(refs)}")
    metrics = {"BLEU": BLEU(), "chrF": CHRF()}
    test = PairedTest([(names[0], list(baseline)), (names[1], list(system))], metrics, [list(refs)],
                      test_type="bs", n_samples=n_samples)
    _, scores = test()
    out = {}
    for metric in metrics:
        key = next(k for k in scores if k.startswith(metric))  # sacrebleu names chrF "chrF2"
        base, sys_ = scores[key][0], scores[key][1]
        out[metric] = {"baseline": round(base.score, 2), "system": round(sys_.score, 2),
                       "delta": round(sys_.score - base.score, 2), "p": float(sys_.p_value),
                       "ci95": [round(float(sys_.mean - sys_.ci), 2), round(float(sys_.mean + sys_.ci), 2)]}
    return out
