"""Every table on every lead page reads as a table for people: labels, not column names; a dash, not ``None``.

Each lead page is opened under AppTest for the Rubric A/B demo study and the judge-audit demo study,
with a rated gold task and a reviewer's flag added first (``table_support.prepare_lead_pages``), so
the Reviewers' quality page has its gold columns and the Flags page its table. For every ``st.dataframe`` and
``st.table`` (those in expanders too) the headers and cells are rebuilt as the browser draws them
(``table_support.shown_tables``: column-config labels, the missing-value placeholder, Styler display
text) and checked: no header may be a column name (an identifier with ``_``, a lowercase word such
as ``username``, a bare position) and no cell may read ``None``, ``nan``, ``NaN``, ``<NA>`` or ``NaT``.
"""

from __future__ import annotations

import re
import time

import pytest

from review_app.demo import DEMO_JUDGE_STUDY, DEMO_STUDY

from .conftest import sign_in
from .table_support import RAW_HEADER, RAW_MISSING, ShownTable, prepare_lead_pages, shown_tables

PAGES = (
    "lead_progress",
    "lead_flags",
    "lead_reviewers",
    "lead_quality",
    "lead_agreement",
    "lead_analysis",
    "lead_plan",
    "lead_setup",
    "lead_adjudication",
    "lead_export",
    "lead_import",
)
STUDIES = {"review": DEMO_STUDY, "judge": DEMO_JUDGE_STUDY}
WAITING = ("Computing severity", "Checking reviewer quality")  # captions of a page still computing


def _open(page: str, study: str):
    at = sign_in("lead01")
    at.session_state["lead_study"] = study
    at.switch_page(f"views/{page}.py").run(timeout=180)
    deadline = time.monotonic() + 180
    while any(w in c.value for c in at.caption for w in WAITING):  # shown on a rerun once computed
        assert time.monotonic() < deadline, f"{page} kept computing"
        time.sleep(0.3)
        at.run(timeout=180)
    assert not at.exception, at.exception
    return at


def _problems(tables: list[ShownTable]) -> list[str]:
    out = []
    for number, table in enumerate(tables, 1):
        if table.raw_headers():
            out.append(f"table {number}: column names as headers {table.raw_headers()} (headers {table.headers})")
        if table.raw_cells():
            out.append(f"table {number}: raw missing values {table.raw_cells()} (headers {table.headers})")
    return out


@pytest.mark.parametrize("study", list(STUDIES))
@pytest.mark.parametrize("page", PAGES)
def test_lead_tables_show_labels_and_no_raw_missing_values(demo_db, page, study):
    prepare_lead_pages(demo_db, STUDIES)
    at = _open(page, STUDIES[study])
    tables = shown_tables(at)
    problems = _problems(tables)
    assert not problems, f"{page} ({study}):\n" + "\n".join(problems)


def test_the_check_catches_column_names_and_raw_missing_values():
    """The rules themselves: what a raw table looks like fails, what a labelled one looks like passes."""
    raw = ShownTable("dataframe", ["username", "done_share", "q1_seconds", "0"], [["rev01", "None", "nan", "<NA>"]])
    assert raw.raw_headers() == ["username", "done_share", "q1_seconds", "0"]
    assert raw.raw_cells() == ["<NA>", "None", "nan"]
    assert ShownTable("dataframe", ["x"], [["[nan, 0.5]"], ["NaN%"]]).raw_cells() == ["NaN%", "[nan, 0.5]"]
    good = ShownTable(
        "dataframe",
        ["Reviewer", "Done (%)", "Median time (min)", "p", "95% CI", "Krippendorff's α (ordinal)"],
        [["rev01", "13", "—", "< 0.001", "[0.41, 0.83]", "Nancy's note: None of the options"]],
    )
    assert good.raw_headers() == [] and good.raw_cells() == []
    assert RAW_HEADER.search("languages") and not RAW_HEADER.search("Languages")
    assert RAW_MISSING.search("None") and not RAW_MISSING.search("Nonetheless")


def test_quality_page_reads_severity_as_odds_ratios_and_says_why_they_are_all_1(demo_db):
    """On the demo the harm model's reviewer variance is 0 (a boundary fit on 49 Rubric B ratings): every
    severity is exactly the average. The page shows 1.00 (an odds ratio), never 0.000, and says why."""
    at = _open("lead_quality", DEMO_STUDY)
    main = shown_tables(at)[0]
    severity = [row[main.headers.index("Severity (odds ratio)")] for row in main.rows]
    assert severity and set(severity) == {"1.00"}
    notes = [i.value for i in at.info]
    assert any("no variance between reviewers" in n and "Rubric B ratings" in n for n in notes), notes
    assert not any(n.startswith("the harm model estimates") for n in notes)  # said once, in words
    legend = next(e for e in at.expander if e.label == "What each column means")
    text = " ".join(m.value for m in legend.markdown).replace("\\", "")  # plain() escapes Markdown
    assert "Severity (odds ratio)" in text and not re.search(r"\b[a-z]+_[a-z_]+\b", text)  # no column names
