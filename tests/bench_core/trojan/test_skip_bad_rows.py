"""Trojan benchmark files are refused whole by default; ``skip_bad_rows`` keeps the valid records and names
each faulty one (strict by default)."""

from __future__ import annotations

import json

import pytest

from bench_core.kernel.errors import DatasetError
from bench_core.trojan.data import load_retracted

GOOD = {"id": "t1", "title": "A paper", "isimpact": "yes", "conclusion": "C", "problem": "P", "note": "N"}


def test_a_faulty_record_refuses_the_file_unless_skipped(tmp_path):
    path = tmp_path / "records.json"
    path.write_text(json.dumps([GOOD, {**GOOD, "id": "t2", "title": ""}, {**GOOD, "id": "t3"}]), encoding="utf-8")
    with pytest.raises(DatasetError, match=r"records\[1\].*title"):
        load_retracted(path)
    dataset = load_retracted(path, skip_bad_rows=True)
    assert [record.id for record in dataset.records] == ["t1", "t3"]
    assert len(dataset.issues) == 1 and "records[1]" in str(dataset.issues[0])


def test_skipping_never_accepts_a_file_without_a_valid_record_or_with_the_wrong_count(tmp_path):
    path = tmp_path / "records.json"
    path.write_text(json.dumps([{**GOOD, "title": ""}]), encoding="utf-8")
    with pytest.raises(DatasetError, match="no valid record"):
        load_retracted(path, skip_bad_rows=True)
    path.write_text(json.dumps([GOOD, {**GOOD, "id": "t2", "note": None}]), encoding="utf-8")
    with pytest.raises(DatasetError, match="2 records, expected 3"):
        load_retracted(path, skip_bad_rows=True, expected_count=3)
