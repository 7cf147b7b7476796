"""Raw text <-> model pieces, the same way in every subcommand.

Preprocess records its choices (tokenizer, lowercasing, BPE codes) in ``meta.json``; train,
translate, score and align rebuild the exact same :class:`TextPipeline` from it, so a line is
always turned into pieces identically and pieces back into text identically.

Three levels of a sentence:
* **words**: the whitespace-separated tokens of the line as the user gave it;
* **tokens**: after the tokenizer (Moses may split a word into several tokens) and lowercasing;
* **pieces**: after BPE (a token ending in ``@@`` continues into the next piece).

BPE is subword-nmt's (codes) or a SentencePiece model (unigram or BPE, ``--bpe sentencepiece``).
SentencePiece's pieces are written in subword-nmt's convention (``▁Ober hausen`` becomes
``Ober@@ hausen``), so everything after segmentation (dictionaries, unknown-word replacement,
alignments mapped back to words, detokenisation) is the same for both.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Optional

from nmtkit.errors import InputError

BPE_SEP = "@@"
_WS = re.compile(r"[ \t]+")
#: A UTF-8 byte-order mark at the start of a line (of the file, or of a file concatenated into it).
_LINE_START_BOM = re.compile("^\ufeff", re.MULTILINE)

#: Control characters that separate text (line, page and record separators, CR, tabs):
#: they become a space.  ``\n`` never reaches here (it ends the line).
_SEPARATORS = "\t\r\v\f\x1c\x1d\x1e\x1f\x85\u2028\u2029"
#: Every other C0/C1 control character (NUL, ESC, DEL ...) is dropped.
_CONTROLS = "".join(chr(c) for c in [*range(0x00, 0x20), *range(0x7F, 0xA0)] if chr(c) not in _SEPARATORS + "\n")
#: Invisible characters that are never part of a word: zero width space, word joiner, and a
#: byte-order mark inside a line (``cat a b``, an editor): dropped, or ``word\u200b`` and
#: ``word`` are two vocabulary entries and BLEU drops without a visible difference.
_INVISIBLE = "\u200b\u2060\ufeff"
_NORMALIZE = str.maketrans({**{c: " " for c in _SEPARATORS}, **{c: None for c in _CONTROLS + _INVISIBLE}})
#: Zero width non-joiner and joiner have a job between two characters (Persian and Indic
#: spelling, emoji sequences), and none beside a space or a line end: there they are dropped.
_LOOSE_JOINERS = re.compile("(?:^|(?<= ))[\u200c\u200d]+|[\u200c\u200d]+(?= |$)")


def normalize_line(line: str) -> str:
    """Separator-like control characters -> space, other control characters dropped.

    Why: such characters are never meant as text; kept, they end up in vocabularies and,
    copied by ``--replace-unk``, in the output, where a ``\\r`` or U+2028 splits one output
    line into several for any reader using ``str.splitlines``.  Every line enters through
    :func:`split_words` or :meth:`TextPipeline.tokenize`, which both call this.  Invisible
    characters (:data:`_INVISIBLE`, and joiners that join nothing) are dropped for the same reason.
    """
    if line.isprintable():  # no control, format or separator character: nothing to do
        return line
    line = line.translate(_NORMALIZE)
    if "\u200c" in line or "\u200d" in line:
        line = _LOOSE_JOINERS.sub("", line)
    return line


@lru_cache(maxsize=None)
def _moses_alnum() -> frozenset[str]:
    """The characters the Moses tokenizer treats as letters or digits: a string of only these
    has no boundary for it to split at (tests/data/test_preprocess.py checks that against Moses)."""
    from sacremoses import MosesTokenizer

    return frozenset(MosesTokenizer.IsAlnum)


def split_words(line: str) -> list[str]:
    """Whitespace words of a normalized line (spaces only: other Unicode spaces stay inside words)."""
    return [w for w in _WS.split(normalize_line(line).strip(" ")) if w]


def merge_bpe(pieces: list[str]) -> list[str]:
    """Undo subword-nmt segmentation: ``["lo@@", "w", "er"]`` -> ``["low", "er"]``."""
    out: list[str] = []
    buf = ""
    for p in pieces:
        if p.endswith(BPE_SEP):
            buf += p[: -len(BPE_SEP)]
        else:
            out.append(buf + p)
            buf = ""
    if buf:
        out.append(buf)
    return out


def read_bpe_codes(path: str | os.PathLike) -> str:
    """The text of a subword-nmt codes file, checked (see :func:`check_bpe_codes`).

    Newlines are read as text mode reads them (``\r\n`` -> ``\n``) and a byte-order mark is dropped: the text is inlined into
    checkpoints, and ensembles compare it."""
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = raw.rfind(b"\n", 0, exc.start) + 1
        raise InputError(str(path), raw.count(b"\n", 0, exc.start) + 1,
                         f"invalid UTF-8 at byte {exc.start - start}") from None
    # A byte-order mark starting a line, as every other text input drops it: kept, it would hide the
    # version line (subword-nmt would silently segment as version 0.1) or glue itself to a merge.
    text = _LINE_START_BOM.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    check_bpe_codes(text, str(path))
    return text


def codes_checksum(codes_text: str) -> str:
    """SHA-256 of BPE codes as :func:`read_bpe_codes` returns them: ``meta.json`` keeps it, so a
    codes file cut short or edited after preprocessing (fewer merges: a segmentation the
    binarized data was not made with) is refused instead of trained and shipped in checkpoints."""
    return hashlib.sha256(codes_text.encode("utf-8")).hexdigest()


def check_bpe_codes(text: str, name: str) -> None:
    """Every merge line must hold two units, as subword-nmt requires: it would otherwise print
    two lines of its own and exit the whole program (``sys.exit``)."""
    lines = text.rstrip("\n").split("\n")
    first = 1
    if lines and lines[0].startswith("#version:"):
        version = re.sub(r"(\.0+)*$", "", lines[0].split()[-1]) if lines[0].split()[1:] else ""
        if not all(part.isascii() and part.isdigit() for part in version.split(".")):
            raise InputError(name, 1, f"not a subword-nmt version line: {lines[0][:60]!r}")
        if tuple(int(part) for part in version.split(".")) not in ((0, 1), (0, 2)):  # subword-nmt applies no other
            raise InputError(name, 1, f"BPE codes version {lines[0].split()[-1]} is not supported (subword-nmt applies 0.1 and 0.2)")
        lines, first = lines[1:], 2
    if not lines or lines == [""]:  # no merge at all: say so, not "line 2 is not a merge" of a 1-line file
        raise InputError(name, None, "holds no BPE merges")
    for k, line in enumerate(lines, start=first):
        if len(line.strip("\r\n ").split(" ")) != 2:
            raise InputError(name, k, f"not a BPE merge (two units separated by a space): {line[:60]!r}")


#: SentencePiece's word-boundary mark (U+2581), which starts the first piece of each word.
SP_SPACE = "\u2581"


def read_sp_model(path: str | os.PathLike) -> str:
    """A SentencePiece model file as base64 text (how checkpoints carry it), checked to load."""
    raw = Path(path).read_bytes()
    text = base64.b64encode(raw).decode("ascii")
    load_sp_model(text, str(path))
    return text


def sp_model_checksum(model_b64: str) -> str:
    """SHA-256 of a SentencePiece model's bytes: ``meta.json`` keeps it, as for BPE codes."""
    return hashlib.sha256(base64.b64decode(model_b64)).hexdigest()


def load_sp_model(model_b64: str, name: str):  # noqa: ANN201 - a sentencepiece.SentencePieceProcessor
    """The SentencePiece processor of a base64 model; a damaged one is a one-line error naming ``name``."""
    try:
        import sentencepiece as spm
    except ImportError:
        raise InputError(name, None, "needs the sentencepiece package (pip install sentencepiece)") from None
    try:
        proto = base64.b64decode(model_b64, validate=True)
        sp = spm.SentencePieceProcessor()
        sp.LoadFromSerializedProto(proto)
    except (binascii.Error, ValueError, RuntimeError, OSError) as exc:
        raise InputError(name, None, f"not a SentencePiece model ({str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__})") from None
    return sp


def sp_segment(sp, tokens: list[str]) -> list[str]:  # noqa: ANN001
    """Tokens -> pieces with a SentencePiece model, in subword-nmt's convention: every piece of
    a token but its last ends in ``@@``.  Each token is segmented on its own (SentencePiece never
    joins pieces across a space either), so pieces map back to tokens one for one."""
    out: list[str] = []
    for token, pieces in zip(tokens, sp.encode(list(tokens), out_type=str)):
        if pieces and pieces[0].startswith(SP_SPACE):
            pieces = [pieces[0][len(SP_SPACE):], *pieces[1:]]
        pieces = [piece for piece in pieces if piece] or [token]
        out.extend(piece + BPE_SEP for piece in pieces[:-1])
        out.append(pieces[-1])
    return out


def piece_to_token_index(pieces: list[str]) -> list[int]:
    """For each BPE piece, the index of the token it belongs to."""
    idx, k = [], 0
    for p in pieces:
        idx.append(k)
        if not p.endswith(BPE_SEP):
            k += 1
    return idx


@dataclass
class TextPipeline:
    """Tokenizer + lowercasing + BPE for one language, as recorded in ``meta.json``."""

    lang: str
    tokenizer: str = "none"  # "moses" | "none"
    lowercase: bool = False
    bpe_codes: Optional[str] = None  # path to subword-nmt codes, or None
    bpe_codes_text: Optional[str] = None  # the codes themselves (as embedded in checkpoints)
    sp_model: Optional[str] = None  # path to a SentencePiece model, or None
    sp_model_b64: Optional[str] = None  # the model itself, base64 (as embedded in checkpoints)
    _bpe: object = field(default=None, init=False, repr=False)
    _sp: object = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.tokenizer not in ("moses", "none"):
            raise ValueError(f"unknown tokenizer {self.tokenizer!r}")
        if (self.bpe_codes or self.bpe_codes_text) and (self.sp_model or self.sp_model_b64):
            raise ValueError("a pipeline has subword-nmt codes or a SentencePiece model, not both")

    def __getstate__(self) -> dict:
        """Picklable (for preprocess's worker processes): the SentencePiece processor is rebuilt there."""
        return {**self.__dict__, "_sp": None}

    @property
    def sp(self):  # noqa: ANN201 - a sentencepiece.SentencePieceProcessor, or None
        if self._sp is None and (self.sp_model or self.sp_model_b64):
            if self.sp_model_b64 is None:
                self.sp_model_b64 = read_sp_model(self.sp_model)
            self._sp = load_sp_model(self.sp_model_b64, self.sp_model or f"the {self.lang} SentencePiece model")
        return self._sp

    @cached_property
    def _moses(self):  # noqa: ANN202 - sacremoses objects
        from sacremoses import MosesDetokenizer, MosesTokenizer

        return MosesTokenizer(lang=self.lang), MosesDetokenizer(lang=self.lang)

    @property
    def bpe(self):  # noqa: ANN201
        if self._bpe is None and (self.bpe_codes or self.bpe_codes_text):
            import io

            from subword_nmt.apply_bpe import BPE

            if self.bpe_codes_text is None:
                self.bpe_codes_text = read_bpe_codes(self.bpe_codes)
            else:
                check_bpe_codes(self.bpe_codes_text, f"the {self.lang} BPE codes")
            self._bpe = BPE(io.StringIO(self.bpe_codes_text))
        return self._bpe

    def build(self) -> "TextPipeline":
        """Build the tokenizer and the BPE tables now rather than at the first line (they are
        otherwise built on first use): a command builds them during its start-up
        (:func:`nmtkit.utils.startup.long_lived`).  Returns the pipeline."""
        if self.tokenizer == "moses":
            _moses_alnum()
            self._moses  # noqa: B018 - the cached property builds the Moses objects
        self.bpe  # noqa: B018 - the property builds the BPE tables
        self.sp  # noqa: B018 - and the SentencePiece processor
        return self

    def to_dict(self) -> dict:
        """Self-contained description (BPE codes inlined, and checked) for checkpoints."""
        if self.bpe is not None:
            assert self.bpe_codes_text is not None
        if self.sp is not None:
            assert self.sp_model_b64 is not None
        return self.description()

    def description(self) -> dict:
        """What turns a line into pieces, BPE codes inlined, without building the BPE tables
        (compiled shortlists record a hash of it)."""
        codes = self.bpe_codes_text
        if codes is None and self.bpe_codes:
            codes = read_bpe_codes(self.bpe_codes)
        out = {"lang": self.lang, "tokenizer": self.tokenizer, "lowercase": self.lowercase, "bpe_codes_text": codes}
        sp = self.sp_model_b64
        if sp is None and self.sp_model:
            sp = read_sp_model(self.sp_model)
        if sp is not None:  # only then: descriptions (and their hashes) without one stay as they were
            out["sp_model_b64"] = sp
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "TextPipeline":
        return cls(lang=d["lang"], tokenizer=d["tokenizer"], lowercase=d["lowercase"], bpe_codes_text=d.get("bpe_codes_text"),
                   sp_model_b64=d.get("sp_model_b64"))

    # -- forward ----------------------------------------------------------------------------
    def tokenize(self, line: str) -> list[str]:
        """Line -> tokens (control characters normalized, tokenizer, then lowercasing)."""
        line = normalize_line(line)
        if self.tokenizer == "moses":
            # a word of letters and digits only is its own token: skip Moses's ~40 regex passes (the
            # shortlist tokenizes each table word so); not DOTMULTI, which sacremoses turns into "."
            simple = line and _moses_alnum().issuperset(line) and "DOTMULTI" not in line
            toks = [line] if simple else self._moses[0].tokenize(line, escape=False)
        else:
            toks = split_words(line)
        if self.lowercase:
            toks = [t.lower() for t in toks]
        return toks

    def apply_bpe(self, tokens: list[str]) -> list[str]:
        """Tokens -> pieces (identity without BPE codes or a SentencePiece model)."""
        if self.sp is not None:
            return sp_segment(self.sp, tokens)
        if self.bpe is None:
            return list(tokens)
        return self.bpe.segment_tokens(tokens)

    def encode(self, line: str) -> tuple[list[str], list[str]]:
        """Line -> (tokens, pieces)."""
        toks = self.tokenize(line)
        return toks, self.apply_bpe(toks)

    # -- backward ---------------------------------------------------------------------------
    def detokenize(self, tokens: list[str]) -> str:
        if self.tokenizer == "moses":
            return self._moses[1].detokenize(tokens)
        return " ".join(tokens)

    def decode(self, pieces: list[str]) -> str:
        """Pieces -> text (merge BPE, then detokenize)."""
        return self.detokenize(merge_bpe(pieces))

    @classmethod
    def from_meta(cls, meta: dict, lang: str, data_dir: str | os.PathLike) -> "TextPipeline":
        """Rebuild the pipeline preprocess used for ``lang`` (codes paths are relative to data_dir)."""
        bpe = meta.get("bpe", {})
        codes = bpe.get("codes", {}).get(lang) if bpe.get("type") == "subword-nmt" else None
        model = bpe.get("models", {}).get(lang) if bpe.get("type") == "sentencepiece" else None
        return cls(
            lang=lang,
            tokenizer=meta.get("tokenizer", "none"),
            lowercase=bool(meta.get("lowercase", False)),
            bpe_codes=os.path.join(str(data_dir), codes) if codes else None,
            sp_model=os.path.join(str(data_dir), model) if model else None,
        )
