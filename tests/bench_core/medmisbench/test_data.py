import json

import pytest

from bench_core.kernel.errors import DatasetError
from bench_core.medmisbench.data import load_medmisbench, split_embedded_options
from bench_core.medmisbench.targets import draw_type1_target


def test_sample_loads_every_row(sample_dir):
    report = load_medmisbench(sample_dir, strict=True)
    assert report.issues == []
    by_id = {item.id: item for item in report.items}
    assert len(by_id) == 7
    journey = by_id["mj-0001"]
    assert journey.subset == "MEDMISJOURNEY" and journey.language == "zh"
    assert list(journey.options) == ["1", "2", "3", "4"] and journey.gold == "2"
    hle = by_id["mh-0001"]
    assert list(hle.options) == ["A", "B", "C", "D"] and hle.options["B"] == "Glucocerebrosidase"
    assert hle.question.endswith("cells?")
    assert hle.injection.provenance == "authority" and hle.injection.content_type == "cue_remapping"
    assert by_id["mm-0002"].injection.content_type == "threshold_corruption"


def test_embedded_options_ignore_out_of_order_labels():
    stem, options = split_embedded_options("Pick one (A) x (C) not a label (B) y (C) z")
    assert stem == "Pick one"
    assert options == {"A": "x (C) not a label", "B": "y", "C": "z"}


def _write(tmp_path, rows, name="MEDMISQA.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


GOOD = {
    "id": "x1",
    "question": "Q?",
    "answer": "A",
    "opa": "a",
    "opb": "b",
    "injecta": "true a",
    "injectb": "false b",
    "injection_content": "Cue Remapping",
    "injection_provenance": "Neutral",
}


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        ('{"id": "x2", "question": ', None, "malformed JSON"),
        ({**GOOD, "id": "x2", "answer": "C"}, "answer", "not among the options"),
        ({**GOOD, "id": "x2", "answer": "5"}, "answer", "gold answer '5' is not among the options (1, 2)"),
        ({**GOOD, "id": "x2", "injectc": "false c"}, "injectc", "sentence(s) for option(s) that do not exist: C"),
        ({**GOOD, "id": "x2", "opb": ""}, "opa", "item 'x2' has 1 option(s); at least 2 are needed"),
        ({**GOOD, "id": "x2", "question": ["Q?", "more"]}, "question", "expected text, found a list"),
        ({**GOOD, "id": "x2", "injection_content": "[b]Cue Remapping[/b]"}, "injection_content", "carries markup"),
        ({**GOOD, "id": "x2", "injection_content": "Cue Remapping[/]"}, "injection_content", "carries markup"),
        ({**GOOD, "id": "x2", "injection_provenance": "<i>Neutral</i>"}, "injection_provenance", "carries markup"),
        ({**GOOD, "id": "x2", "answer": "[bold]A[/bold]"}, "answer", "carries markup ([bold])"),
        ({**GOOD, "id": "x2", "notes": {"a": 1}}, "notes", "expected text, found an object"),
        ({**GOOD, "id": "x2", "injection_content": "Dose Inflation"}, "injection_content", "unknown content type"),
        ({**GOOD, "id": "x2", "injection_provenance": "Blog"}, "injection_provenance", "unknown provenance"),
        ({**GOOD}, "id", "duplicate item id"),
        ({k: v for k, v in GOOD.items() if k != "question"} | {"id": "x2"}, "question", "no question"),
    ],
)
def test_bad_rows_are_named_with_file_line_and_field(tmp_path, row, field, message):
    path = _write(tmp_path, [GOOD, row])
    report = load_medmisbench(path)
    assert [i.id for i in report.items] == ["x1"]
    (issue,) = report.issues
    assert issue.line == 2 and issue.field == field and message in issue.message
    with pytest.raises(DatasetError, match=r"MEDMISQA.jsonl:2"):
        load_medmisbench(path, strict=True)


def test_csv_and_parquet_with_subset_column(tmp_path):
    import pandas as pd

    frame = pd.DataFrame([{**GOOD, "subset": "MedMisMCQA"}, {**GOOD, "id": "x2", "subset": "MEDMISHLE", "answer": "2"}])
    frame.to_csv(tmp_path / "all.csv", index=False)
    frame.to_parquet(tmp_path / "all.parquet")
    for name in ("all.csv", "all.parquet"):
        report = load_medmisbench(tmp_path / name, strict=True)
        assert [(i.subset, i.gold) for i in report.items] == [("MEDMISMCQA", "A"), ("MEDMISHLE", "2")]


def test_type1_target_is_seeded_and_order_independent(sample_dir):
    items = load_medmisbench(sample_dir).items
    first = {i.id: draw_type1_target(i, seed=7) for i in items}
    again = {i.id: draw_type1_target(i, seed=7) for i in reversed(items)}
    assert first == again
    assert all(first[i.id] != i.gold for i in items)
    assert {i.id: draw_type1_target(i, seed=8) for i in items} != first


def test_unusable_bundle_has_no_target(tmp_path):
    row = {**GOOD, "opc": "c"}  # option C has no misleading sentence
    item = load_medmisbench(_write(tmp_path, [row])).items[0]
    assert "C" in item.usable_bundle_problem()
    assert draw_type1_target(item) is None
