"""``--help`` by topic: which options each command's help shows under which heading (rich-click panels).

Why a table here rather than on each option: the options stay declared once, where they are
(some, like the model options, are generated), and the grouping can be read and changed in one
place.  Flags a command does not have are skipped; options in no panel of a command that has
a ``None`` panel go there, else under rich-click's default "Options".
"""
from __future__ import annotations

import shutil
from typing import Optional

#: The last panel of every command.
CONFIGURATION = ("Configuration", ["--config", "--dump-config", "--help"])

#: Command name -> [(panel title, flags or None for "every option in no other panel")].
PANELS: dict[str, list[tuple[str, Optional[list[str]]]]] = {
    "train": [
        ("Model: a preset and its options", ["--arch", "--list-archs"]),
        ("Budget and batching", ["--max-epoch", "--max-update", "--stop-time-hours", "--patience", "--batch-size",
                                 "--max-tokens", "--update-freq", "--seed"]),
        ("Optimisation", ["--optimizer", "--lr", "--lr-schedule", "--halve-after", "--lr-shrink", "--plateau-patience",
                          "--warmup-updates", "--adam-betas", "--min-lr", "--anneal-fraction", "--clip-norm",
                          "--loss-norm", "--label-smoothing", "--ema-decay", "--max-nonfinite-updates",
                          "--guided-alignment-weight", "--guided-alignment-loss"]),
        ("Validation", ["--valid-subset", "--validate-interval-updates", "--eval-bleu", "--eval-bleu-beam",
                        "--eval-bleu-max-sentences", "--best-checkpoint-metric"]),
        ("Checkpoints and resuming", ["--save-dir", "--keep-last", "--no-epoch-checkpoints", "--save-interval-updates",
                                      "--reset-optimizer", "--reset-lr-scheduler", "--reset-dataloader", "--train-subset"]),
        ("Hardware", ["--device", "--amp", "--threads", "--cuda-graphs"]),
        ("Logging", ["--log-interval", "--no-progress", "--tensorboard-logdir"]),
        ("Model options (override the preset's)", None),
    ],
    "translate": [
        ("Input and output", ["--path", "--input", "--output", "--data", "--quiet", "--verbose", "--strict"]),
        ("Search", ["--beam", "--nbest", "--lenpen", "--lenpen-form", "--max-len-a", "--max-len-b", "--min-len",
                    "--unkpen", "--max-source-len"]),
        ("Unknown words and alignments", ["--replace-unk", "--unk-posterior", "--print-alignment", "--alignment-file",
                                          "--align-shift"]),
        ("Speed", ["--buffer-size", "--batch-size", "--max-tokens", "--device", "--amp", "--threads", "--quantize",
                   "--shortlist", "--shortlist-k", "--shortlist-frequent", "--cuda-graphs"]),
    ],
    "preprocess": [
        ("Input and output", ["--source-lang", "--target-lang", "--trainpref", "--validpref", "--testpref", "--destdir",
                              "--alignfile", "--overwrite", "--workers"]),
        ("Tokens and subwords", ["--tokenizer", "--lowercase", "--bpe", "--bpe-merges", "--spm-type", "--spm-vocab-size",
                                 "--separate-bpe", "--bpe-codes"]),
        ("Dictionaries", ["--nwordssrc", "--nwordstgt", "--thresholdsrc", "--thresholdtgt", "--joined-dictionary",
                          "--srcdict", "--tgtdict"]),
        ("Training-pair filters", ["--max-len", "--max-len-ratio", "--strict"]),
    ],
}


#: Panel title -> rich-click panel settings: the model options' switches have long names, so
#: their --no-NAME forms are said once in the panel's help rather than in a column of their own.
PANEL_STYLE: dict[str, dict] = {
    "Model options (override the preset's)": {
        "column_types": ["opt_primary", "metavar", "help"],
        "help": "Switches also take --no-NAME (e.g. --no-input-feeding); unset options take the preset's value.",
    },
}


def panels_for(name: str, flags: list[str]) -> list[tuple[str, list[str]]]:
    """The panels of command ``name`` whose options it has, ``flags`` being its long flags in
    declaration order; :data:`CONFIGURATION` last."""
    spec = PANELS.get(name, [])
    listed = {f for _, opts in spec if opts for f in opts} | set(CONFIGURATION[1])
    out = []
    for title, opts in spec:
        chosen = [f for f in (opts if opts is not None else [f for f in flags if f not in listed]) if f in flags]
        if chosen:
            out.append((title, chosen))
    out.append((CONFIGURATION[0], [f for f in CONFIGURATION[1] if f in flags]))
    return out


def help_width() -> int:
    """``--help``'s width: the terminal's, within 120 to 160 columns (120 without a terminal), so
    that the longest flags (--share-decoder-input-output-embed) keep their column."""
    size = shutil.get_terminal_size((120, 24))
    return max(120, min(size.columns, 160))
