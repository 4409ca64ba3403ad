"""The Analysis and Agreement pages read like a paper's tables, under AppTest.

Every table carries human column labels, a caption sentence saying how it was computed, and CSV and
LaTeX downloads that are the export's own files; a judge-audit study's Analysis page shows its own
tables, and its confidence chart has a bar for every level of the scale (2 included).
"""

from __future__ import annotations

import io
import json
import re

import pandas as pd
from streamlit.testing.v1 import AppTest

from review_app.demo import DEMO_JUDGE_STUDY, DEMO_STUDY
from review_app.services.export import analysis_tables as export_tables
from review_app.services.judge_audit import judge_audit_summary
from review_app.services.study_analysis import study_analysis

from .conftest import sign_in

SNAKE = re.compile(r"^[a-z0-9]+(_[a-z0-9]+)+$")


def _lead_page(page: str, study: str) -> AppTest:
    at = sign_in("lead01")
    at.session_state["lead_study"] = study
    at.switch_page(f"views/{page}.py").run()
    assert not at.exception, at.exception
    return at


def _charts(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def _downloads(at: AppTest) -> list[str]:
    return [button.proto.id.rpartition(":")[2] for button in at.get("download_button")]


def _assert_paper_tables(at: AppTest, min_tables: int) -> None:
    """Human labels, a caption per table, a CSV per table; every figure has axis titles."""
    frames = [d.value for d in at.dataframe]
    assert len(frames) >= min_tables
    for frame in frames:
        machine = [c for c in frame.columns if SNAKE.match(str(c))]
        assert not machine, f"column keys shown instead of labels: {machine}"
    captions = [c.value for c in at.caption]
    assert len([c for c in captions if len(c) > 60]) >= len(frames)  # one explaining sentence per table
    downloads = [b.proto.label for b in at.get("download_button")]
    assert downloads.count("CSV") == len(frames) and downloads.count("LaTeX") >= 1
    for spec in _charts(at):
        layout = spec["layout"]
        for axis in ("xaxis", "yaxis"):
            assert layout.get(axis, {}).get("title", {}).get("text"), f"{layout['title']['text']}: no {axis} title"


def test_analysis_page_tables_have_labels_captions_formatted_numbers_and_downloads(demo_db):
    at = _lead_page("lead_analysis", DEMO_STUDY)
    at.toggle(key=f"analysis_pending:{DEMO_STUDY}").set_value(True).run()  # all tasks: the demo's harm model
    _assert_paper_tables(at, min_tables=4)
    cells = "\n".join(d.value.astype(str).to_csv() for d in at.dataframe)
    assert re.search(r"\d+\.\d% \[\d+\.\d, \d+\.\d\] \(\d+/\d+\)", cells)  # rate %, CI in brackets, k/N
    harm = next(d.value for d in at.dataframe if "Odds ratio" in d.value.columns)
    assert set(harm.columns) >= {"Factor", "Level", "Reference", "Odds ratio", "95% CI", "p"}
    assert all(re.fullmatch(r"< 0\.001|> 0\.99|0\.\d{2,4}", p) for p in harm["p"])  # as journals print p
    assert all(ci.startswith("[") and ci.endswith("]") for ci in harm["95% CI"])
    captions = " ".join(c.value.replace("\\", "") for c in at.caption)
    assert "Wilson 95% CI" in captions and "bootstrap" in captions and "ties toward" in captions
    assert "left out for a missing factor" in captions and "the fit converged" in captions
    stems = {d.removeprefix("demo_medmisbench_clinician_review_") for d in _downloads(at)}
    assert {"rubric_a_summary", "rubric_b_outcomes", "rubric_b_strata", "harm_model"} <= stems


def test_the_downloaded_csv_and_latex_are_the_export_tables(demo_db):
    at = _lead_page("lead_analysis", DEMO_STUDY)
    at.toggle(key=f"analysis_pending:{DEMO_STUDY}").set_value(True).run()  # all tasks: the demo's harm model
    csv = next(
        b for b in at.get("download_button") if b.proto.id.endswith("csv:demo_medmisbench_clinician_review_harm_model")
    )
    analysis = study_analysis(demo_db, DEMO_STUDY)
    expected = export_tables.harm_model_table(analysis)[0].frame
    # the button serves its bytes from the media store; the page's table object is what it wrote
    from review_app.services.export.paper import harm_model_tables

    table = harm_model_tables(analysis)[0]
    written = pd.read_csv(io.BytesIO(table.csv_bytes()))
    assert list(written.columns) == list(expected.columns) and len(written) == len(expected)
    assert written["odds_ratio"].round(9).tolist() == expected["odds_ratio"].astype(float).round(9).tolist()
    assert "\\begin{tabular}" in table.latex and "Adjusted odds ratios" in table.latex
    assert csv.proto.label == "CSV"


def test_agreement_page_tables_read_like_a_paper(demo_db):
    at = _lead_page("lead_agreement", DEMO_STUDY)
    _assert_paper_tables(at, min_tables=2)
    first = at.dataframe[0].value
    assert list(first.columns) == [
        "Dimension",
        "Coefficient",
        "Estimate",
        "95% CI",
        "Krippendorff's α (ordinal)",
        "Exact agreement",
        "Tasks (N)",
        "Set aside",
        "Ratings",
    ]
    assert all(v.endswith("%") for v in first["Exact agreement"] if v != "—")
    captions = " ".join(c.value.replace("\\", "") for c in at.caption)
    assert "AC2 with ordinal weights" in captions and "set aside" in captions


def test_judge_audit_analysis_page_shows_its_own_tables(demo_db):
    at = _lead_page("lead_analysis", DEMO_JUDGE_STUDY)
    audit = judge_audit_summary(demo_db, DEMO_JUDGE_STUDY)
    assert audit.n_pairs > 0
    frames = [d.value for d in at.dataframe]
    assert len(frames) >= 3, "the judge-audit Analysis page is blank"
    overview = frames[0].set_index("Measure")["Value"]
    assert overview["Clinician annotations paired with a judge label"] == str(audit.n_pairs)
    assert overview["Gwet's AC1, judge vs clinician [95% CI]"].startswith(f"{audit.agreement.coefficient:.2f} [")
    confusion = frames[1].set_index("Clinician \\ judge")
    assert int(confusion.to_numpy().sum()) == audit.n_pairs
    _assert_paper_tables(at, min_tables=3)
    headings = [m.value for m in at.markdown]
    assert "#### Judge audit: the automatic judge against clinicians" in headings


def test_judge_confidence_chart_shows_every_level_including_2(demo_db):
    analysis = _lead_page("lead_analysis", DEMO_JUDGE_STUDY)
    confidence = next(s for s in _charts(analysis) if s["layout"]["title"]["text"] == "Reviewer confidence")
    assert confidence["data"][0]["x"] == ["0 · Low", "1 · Moderate", "2 · High"]
    counts = [a + b for a, b in zip(confidence["data"][0]["y"], confidence["data"][1]["y"], strict=True)]
    assert counts[2] > 0  # the demo's reviewers use 2; it is charted

    agreement = _lead_page("lead_agreement", DEMO_JUDGE_STUDY)
    usage = next(s for s in _charts(agreement) if s["layout"]["title"]["text"] == "Scores used")
    names = [trace["name"] for trace in usage["data"]]
    assert names == ["-1", "0", "1", "2"]  # clinician label -1/0/1 and confidence 0/1/2: no category dropped
    two = usage["data"][names.index("2")]
    by_dimension = dict(zip(["Clinician's verdict", "Clinician's confidence"], two["x"], strict=True))
    assert by_dimension["Clinician's confidence"] > 0 and by_dimension["Clinician's verdict"] == 0


def test_judge_review_page_speaks_of_a_verdict_on_the_judge(demo_db):
    from .panel_support import Panel, judge_assignment, open_review

    at = open_review("rev01", judge_assignment(demo_db))
    panel = Panel(at)
    names = [d["name"] for d in panel.data["dims"]]
    assert names == ["Your verdict on the judge's label", "Confidence in your verdict"]
    assert "auditing an automatic judge" in panel.data["purpose"]
    assert any("the label you are auditing" in c.value for c in at.caption)
    assert any(t.value.startswith("Judge's label: ") for t in at.text)
