"""The page-budget token approximation."""

from __future__ import annotations

import pytest

from bench_core.mitigation.search.tokens import count_tokens, truncate_tokens


def test_counting_rule():
    assert count_tokens("the") == 1
    assert count_tokens("hypertension") == 3  # ceil(12 / 4)
    assert count_tokens("e.g. ACE_inhibitor") == 1 + 1 + 1 + 1 + 1 + 1 + 3  # e . g . ACE _ inhibitor
    assert count_tokens("高血压") == 3
    assert count_tokens("  \n\t ") == 0


def test_truncation_keeps_whole_tokens():
    assert truncate_tokens("one two three four five", 3) == ("one two", 6, True)
    assert truncate_tokens("one two", 10) == ("one two", 2, False)
    text, total, cut = truncate_tokens("高血压的一线药物", 4)
    assert (text, total, cut) == ("高血压的", 8, True)
    with pytest.raises(ValueError):
        truncate_tokens("x", 0)
