"""DPR answer matching: the one implementation of ``has_answer`` in dpr_xrisk.

Definition (docs/method.md §6, DPR's ``has_answer`` as pyserini's ``evaluate_dpr_retrieval`` runs it):
text and answers are NFD-normalised and tokenised with DPR's SimpleTokenizer rule -- a token is
a run of letters/digits/combining marks, or any single character that is neither a separator
nor a control character -- and lower-cased; an answer matches when its token sequence occurs
contiguously in the passage's tokens. In regex mode (CuratedTREC) each answer is a pattern,
searched case-insensitively in the NFD-normalised text; an invalid pattern matches nothing.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Sequence

import regex as _regex  # \p{L} classes; a dependency of transformers

_TOKEN = _regex.compile(r"([\p{L}\p{N}\p{M}]+)|([^\p{Z}\p{C}])", flags=_regex.IGNORECASE | _regex.UNICODE | _regex.MULTILINE)


def tokenize(text: str) -> list[str]:
    """DPR SimpleTokenizer words, lower-cased, of NFD-normalised ``text``."""
    return [m.group().lower() for m in _TOKEN.finditer(unicodedata.normalize("NFD", text))]


def token_spans(text: str) -> list[tuple[int, int, str]]:
    """DPR's tokens of ``text`` with where they are: ``(start, end, token)``, where ``text[start:end]``
    is the token as written and ``token`` is it NFD-normalised and lower-cased, as :func:`tokenize`
    gives it. Offsets are into ``text`` itself (not its NFD form): what highlights an answer."""
    return [(m.start(), m.end(), unicodedata.normalize("NFD", m.group()).lower()) for m in _TOKEN.finditer(text)]


@lru_cache(maxsize=32768)
def _tokens(text: str) -> tuple[tuple[str, ...], frozenset[str]]:
    # cached: one passage is matched against the answers of many questions (the training refresh
    # checks ~100 candidates of every mined question); the set rejects an answer whose first
    # word the passage lacks without scanning it, which is most answers. ~7 KB per Wikipedia
    # passage (words + set), so at most ~230 MB; 32,768 covers the recipe's 21.5k refresh corpus
    words = tuple(tokenize(text))
    return words, frozenset(words)


def _regex_match(text: str, pattern: str) -> bool:
    try:
        compiled = re.compile(pattern, flags=re.IGNORECASE | re.UNICODE | re.MULTILINE)
    except re.error:
        return False
    return compiled.search(text) is not None


def has_answer(text: str, answers: Sequence[str], regex: bool = False) -> bool:
    """True when any answer occurs in ``text`` under DPR's matching rule."""
    if regex:
        norm = unicodedata.normalize("NFD", text)
        return any(_regex_match(norm, unicodedata.normalize("NFD", a)) for a in answers)
    words, present = _tokens(text)
    for answer in answers:
        ans = _tokens(answer)[0]
        n = len(ans)
        if n == 0:
            return True  # DPR's loop matches an empty answer at position 0
        if ans[0] not in present:
            continue
        start = 0
        try:
            while True:  # jump between occurrences of the first token, then compare the run
                i = words.index(ans[0], start, len(words) - n + 1)
                if words[i : i + n] == ans:
                    return True
                start = i + 1
        except ValueError:
            continue
    return False
