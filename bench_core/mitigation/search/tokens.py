"""A tokenizer approximation for page budgets (no vocabulary files, so it works offline).

Counting rule: each CJK/kana/Hangul character is one token; each run of letters and digits is
``ceil(len / 4)`` tokens (BPE vocabularies such as cl100k average about four characters per
English token: "the" -> 1, "hypertension" -> 3); each other non-space character is one token;
whitespace is free. It is an approximation used only to cap how much of a page the model reads
(``--max-page-tokens``); the cap is recorded with every result, so runs stay comparable even
though the count is not any particular model's.
"""

from __future__ import annotations

import math
import re

_TOKEN = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"  # one per CJK character
    r"|[^\W_\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]+"  # letter/digit runs
    r"|[^\s]"  # any other visible character
)
_CHARS_PER_TOKEN = 4


def _cost(piece: str) -> int:
    return math.ceil(len(piece) / _CHARS_PER_TOKEN) if len(piece) > 1 and piece[0].isalnum() else 1


def count_tokens(text: str) -> int:
    """Approximate token count of ``text`` (see the module docstring)."""
    return sum(_cost(m.group()) for m in _TOKEN.finditer(text))


def truncate_tokens(text: str, max_tokens: int) -> tuple[str, int, bool]:
    """``text`` cut after ``max_tokens`` approximate tokens: (kept text, total tokens, whether cut).

    The cut falls at the end of the last whole token that fits, so words are never split.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    end = 0
    total = 0
    for match in _TOKEN.finditer(text):
        total += _cost(match.group())
        if total <= max_tokens:
            end = match.end()
    return (text, total, False) if total <= max_tokens else (text[:end], total, True)
