"""Subword pieces -> the user's whitespace words, through the tokenizer (and Moses escapes).

Why in the data layer: preprocessing maps ``--alignfile`` word links to pieces with it, and
translate/align map attention back to words with it; one mapping keeps the three in step.
"""
from __future__ import annotations

import difflib
import re
from typing import Sequence

from nmtkit.data.text_pipeline import piece_to_token_index, split_words

_MOSES_ESCAPES = {
    "&amp;": "&", "&#124;": "|", "&lt;": "<", "&gt;": ">", "&apos;": "'", "&quot;": '"',
    "&#91;": "[", "&#93;": "]", "&bar;": "|", "&bra;": "[", "&ket;": "]",
}
_ESCAPE_RE = re.compile("|".join(re.escape(k) for k in _MOSES_ESCAPES))
_DASH_SPLIT = re.compile(r"^@(\S+)@$")  # Moses aggressive hyphen splitting writes "@-@"


def unescape_moses(token: str) -> str:
    """Undo one level of Moses XML escaping (``&amp;`` -> ``&``, ``&apos;`` -> ``'``, ...) and ``@-@``."""
    m = _DASH_SPLIT.match(token)
    if m:
        return m.group(1)
    return _ESCAPE_RE.sub(lambda mm: _MOSES_ESCAPES[mm.group(0)], token)


def _fold(text: str) -> str:
    """Lowercase character by character, keeping the length (so indices stay aligned)."""
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


def _same(a: str, b: str) -> bool:
    return a == b or a.lower() == b.lower()


def map_tokens_to_words(original_line: str, tokens: Sequence[str]) -> list[int]:
    """For each tokenizer token, the index of the whitespace word of ``original_line`` it came from.

    Works by aligning characters: each token is matched as written or, failing that, with
    Moses escapes undone (so both escaped and unescaped tokens work); letter case is ignored
    (lowercasing pipelines).  If the tokenizer changed the text in some other way, a
    character-level diff of the whole line aligns what it can; a token with no aligned
    character takes the word of the token before it (or the first word).
    """
    words = split_words(original_line)
    line_chars: list[str] = []
    char_word: list[int] = []
    for w_idx, w in enumerate(words):
        line_chars.extend(w)
        char_word.extend([w_idx] * len(w))
    line = "".join(line_chars)

    out: list[int] = []
    pos = 0
    for tok in tokens:
        for form in dict.fromkeys((tok, unescape_moses(tok))):
            form = "".join(form.split())
            seg = line[pos : pos + len(form)]
            if form and len(seg) == len(form) and all(_same(x, y) for x, y in zip(seg, form)):
                out.append(char_word[pos])
                pos += len(form)
                break
        else:
            return _map_by_diff(words, line, char_word, tokens)
    return out


def _map_by_diff(words: list[str], line: str, char_word: list[int], tokens: Sequence[str]) -> list[int]:
    forms = ["".join(unescape_moses(t).split()) for t in tokens]
    tok_text = "".join(forms)
    char_tok: list[int] = []
    for t_idx, f in enumerate(forms):
        char_tok.extend([t_idx] * len(f))
    matcher = difflib.SequenceMatcher(None, _fold(line), _fold(tok_text), autojunk=False)
    first: dict[int, int] = {}
    for blk in matcher.get_matching_blocks():
        for k in range(blk.size):
            first.setdefault(char_tok[blk.b + k], char_word[blk.a + k])
    out: list[int] = []
    for t_idx in range(len(tokens)):
        out.append(first.get(t_idx, out[-1] if out else 0))
    return out


def piece_word_index(line: str, tokens: Sequence[str], pieces: Sequence[str], identity_tokens: bool = False) -> list[int]:
    """For each BPE piece of ``line``, the index of the whitespace word of ``line`` it came from.

    ``tokens`` are the tokenizer's output for ``line`` and ``pieces`` their BPE segmentation;
    ``identity_tokens``: the tokens are the whitespace words themselves (no tokenizer), so no
    character alignment is needed.  The one way translate and align map pieces to words.
    """
    token_word = list(range(len(tokens))) if identity_tokens else map_tokens_to_words(line, tokens)
    return [token_word[t] for t in piece_to_token_index(list(pieces))]
