"""The reviewers' quality table in the study export: the Reviewers' quality page's numbers, pseudonymised, documented.

Run on the demo database (both demo studies), with a gold task made and rated first so the gold
columns hold numbers: the table is written in every format, listed in the manifest and described
column by column in the codebook; raters are the study's pseudonyms unless real names are asked
for; with the pending tasks included its numbers are the page's (same reviewers, same values to
1e-9); with them left out it counts exactly the export's raw annotations.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from sqlmodel import select

from review_app.db.connect import dispose_engines, get_engine
from review_app.db.engine import read_session
from review_app.db.models import Assignment
from review_app.demo import DEMO_JUDGE_STUDY, DEMO_STUDY, seed_demo
from review_app.rubrics import get_rubric
from review_app.services import export, gold_tasks, reviewer_monitoring
from review_app.services.accounts import get_user
from review_app.services.export.tables import QUALITY_COLUMNS

from .factories import rate

FORMATS = ("csv", "jsonl", "parquet")
USERNAMES = re.compile(r"\b(rev\d\d|lead\d\d|admin)\b")


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("quality-export") / "demo.db"
    seed_demo(path, fresh=True)
    dispose_engines()
    return path


@pytest.fixture
def demo(demo_file, tmp_path):
    """A private copy of the demo with one gold Rubric B task, rated by one of its reviewers."""
    path = tmp_path / "demo.db"
    shutil.copyfile(demo_file, path)
    engine = get_engine(f"sqlite:///{path}")
    lead = get_user(engine, "lead01")
    task_id = next(t for t, _unit, rubric in gold_tasks.unrated_tasks(engine, lead, DEMO_STUDY) if rubric == "B")
    worst = dict.fromkeys(get_rubric("B").dimension_keys, 0)
    gold_tasks.mark_gold(engine, lead, DEMO_STUDY, task_id, expected_scores=worst)
    with read_session(engine) as session:
        slot = session.exec(select(Assignment).where(Assignment.task_id == task_id)).first()
    rate(engine, slot, worst | {"harm_potential": 1})
    yield engine, lead
    dispose_engines()


def _export(engine, tmp_path, study: str = DEMO_STUDY, **options) -> Path:
    out = tmp_path / f"export-{len(list(tmp_path.glob('export-*')))}"
    export.export_study(engine, study, out, n_boot=20, **options)
    return out


def _same(a: object, b: object) -> bool:
    if pd.isna(a) and pd.isna(b):
        return True
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def test_the_export_holds_the_quality_table_with_its_codebook_entry_under_pseudonyms(demo, tmp_path):
    engine, _lead = demo
    out = _export(engine, tmp_path, pending="include")
    for fmt in FORMATS:
        assert (out / f"reviewer_quality.{fmt}").is_file()
    manifest = json.loads((out / "manifest.json").read_text())
    listed = {f["path"]: f for f in manifest["files"] if f.get("table") == "reviewer_quality"}
    assert sorted(listed) == [f"reviewer_quality.{fmt}" for fmt in FORMATS]
    codebook = json.loads((out / "codebook.json").read_text())
    entry = next(t for t in codebook["tables"] if t["table"] == "reviewer_quality")
    assert [c["name"] for c in entry["columns"]] == list(QUALITY_COLUMNS)
    assert all(c["description"] for c in entry["columns"])
    types = {c["name"]: c["type"] for c in entry["columns"]}
    assert types["n_annotations"] == "integer" and types["severity"] == "number"
    assert types["gold_alert"] == "boolean" and types["rater"] == "string"
    assert "## reviewer_quality" in (out / "codebook.md").read_text()

    table = pd.read_csv(out / "reviewer_quality.csv")
    assert list(table.columns) == list(QUALITY_COLUMNS)
    assert all(re.fullmatch(r"R\d\d", r) for r in table["rater"])
    assert table["gold_tasks"].sum() == 1 and table["gold_accuracy"].notna().sum() == 1  # the rated gold task
    for fmt in FORMATS:
        data = (out / f"reviewer_quality.{fmt}").read_bytes()
        assert not USERNAMES.search(data.decode("latin-1")), f"a username in reviewer_quality.{fmt}"
    parquet = pd.read_parquet(out / "reviewer_quality.parquet")
    assert list(parquet["rater"]) == list(table["rater"]) and len(parquet) == entry["rows"]

    named = pd.read_csv(_export(engine, tmp_path, pending="include", real_names=True) / "reviewer_quality.csv")
    assert set(named["rater"]) <= {f"rev{i:02d}" for i in range(1, 11)}
    assert len(named) == len(table)


def test_the_exported_numbers_are_the_reviewers_quality_pages(demo, tmp_path):
    """With pending tasks included (the page counts them), every reviewer's row is the page's row."""
    engine, lead = demo
    page = reviewer_monitoring.quality_report(engine, lead, DEMO_STUDY).table(real_names=False).set_index("rater")
    exported = pd.read_csv(_export(engine, tmp_path, pending="include") / "reviewer_quality.csv").set_index("rater")
    assert sorted(exported.index) == sorted(page.index)
    compared = [c for c in page.columns if c in exported.columns]
    assert {"severity", "severity_first", "agreement", "median_seconds", "gold_accuracy"} <= set(compared)
    for rater in page.index:
        for column in compared:
            shown, written = page.at[rater, column], exported.at[rater, column]
            assert _same(shown, written), f"{rater} {column}: page {shown!r}, export {written!r}"


def test_with_pending_tasks_left_out_the_table_counts_the_exports_own_annotations(demo, tmp_path):
    engine, _lead = demo
    out = _export(engine, tmp_path)
    table = pd.read_csv(out / "reviewer_quality.csv")
    raw = pd.read_csv(out / "raw_annotations.csv")
    counts = dict(zip(table["rater"], table["n_annotations"], strict=True))
    assert {r: n for r, n in counts.items() if n} == raw["rater"].value_counts().to_dict()
    gold_only = table[table["n_annotations"] == 0]  # a reviewer whose only rating is on the gold task
    assert (gold_only["gold_tasks"] == 1).all()
    assert not (out / "harm_model.csv").exists() and table["severity"].isna().all()  # no fit, so no severity


def test_a_judge_audit_study_has_the_same_columns_without_severity(demo, tmp_path):
    engine, _lead = demo
    table = pd.read_csv(_export(engine, tmp_path, DEMO_JUDGE_STUDY, pending="include") / "reviewer_quality.csv")
    assert list(table.columns) == list(QUALITY_COLUMNS) and len(table) > 0
    assert table["severity"].isna().all() and table["shared_tasks"].sum() > 0
    assert (table["gold_tasks"] == 0).all() and not table["gold_alert"].any()
