"""Parallel text -> the binarized data directory (the library behind ``nmtkit-preprocess``).

Everything is written into a temporary directory that is renamed into place only when
every split is done, so a failure (bad UTF-8 on line 9,000,000, say) leaves nothing behind.
"""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

from nmtkit import __version__
from nmtkit.data.alignments import (ALIGN_SUFFIX, check_alignfile_option, file_blocks, piece_links, read_alignfiles,
                                    write_alignments)
from nmtkit.data.dataset import DATA_FORMAT, META_FORMAT_VERSION, is_data_dir, is_language_code
from nmtkit.data.dictionary import SPECIALS, UNK_ID, Dictionary
from nmtkit.data.indexed import write_indexed
from nmtkit.data.parallel_map import bpe_chunk, map_chunks, tokenize_chunk
from nmtkit.data.preprocess_options import BPE_CHOICES, SPM_TYPES, WRITER, PreprocessOptions, SplitText
from nmtkit.data.subwords import learn_sentencepiece, learn_subword_nmt
from nmtkit.data.text_pipeline import (TextPipeline, codes_checksum, read_bpe_codes, read_sp_model, sp_model_checksum,
                                       split_words)
from nmtkit.data.word_index import piece_word_index
from nmtkit.errors import InputError, NmtkitError
from nmtkit.utils.overlap import refuse_outputs_over_inputs
from nmtkit.utils.atomic_dir import atomic_directory, check_replaceable
from nmtkit.utils.textio import check_parallel, iter_lines


# -- reading ---------------------------------------------------------------------------------
def read_split_files(prefixes: list[str], lang: str) -> tuple[list[str], list[tuple[str, int]]]:
    """Read ``{prefix}.{lang}`` for each prefix; returns lines and their (file, lineno) origins."""
    lines: list[str] = []
    origin: list[tuple[str, int]] = []
    for pref in prefixes:
        path = f"{pref}.{lang}"
        n0 = len(lines)
        for lineno, text in iter_lines(path):
            lines.append(text)
            origin.append((path, lineno))
        if len(lines) == n0:
            raise InputError(path, None, "file is empty")
    return lines, origin


def _split_names(kind: str, prefixes: list[str]) -> list[str]:
    # fairseq's convention: valid, valid1, valid2 ...; all train prefixes are concatenated
    return [kind if k == 0 else f"{kind}{k}" for k in range(len(prefixes))]


# -- the job -----------------------------------------------------------------------------------
def run_preprocess(opt: PreprocessOptions, progress=None) -> dict:  # noqa: ANN001
    """Run the whole job; returns the meta dictionary written to ``meta.json``.  Every input is
    read and checked first, so that all input errors surface before any heavy work."""
    align_prefs = _check_options(opt)
    src, tgt = opt.source_lang, opt.target_lang
    pipes = {lang: TextPipeline(lang=lang, tokenizer=opt.tokenizer, lowercase=opt.lowercase) for lang in (src, tgt)}
    raw = _read_splits(opt)
    train_prefs = opt.trainpref.split(",") if opt.trainpref else []
    word_links = _read_alignfiles(align_prefs, train_prefs, src, raw["train"]) if align_prefs else None
    with atomic_directory(opt.destdir, overwrite=opt.overwrite, owned=is_data_dir, writer=WRITER) as out:
        splits = _tokenize_splits(raw, pipes, opt, progress)
        meta_bpe, pieces = _apply_bpe(splits, pipes, opt, out, progress)
        src_dict, tgt_dict = _build_dictionaries(pieces.get("train"), opt)
        src_dict.save(out / f"dict.{src}.txt")
        tgt_dict.save(out / f"dict.{tgt}.txt")
        split_meta = {}
        for name, (sp, tp) in pieces.items():
            split_meta[name] = _binarize_split(out, name, splits[name], (sp, tp), (src_dict, tgt_dict), opt)
            if name == "train" and word_links is not None:
                split_meta[name]["alignments"] = _write_train_alignments(
                    out / f"{name}.{src}-{tgt}.align", word_links, raw["train"], splits[name], sp, tp, opt)
        meta = {
            "format": DATA_FORMAT,
            "format_version": META_FORMAT_VERSION,
            "nmtkit_version": __version__,
            "source_lang": src,
            "target_lang": tgt,
            "tokenizer": opt.tokenizer,
            "lowercase": opt.lowercase,
            "bpe": meta_bpe,
            "max_len": opt.max_len,
            "max_len_ratio": opt.max_len_ratio,
            "joined_dictionary": opt.joined_dictionary,
            "dict_sizes": {src: len(src_dict), tgt: len(tgt_dict)},
            "dict_checksums": {src: src_dict.checksum(), tgt: tgt_dict.checksum()},
            "splits": split_meta,
        }
        (out / "meta.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return meta


def _check_options(opt: PreprocessOptions) -> list[str]:
    """Refuse contradictory options and unreadable codes or dictionaries before reading any
    corpus; returns the alignment file prefixes (:func:`check_destdir`)."""
    for option, lang in (("--source-lang", opt.source_lang), ("--target-lang", opt.target_lang)):
        if not is_language_code(lang):  # the data directory's readers refuse it: say so before writing one
            raise NmtkitError(f"{option} {lang!r} is not a language code: it names files, so it must be non-empty, hold no '/' and not be '.' or '..'")
    if opt.source_lang == opt.target_lang:
        raise NmtkitError("--source-lang and --target-lang must differ")
    if not opt.trainpref and not (opt.srcdict and (opt.tgtdict or opt.joined_dictionary)):
        raise NmtkitError("--trainpref is required unless --srcdict and --tgtdict are given")
    if opt.bpe not in BPE_CHOICES:
        raise NmtkitError(f"unknown --bpe {opt.bpe!r} (choose {', '.join(BPE_CHOICES)})")
    if opt.spm_type not in SPM_TYPES:
        raise NmtkitError(f"unknown --spm-type {opt.spm_type!r} (choose {', '.join(SPM_TYPES)})")
    if opt.bpe != "sentencepiece" and (opt.spm_type != PreprocessOptions.spm_type
                                       or opt.spm_vocab_size != PreprocessOptions.spm_vocab_size):
        raise NmtkitError("--spm-type and --spm-vocab-size need --bpe sentencepiece")
    if opt.bpe == "sentencepiece" and opt.bpe_merges != PreprocessOptions.bpe_merges:
        raise NmtkitError("--bpe-merges is for subword-nmt; SentencePiece's size is --spm-vocab-size")
    if opt.bpe == "sentencepiece":
        try:
            import sentencepiece  # noqa: F401
        except ImportError:
            raise NmtkitError("--bpe sentencepiece needs the sentencepiece package (pip install sentencepiece)") from None
    if opt.bpe_codes and opt.bpe != "subword-nmt":
        raise NmtkitError("--bpe-codes needs --bpe subword-nmt")
    if opt.bpe_codes and (opt.bpe_merges != PreprocessOptions.bpe_merges or not opt.joint_bpe):
        raise NmtkitError("--bpe-merges and --separate-bpe shape codes learned here; --bpe-codes reads them as they are")
    for option, prefixes in (("--trainpref", opt.trainpref), ("--validpref", opt.validpref), ("--testpref", opt.testpref)):
        names = (prefixes or "").split(",")
        repeated = next((p for k, p in enumerate(names) if p and p in names[:k]), None)
        if repeated is not None:  # the same corpus twice: a doubled train set, or test and test1 alike
            raise NmtkitError(f"{option} names {repeated!r} twice")
    if opt.bpe_codes and not Path(opt.bpe_codes).is_file():
        raise InputError(opt.bpe_codes, None, "no such BPE codes file")
    if opt.bpe_codes:
        read_bpe_codes(opt.bpe_codes)  # bad UTF-8 or a line that is not a merge: now, naming the user's file
    if opt.bpe != "none" and not opt.trainpref and not opt.bpe_codes:
        raise NmtkitError("--bpe needs --trainpref to learn codes on (or --bpe-codes)")
    _check_dictionary_options(opt)
    align_prefs = check_destdir(opt)
    loaded = [_load_dictionary(given) for given in (opt.srcdict, opt.tgtdict) if given]  # bad or empty: now
    if opt.joined_dictionary and len(loaded) == 2 and loaded[0] != loaded[1]:
        raise NmtkitError("--joined-dictionary uses one dictionary for both languages, but --srcdict and --tgtdict "
                          "differ: give one of them")
    return align_prefs


def _check_dictionary_options(opt: PreprocessOptions) -> None:
    """A dictionary read from a file is used as it is: the options that shape a built one would
    be ignored without a word (and with --joined-dictionary, a side's own file would be)."""
    sides = [("src", opt.srcdict, opt.nwordssrc, opt.thresholdsrc), ("tgt", opt.tgtdict, opt.nwordstgt, opt.thresholdtgt)]
    given = opt.srcdict or opt.tgtdict
    for side, path, nwords, threshold in sides:
        if (path or (opt.joined_dictionary and given)) and (nwords != -1 or threshold != 0):
            used = f"--{side}dict" if path else f"--joined-dictionary with --{'tgt' if side == 'src' else 'src'}dict"
            raise NmtkitError(f"--nwords{side}/--threshold{side} shape a dictionary built here, not the one read "
                              f"from a file ({used}); leave them out")


RawSplit = tuple[list[str], list[str], list[tuple[str, int]], list[tuple[str, int]]]


def _read_splits(opt: PreprocessOptions) -> dict[str, RawSplit]:
    """Every split's lines of both sides with where each came from; files must be parallel."""
    src, tgt = opt.source_lang, opt.target_lang
    jobs: list[tuple[str, list[str]]] = []
    if opt.trainpref:
        jobs.append(("train", opt.trainpref.split(",")))
    for kind, pref in (("valid", opt.validpref), ("test", opt.testpref)):
        if pref:
            for name, p in zip(_split_names(kind, pref.split(",")), pref.split(",")):
                jobs.append((name, [p]))
    raw: dict[str, RawSplit] = {}
    for name, prefs in jobs:
        s_lines, s_org = read_split_files(prefs, src)
        t_lines, t_org = read_split_files(prefs, tgt)
        if len(s_lines) != len(t_lines):
            check_parallel([",".join(f"{p}.{src}" for p in prefs), ",".join(f"{p}.{tgt}" for p in prefs)], [len(s_lines), len(t_lines)])
        raw[name] = (s_lines, t_lines, s_org, t_org)
    return raw


def _tokenize_splits(raw: dict[str, RawSplit], pipes: dict[str, TextPipeline], opt: PreprocessOptions,
                     progress) -> dict[str, SplitText]:  # noqa: ANN001
    """Tokenize every split (the training split is then length-filtered)."""
    src, tgt = opt.source_lang, opt.target_lang
    splits: dict[str, SplitText] = {}
    for name, (s_lines, t_lines, s_org, t_org) in raw.items():
        s_tok = map_chunks(tokenize_chunk, pipes[src], s_lines, opt.workers, progress, f"tokenize {name}.{src}")
        t_tok = map_chunks(tokenize_chunk, pipes[tgt], t_lines, opt.workers, progress, f"tokenize {name}.{tgt}")
        split = SplitText(name, s_tok, t_tok)
        if name == "train":
            _filter_train(split, s_org, t_org, opt)
        splits[name] = split
    return splits


def _apply_bpe(splits: dict[str, SplitText], pipes: dict[str, TextPipeline], opt: PreprocessOptions, out: Path,
               progress) -> tuple[dict, dict[str, tuple[list[list[str]], list[list[str]]]]]:  # noqa: ANN001
    """BPE codes learned on train (or the given ones, copied so the data dir stays
    self-contained), applied to every split -> (meta.json's ``bpe``, pieces per split)."""
    src, tgt = opt.source_lang, opt.target_lang
    meta_bpe: dict = {"type": opt.bpe}
    if opt.bpe == "subword-nmt":
        if opt.bpe_codes:  # one codes file for both languages
            shutil.copyfile(opt.bpe_codes, out / "bpe.codes")
            meta_bpe.update(merges=None, joint=True, reused_from=str(Path(opt.bpe_codes).resolve()),
                            codes={src: "bpe.codes", tgt: "bpe.codes"})
        else:
            meta_bpe.update(merges=opt.bpe_merges, joint=opt.joint_bpe, codes=learn_subword_nmt(splits["train"], src, tgt, opt, out))
        for lang in (src, tgt):
            pipes[lang] = TextPipeline(lang, opt.tokenizer, opt.lowercase, str(out / meta_bpe["codes"][lang]))
        meta_bpe["checksums"] = {lang: codes_checksum(read_bpe_codes(out / meta_bpe["codes"][lang])) for lang in (src, tgt)}
    elif opt.bpe == "sentencepiece":
        meta_bpe.update(model_type=opt.spm_type, vocab_size=opt.spm_vocab_size, joint=opt.joint_bpe,
                        models=learn_sentencepiece(splits["train"], src, tgt, opt, out))
        for lang in (src, tgt):
            pipes[lang] = TextPipeline(lang, opt.tokenizer, opt.lowercase, sp_model=str(out / meta_bpe["models"][lang]))
        meta_bpe["checksums"] = {lang: sp_model_checksum(read_sp_model(out / meta_bpe["models"][lang])) for lang in (src, tgt)}
    pieces: dict[str, tuple[list[list[str]], list[list[str]]]] = {}
    for name, split in splits.items():
        if opt.bpe in ("subword-nmt", "sentencepiece"):
            sp = map_chunks(bpe_chunk, pipes[src], split.src_tokens, opt.workers, progress, f"bpe {name}.{src}")
            tp = map_chunks(bpe_chunk, pipes[tgt], split.tgt_tokens, opt.workers, progress, f"bpe {name}.{tgt}")
        else:
            sp, tp = split.src_tokens, split.tgt_tokens
        pieces[name] = (sp, tp)
    return meta_bpe, pieces


def _binarize_split(out: Path, name: str, split: SplitText, pieces: tuple[list[list[str]], list[list[str]]],
                    dicts: tuple[Dictionary, Dictionary], opt: PreprocessOptions) -> dict:
    """Write one split's ids (``.bin``/``.idx``) and tokenized text (``.tok``) of both sides ->
    its meta.json entry (sentences, tokens, ``<unk>`` rates, filter counts)."""
    src, tgt = opt.source_lang, opt.target_lang
    info: dict = {"sentences": len(pieces[0])}
    for lang, seqs, tok_lines, d in ((src, pieces[0], split.src_tokens, dicts[0]), (tgt, pieces[1], split.tgt_tokens, dicts[1])):
        prefix = out / f"{name}.{src}-{tgt}.{lang}"
        ids = [d.encode(p, add_eos=False) for p in seqs]
        write_indexed(prefix, ids, len(d))
        ntok = sum(len(x) for x in ids)
        nunk = sum(sum(1 for i in x if i == UNK_ID) for x in ids)
        with open(f"{prefix}.tok", "w", encoding="utf-8", newline="\n") as fh:
            for toks in tok_lines:
                fh.write(" ".join(toks) + "\n")
        info[lang] = {"tokens": ntok, "unk": nunk, "unk_rate": (nunk / ntok) if ntok else 0.0}
    if split.removed:
        info["removed"] = split.removed
    return info


#: A validation split with more unknown tokens than this gets a warning (:func:`unknown_word_advice`).
UNK_WARN_RATE = 0.05


def unknown_word_advice(meta: dict) -> list[str]:
    """Warnings for validation splits whose ``<unk>`` rate exceeds :data:`UNK_WARN_RATE`, each
    naming the flags that would lower it.

    Why: a model cannot produce a word its dictionary lacks, so a high rate on held-out text caps
    its quality; without ``--tokenizer`` and ``--bpe``, "cat." and "cat" are different words and
    every unseen form is ``<unk>`` (a good share of Multi30k's valid words), and nothing said so."""
    flags = []
    if meta.get("tokenizer", "none") == "none":
        flags.append("--tokenizer moses")
    if meta.get("bpe", {}).get("type", "none") == "none":
        flags.append("--bpe subword-nmt (or --bpe sentencepiece)")
    advice = (f"add {' '.join(flags)}" if flags else
              "keep more of the dictionary (--nwordssrc/--nwordstgt -1, --thresholdsrc/--thresholdtgt 0) "
              "or learn more subwords (--bpe-merges, --spm-vocab-size)")
    out = []
    for name, info in meta.get("splits", {}).items():
        if not name.startswith("valid"):
            continue
        high = [(lang, info[lang]["unk_rate"]) for lang in (meta["source_lang"], meta["target_lang"])
                if info.get(lang, {}).get("unk_rate", 0.0) > UNK_WARN_RATE]
        if high:
            rates = ", ".join(f"{100 * rate:.1f}% of {lang}" for lang, rate in high)
            out.append(f"{name}: {rates} tokens are <unk> (unknown to the dictionary, which the model cannot "
                       f"output); {advice}")
    return out


def check_destdir(opt: PreprocessOptions) -> list[str]:
    """Before any work: ``--destdir`` is not, does not hold and does not lie in an input, and is new,
    empty or (with ``--overwrite``) a data directory nmtkit wrote.  Returns the --alignfile prefixes."""
    align_prefs = check_alignfile_option(opt.alignfile, opt.trainpref)
    refuse_outputs_over_inputs([("--destdir", opt.destdir)], _inputs(opt, align_prefs))
    check_replaceable(opt.destdir, opt.overwrite, is_data_dir, WRITER)
    return align_prefs


def _inputs(opt: PreprocessOptions, align_prefs: list[str]) -> list[tuple[str, str]]:
    """Every file the job reads, with its option: ``--destdir`` must not be, hold or lie in one."""
    found: list[tuple[str, str]] = []
    for option, prefixes in (("--trainpref", opt.trainpref), ("--validpref", opt.validpref), ("--testpref", opt.testpref)):
        for pref in (prefixes or "").split(","):
            if pref:
                found += [(option, f"{pref}.{lang}") for lang in (opt.source_lang, opt.target_lang)]
    found += [("--alignfile", f"{p}.{ALIGN_SUFFIX}") for p in align_prefs]
    found += [(option, path) for option, path in (("--srcdict", opt.srcdict), ("--tgtdict", opt.tgtdict),
                                                  ("--bpe-codes", opt.bpe_codes)) if path]
    return found


def _filter_train(split: SplitText, s_org: list, t_org: list, opt: PreprocessOptions) -> None:
    """Drop empty pairs (or fail under --strict), then the length and ratio filters."""
    keep_s, keep_t, kept = [], [], []
    removed = Counter({"empty": 0, "too_long": 0, "bad_ratio": 0})
    for k, (s, t) in enumerate(zip(split.src_tokens, split.tgt_tokens)):
        if not s or not t:
            if opt.strict:
                path, lineno = s_org[k] if not s else t_org[k]
                raise InputError(path, lineno, "empty line in training data (drop --strict to skip such pairs)")
            removed["empty"] += 1
            continue
        if opt.max_len > 0 and (len(s) > opt.max_len or len(t) > opt.max_len):
            removed["too_long"] += 1
            continue
        if opt.max_len_ratio > 0 and max(len(s), len(t)) / min(len(s), len(t)) > opt.max_len_ratio:
            removed["bad_ratio"] += 1
            continue
        keep_s.append(s)
        keep_t.append(t)
        kept.append(k)
    if not keep_s:
        why = ("every training line is empty" if removed["empty"] == len(split.src_tokens)
               else "check --max-len / --max-len-ratio")
        raise NmtkitError(f"no training pairs left after filtering ({why})")
    split.src_tokens, split.tgt_tokens = keep_s, keep_t
    split.removed = dict(removed)
    split.kept = kept


def _read_alignfiles(align_prefs: list[str], train_prefs: list[str], src_lang: str,
                     train) -> list[list[tuple[int, int]]]:  # noqa: ANN001
    """``--alignfile``: the word links of every training line, checked against its words (step 1,
    so that a bad alignment file fails before any heavy work).  ``align_prefs[k]`` aligns the
    lines of ``train_prefs[k]``; ``train``: the train split as read (lines and origins)."""
    s_lines, t_lines, s_org, _ = train
    blocks = file_blocks(s_org, [f"{p}.{src_lang}" for p in train_prefs])
    src_n = [[len(split_words(line)) for line in s_lines[a:b]] for a, b in blocks]
    tgt_n = [[len(split_words(line)) for line in t_lines[a:b]] for a, b in blocks]
    return read_alignfiles(align_prefs, src_n, tgt_n)


def _write_train_alignments(prefix: Path, word_links: list, train, split: SplitText, src_pieces: list[list[str]],  # noqa: ANN001
                            tgt_pieces: list[list[str]], opt: PreprocessOptions) -> dict:
    """Map the kept pairs' word links to pieces and store them (``train.{src}-{tgt}.align.bin/.idx``)."""
    s_lines, t_lines = train[0], train[1]
    identity = opt.tokenizer == "none"
    out = []
    for k, orig in enumerate(split.kept if split.kept is not None else range(len(s_lines))):
        src_of = piece_word_index(s_lines[orig], split.src_tokens[k], src_pieces[k], identity_tokens=identity)
        tgt_of = piece_word_index(t_lines[orig], split.tgt_tokens[k], tgt_pieces[k], identity_tokens=identity)
        out.append(piece_links(word_links[orig], src_of, tgt_of))
    n_piece_links = write_alignments(prefix, out)
    return {"files": [f"{p}.{ALIGN_SUFFIX}" for p in (opt.alignfile or "").split(",")],
            "word_links": sum(len(word_links[orig]) for orig in (split.kept or [])),
            "piece_links": n_piece_links}


def _load_dictionary(path: str) -> Dictionary:
    """A ``--srcdict``/``--tgtdict`` file; one without entries is refused (all ids would be <unk>)."""
    d = Dictionary.load(path)
    if len(d) == len(SPECIALS):
        raise InputError(path, None, "dictionary has no entries: every token would become <unk>")
    return d


def _require_entries(d: Dictionary, lang: str, threshold: int, nwords: int) -> Dictionary:
    """A built dictionary must keep at least one token (say which options emptied it)."""
    if len(d) == len(SPECIALS):
        raise NmtkitError(f"the {lang} dictionary would be empty (every token <unk>): "
                          f"check the threshold ({threshold}) and nwords ({nwords}) options")
    return d


def _build_dictionaries(train_pieces, opt: PreprocessOptions) -> tuple[Dictionary, Dictionary]:  # noqa: ANN001
    if opt.joined_dictionary:
        if opt.srcdict or opt.tgtdict:
            d = _load_dictionary(opt.srcdict or opt.tgtdict or "")
        else:
            c: Counter = Counter()
            for side in train_pieces:
                for toks in side:
                    c.update(toks)
            thr, nw = max(opt.thresholdsrc, opt.thresholdtgt), max(opt.nwordssrc, opt.nwordstgt)
            d = _require_entries(Dictionary.build(c, threshold=thr, nwords=nw), "joined", thr, nw)
        return d, d
    dicts = []
    for k, (given, thr, nw) in enumerate(((opt.srcdict, opt.thresholdsrc, opt.nwordssrc), (opt.tgtdict, opt.thresholdtgt, opt.nwordstgt))):
        if given:
            dicts.append(_load_dictionary(given))
        else:
            if train_pieces is None:
                raise NmtkitError("--trainpref is required to build a dictionary")
            c = Counter()
            for toks in train_pieces[k]:
                c.update(toks)
            lang = opt.source_lang if k == 0 else opt.target_lang
            dicts.append(_require_entries(Dictionary.build(c, threshold=thr, nwords=nw), lang, thr, nw))
    return dicts[0], dicts[1]
