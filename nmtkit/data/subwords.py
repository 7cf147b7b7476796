"""Learning subword models on the training split's tokens: SentencePiece models and
subword-nmt merges (the ``--bpe`` choices of ``nmtkit-preprocess``), written into its output
directory, which is removed with them on failure.
"""
from __future__ import annotations

import contextlib
import io
from collections import Counter
from pathlib import Path

from nmtkit.data.preprocess_options import PreprocessOptions, SplitText
from nmtkit.errors import NmtkitError


def learn_sentencepiece(train: SplitText, src: str, tgt: str, opt: PreprocessOptions, out: Path) -> dict[str, str]:
    """Train SentencePiece models (``--spm-type`` unigram or bpe; joint over both languages, or
    one per language with ``--separate-bpe``) on the training split's tokens -> file names.

    Why on tokens, not raw lines: the tokenizer and lowercasing come first, as for subword-nmt,
    and pieces then map back to tokens one for one.  Identity normalisation (no NFKC) keeps
    every character as written, so decoding gives back exactly the tokens.  The vocabulary size
    is a soft limit: a small corpus gets the pieces it has rather than an error."""
    import sentencepiece as spm

    spm.set_min_log_level(2)  # errors only: SentencePiece logs each training step to stderr
    spm.set_random_generator_seed(1)  # the same corpus gives the same model

    def learn(lines: list[list[str]], name: str) -> str:
        model = io.BytesIO()
        sentences = (" ".join(toks) for toks in lines if toks)
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=sentences, model_writer=model, model_type=opt.spm_type,
                vocab_size=opt.spm_vocab_size, hard_vocab_limit=False, character_coverage=1.0,
                normalization_rule_name="identity", split_digits=False, num_threads=opt.workers,
                bos_id=-1, eos_id=-1, pad_id=-1, unk_id=0, max_sentence_length=1 << 16)
        except RuntimeError as exc:
            raise NmtkitError(f"SentencePiece could not learn a model from --trainpref: {str(exc).strip()}") from None
        (out / name).write_bytes(model.getvalue())
        return name

    if opt.joint_bpe:
        name = learn([*train.src_tokens, *train.tgt_tokens], "spm.model")
        return {src: name, tgt: name}
    return {src: learn(train.src_tokens, f"spm.{src}.model"), tgt: learn(train.tgt_tokens, f"spm.{tgt}.model")}


def learn_subword_nmt(train: SplitText, src: str, tgt: str, opt: PreprocessOptions, out: Path) -> dict[str, str]:
    """Learn subword-nmt merges (joint over both languages, or one set per language)."""
    from subword_nmt.learn_bpe import learn_bpe

    def learn(counter: Counter, codes_name: str) -> str:
        # inside the output's temporary directory: removed with it on failure, errors name DESTDIR
        vocab_path = out / f"{codes_name}.vocab"
        with open(vocab_path, "w", encoding="utf-8") as vf:
            for w, c in sorted(counter.items(), key=lambda x: (-x[1], x[0])):
                vf.write(f"{w} {c}\n")
        with open(vocab_path, encoding="utf-8") as fin, open(out / codes_name, "w", encoding="utf-8") as fout:
            with contextlib.redirect_stderr(io.StringIO()):  # subword-nmt's own tqdm bar and chatter
                learn_bpe(fin, fout, opt.bpe_merges, min_frequency=2, is_dict=True)
        Path(vocab_path).unlink()
        return codes_name

    counts: dict[str, Counter] = {src: Counter(), tgt: Counter()}
    for toks in train.src_tokens:
        counts[src].update(toks)
    for toks in train.tgt_tokens:
        counts[tgt].update(toks)
    if opt.joint_bpe:
        name = learn(counts[src] + counts[tgt], "bpe.codes")
        return {src: name, tgt: name}
    return {src: learn(counts[src], f"bpe.codes.{src}"), tgt: learn(counts[tgt], f"bpe.codes.{tgt}")}
