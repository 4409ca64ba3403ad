"""The demo study's exports are the same, file for file, on every supported stack.

The fixture in ``tests/data/demo_export/`` was written by ``demo_export_snapshot.py`` (see its
docstring for what is normalised and how numbers are compared); any other difference is a changed
label, type, layout or number in what a study lead publishes.
"""

from __future__ import annotations

import pytest

from tests.review_app.demo_export_snapshot import compare, demo_exports, differences

pytestmark = pytest.mark.slow


def test_the_demo_exports_match_the_committed_snapshot(tmp_path) -> None:
    problems, largest, _not_identical = compare(demo_exports(tmp_path))
    assert not problems, "\n".join(problems[:20])
    assert largest < 1e-9


@pytest.mark.parametrize(
    ("expected", "produced", "problem"),
    [
        ("a,0.25,3\n", "a,0.25,3\n", None),
        ("a,0.123456789012345\n", "a,0.123456789012399\n", None),
        ("a,0.1234567\n", "a,0.1234568\n", "number 0.1234567 is now 0.1234568"),
        ("task,17\n", "task,18\n", "whole number 17 is now 18"),
        ('"rubric": "A"\n', '"rubric": "B"\n', "the text differs beyond numbers"),
        ("x: string\n", "x: large_string\n", "the text differs beyond numbers"),
    ],
)
def test_the_comparison_lets_only_last_digit_noise_through(expected, produced, problem) -> None:
    found, _largest = differences(expected, produced)
    assert found == problem if problem is None else found.startswith(problem)
