"""ISO 8601 dates or refusals naming the place; the lines of JSON array elements and object members."""

from __future__ import annotations

import json

import pytest

from bench_core.kernel.dates import check_iso_date, is_iso_date
from bench_core.kernel.errors import InputError
from bench_core.kernel.json_lines import element_lines, member_lines


@pytest.mark.parametrize(
    "text",
    ["2026-03-01", "2024-02-29", "2026-03-01T09:30", "2026-03-01T09:30:00Z", "2026-03-01 09:30:00.123456-05:00"],
)
def test_iso_dates_and_datetimes_are_dates(text):
    assert is_iso_date(text)
    assert check_iso_date(f" {text} ") == text


@pytest.mark.parametrize(
    "text", ["last tuesday", "2026-02-30", "2025-02-29", "01/03/2026", "2026-3-1", "20260301", "2026-03-01T9:30", ""]
)
def test_anything_else_is_refused_naming_file_line_and_field(text):
    assert not is_iso_date(text)
    with pytest.raises(InputError) as caught:
        check_iso_date(text, path="step1.json", line=3, field="generated_at")
    assert str(caught.value).startswith("step1.json:3: field 'generated_at': expected an ISO 8601 date")
    assert repr(text) in str(caught.value)


def test_a_value_that_is_not_text_is_refused():
    with pytest.raises(InputError, match=r"--retrieved-at: expected an ISO 8601 date .*found 20260301"):
        check_iso_date(20260301, field="--retrieved-at")


def test_element_and_member_lines_follow_the_document():
    records = [{"id": "a", "note": "x\ny"}, {"id": "b"}, 3]
    text = json.dumps({"generated_at": "2026-03-01", "records": records}, indent=2)
    lines = text.split("\n")
    assert member_lines(text) == {"generated_at": 2, "records": 3}
    found = element_lines(text, "records")
    assert [lines[n - 1].strip() for n in found] == ["{", "{", "3"]
    assert element_lines(json.dumps(records, indent=1)) == [2, 6, 9]
    assert element_lines("[]") == [] and element_lines("{}", "records") == [] and member_lines("[1]") == {}
    assert element_lines('[{"a": "[1, 2]"},\n {"b": "}"}]') == [1, 2]  # brackets inside strings are text
