"""Ingesting retracted-paper benchmark files: validation, provenance, refusals, fallback normalisation."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.kernel.errors import DatasetError
from bench_core.trojan.data import load_retracted, normalize_records, normalized_dataset, parse_isimpact

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "trojan" / "standardized_analysis_sample.json"


def _record(index: int, **changes) -> dict:
    row = {
        "id": f"r-{index}",
        "title": f"Title {index}",
        "isimpact": "yes",
        "conclusion": f"Conclusion {index}",
        "problem": f"Statement {index}",
        "note": f"Retracted in 20{10 + index}",
    }
    row.update(changes)
    return {k: v for k, v in row.items() if v is not ...}


def test_sample_file_loads_with_provenance():
    dataset = load_retracted(
        SAMPLE, source_url="https://www.kaggle.com/datasets/x", retrieved_at="2026-04-18T15:52:56Z"
    )
    assert [r.id for r in dataset.records] == [f"trojan-00{k}" for k in range(1, 6)]
    assert [r.isimpact for r in dataset.records] == [True, True, True, True, False]
    p = dataset.provenance
    assert p.sha256 == hashlib.sha256(SAMPLE.read_bytes()).hexdigest()
    assert (p.item_count, p.source_url, p.retrieved_at, p.retrieved_at_source) == (
        5,
        "https://www.kaggle.com/datasets/x",
        "2026-04-18T15:52:56Z",
        "given",
    )
    assert p.file_format == "array"
    assert load_retracted(SAMPLE).provenance.retrieved_at_source == "file_mtime"
    written = dataset.to_json()
    assert written["file_checksum"] == p.sha256 and written["item_count"] == 5
    assert written["records"][4]["isimpact"] == "no"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("yes", True),
        ("No", False),
        (True, True),
        (False, False),
        (1, True),
        (0, False),
        ("1", True),
        ("maybe", None),
        (2, None),
    ],
)
def test_isimpact_spellings(value, expected):
    assert parse_isimpact(value) == expected


def test_refused_file_names_missing_fields_per_record(tmp_path):
    rows = [
        _record(0),
        _record(1, problem=..., note=""),
        _record(2, isimpact="sometimes"),
        _record(3, title=42.5),
        "not an object",
        _record(0),
    ]
    path = tmp_path / "standardized_analysis_ccversion.json"
    path.write_text("[\n" + ",\n".join(json.dumps(row) for row in rows) + "\n]\n")  # record i on line i + 2
    with pytest.raises(DatasetError) as caught:
        load_retracted(path, expected_count=100)
    text = str(caught.value)
    assert f"{path}:3: field 'problem': records[1] (id 'r-1'): missing required field(s): problem, note" in text
    assert (
        f"{path}:4: field 'isimpact': records[2] (id 'r-2'): invalid: isimpact (expected yes/no, true/false or 0/1, "
        "got 'sometimes')"
    ) in text
    assert f"{path}:5: field 'title': records[3] (id 'r-3'): invalid: title (expected non-empty text, got float)" in (
        text
    )
    assert f"{path}:6: records[4]: not a JSON object" in text
    assert f"{path}:7: field 'id': records[5] (id 'r-0'): duplicate id (also records[0], line 2)" in text
    assert "6 records, expected 100" in text
    assert text.startswith("6 problems found, nothing was loaded")


def test_wrapped_skill_output_and_bad_json(tmp_path):
    wrapped = {
        "generated_at": "2026-04-01T10:00:00Z",
        "dataset_url": "https://kaggle.example/trojan",
        "selected_file": "standardized_analysis_ccversion.json",
        "records": [_record(1, isimpact=True), _record(2, isimpact=0)],
    }
    path = tmp_path / "step1.json"
    path.write_text(json.dumps(wrapped))
    dataset = load_retracted(path)
    assert [r.isimpact for r in dataset.records] == [True, False]
    p = dataset.provenance
    assert (p.source_url, p.retrieved_at, p.retrieved_at_source, p.file_format) == (
        "https://kaggle.example/trojan",
        "2026-04-01T10:00:00Z",
        "declared",
        "wrapped",
    )
    broken = tmp_path / "broken.json"
    broken.write_text('[{"id": 1,')
    with pytest.raises(DatasetError, match="not valid JSON"):
        load_retracted(broken)


def test_fallback_normaliser_maps_retraction_watch_rows(tmp_path):
    rows = [
        {
            "Record ID": "45012",
            "Title": "Hydroxychloroquine or chloroquine with or without a macrolide for COVID-19",
            "Journal": "The Lancet",
            "RetractionDate": "6/5/2020",
            "RetractionNature": "Retraction",
            "Reason": "+Concerns/Issues About Data;+Concerns/Issues about Third Party Involvement;",
            "RetractionDOI": "10.1016/S0140-6736(20)31324-6",
            "conclusion": "Hydroxychloroquine was associated with higher in-hospital mortality.",
            "statement": "Hydroxychloroquine raises in-hospital mortality in COVID-19.",
        },
        {"Record ID": "1", "Title": "No statement here", "Reason": "Fabrication", "conclusion": "X works."},
    ]
    records, issues = normalize_records(rows, source="retraction-watch", default_isimpact=True)
    (record,) = records
    assert record.id == "45012" and record.isimpact is True
    assert record.problem == "Hydroxychloroquine raises in-hospital mortality in COVID-19."
    assert record.note.startswith("Nature: Retraction; Date: 6/5/2020; Journal: The Lancet; Reasons: +Concerns")
    assert record.note.endswith("Source: retraction-watch.")
    (issue,) = issues
    assert "records[1] (id '1'): cannot fill problem" in str(issue)
    allowed, none = normalize_records(rows[1:], source="rw", default_isimpact=False, problem_from_conclusion=True)
    assert not none and allowed[0].problem == "X works."

    path = tmp_path / "retraction_watch.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerow(rows[0])
    dataset = normalized_dataset(
        path, source="retraction-watch", default_isimpact=True, source_url="https://rw.example"
    )
    assert dataset.provenance.file_format == "normalized:retraction-watch" and dataset.provenance.item_count == 1


def test_ingest_command_writes_records_with_provenance(tmp_path):
    out = tmp_path / "records.json"
    args = ["ingest", "trojan", "--data", str(SAMPLE), "--out", str(out), "--source-url", "https://k.example/x.json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    assert written["dataset_url"] == "https://k.example/x.json" and written["item_count"] == 5
    assert written["file_checksum"] == hashlib.sha256(SAMPLE.read_bytes()).hexdigest()
    assert load_retracted(out).records == load_retracted(SAMPLE).records  # the output is itself a valid input
    refused = CliRunner().invoke(
        app, ["ingest", "trojan", "--data", str(SAMPLE), "--out", str(tmp_path / "n.json"), "--expect-count", "100"]
    )
    assert refused.exit_code == 2 and "5 records, expected 100" in " ".join(refused.output.split())
    assert not (tmp_path / "n.json").exists()


def _ingest_retrieved_at(tmp_path, when):
    """``ingest trojan`` of one record with ``--retrieved-at when``: (the records file it names, the result)."""
    data = tmp_path / "t.json"
    data.write_text(json.dumps([_record(1)]))
    out = tmp_path / "records.json"
    args = ["ingest", "trojan", "--data", str(data), "--out", str(out), "--retrieved-at", when]
    return out, CliRunner().invoke(app, args)


@pytest.mark.parametrize("when", ["last tuesday", "2026-02-30", "03/01/2026", "2026-3-1", "2026-03-01T25:00", ""])
def test_a_retrieval_date_that_is_not_iso_8601_is_refused_and_nothing_is_written(tmp_path, when):
    out, result = _ingest_retrieved_at(tmp_path, when)
    assert result.exit_code == 2
    assert "--retrieved-at: expected an ISO 8601 date (YYYY-MM-DD) or date and time" in result.stderr
    assert repr(when) in result.stderr and "Traceback" not in result.output
    assert not out.exists()


def test_a_declared_generated_at_that_is_not_a_date_is_refused_naming_file_line_and_field(tmp_path):
    wrapped = {"dataset_url": "https://kaggle.example/trojan", "generated_at": "last tuesday", "records": [_record(1)]}
    path = tmp_path / "step1.json"
    path.write_text(json.dumps(wrapped, indent=2))  # "generated_at" on line 3
    out = tmp_path / "records.json"
    result = CliRunner().invoke(app, ["ingest", "trojan", "--data", str(path), "--out", str(out)])
    assert result.exit_code == 2
    assert f"{path}:3: field 'generated_at': expected an ISO 8601 date" in " ".join(result.stderr.split())
    assert not out.exists()
    # a date given on the command line does not excuse a file that declares a wrong one
    with pytest.raises(ValueError, match="generated_at"):
        load_retracted(path, retrieved_at="2026-04-01")


@pytest.mark.parametrize(
    "when", ["2026-03-01", "2026-03-01T09:30:00Z", "2026-03-01T09:30", "2026-03-01 09:30:15.5+01:00"]
)
def test_iso_dates_and_datetimes_are_written_as_given(tmp_path, when):
    out, result = _ingest_retrieved_at(tmp_path, when)
    assert result.exit_code == 0, result.output
    provenance = json.loads(out.read_text())["provenance"]
    assert (provenance["retrieved_at"], provenance["retrieved_at_source"]) == (when, "given")


def test_the_fallback_ingest_refuses_a_retrieval_date_that_is_not_a_date(tmp_path):
    data = tmp_path / "rw.csv"
    data.write_text("Title,Reason\nA paper,Fabrication\n")
    with pytest.raises(ValueError, match="--retrieved-at: expected an ISO 8601 date"):
        normalized_dataset(data, source="retraction-watch", retrieved_at="yesterday", problem_from_conclusion=True)


def test_a_result_for_a_record_not_in_records_json_names_the_results_line_and_field(tmp_path):
    from bench_core.kernel.store import ResultStore
    from bench_core.trojan.run_files import BENCHMARK, STAGE_A, RunDirError, write_records
    from bench_core.trojan.traces import read_run_data

    data = tmp_path / "t.json"
    data.write_text(json.dumps([_record(1)]))
    run = tmp_path / "run"
    write_records(run, load_retracted(data))
    store = ResultStore(run)
    for item in ("r-1", "ghost"):
        key = {"benchmark": BENCHMARK, "item": item, "condition": STAGE_A, "model": "m", "endpoint": "e", "config": "c"}
        store.append({"key": key, "status": "ok", "response": {"text": "an answer"}, "meta": {}})
    store.close()
    with pytest.raises(RunDirError) as caught:
        read_run_data(run)
    assert str(caught.value).startswith(
        f"{run / 'results.jsonl'}:2: field 'key.item': result for record 'ghost' which is not in records.json"
    )
