"""The lead tables' formatting layer and the charts' axes, without a page.

One rounding rule per kind (a percentage in a warning and in a table are the same text), a dash for
every kind of missing value, units in headers, thousands separators; count axes tick on whole
numbers, the odds-ratio axis is labelled 0.1, 0.2, 0.5, 1, 2, 5, 10, the passing-rate chart has no
empty slot for the composite.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from review_app.services.progress import behind_warnings
from review_app.ui.components import charts, tables
from review_app.ui.components.quality import cusum_chart, severity_forest


def _reviewer(name: str, assigned: int, submitted: int) -> dict:
    return {"username": name, "assigned": assigned, "submitted": submitted, "open": assigned - submitted}


@pytest.mark.parametrize("share", [0.125, 0.145, 0.245, 0.005])
def test_a_percentage_reads_the_same_in_the_warning_and_in_the_table(share):
    """12.5% was "12%" in the far-behind warning (Python) and "13%" in the table (printf in the browser).

    The panel's median is 62.5% here, the other figure the warning quotes.
    """
    laggard = _reviewer("slow", 200, round(share * 200)) | {"skipped": 0, "done_share": share}
    others = [_reviewer(f"r{i}", 8, 5) | {"skipped": 0, "done_share": 0.625} for i in range(2)]
    others += [_reviewer("r3", 10, 7) | {"skipped": 0, "done_share": 0.7}]
    others += [_reviewer("r4", 10, 9) | {"skipped": 0, "done_share": 0.9}]
    (warning,) = [w for w in behind_warnings([laggard, *others]) if w.startswith("slow")]
    done = tables.Column("Done", "percent")
    assert f"({done.format(share)}%)" in warning
    assert warning.endswith(f"the panel's median is {done.format(0.625)}%.")
    assert tables.percent(share) == f"{done.format(share)}%" and tables.percent(0.625) == "62%"


def test_every_missing_value_is_a_dash_and_numbers_have_separators():
    for missing in (None, float("nan"), np.nan, pd.NA, pd.NaT, "", "  ", math.inf):
        for kind in ("text", "count", "number", "percent", "seconds", "minutes", "p", "odds_ratio", "log_odds"):
            assert tables.Column("x", kind).format(missing) == tables.MISSING, (kind, missing)
    assert tables.whole(12345) == "12,345" and tables.decimal(1234.567) == "1,234.57"
    assert tables.decimal(-0.001) == "0.00"  # no "-0.00"
    assert tables.minutes(272) == "4.5" and tables.Column("t", "seconds").format(3725.4) == "3,725"
    assert tables.Column("Severity", "log_odds").format(0.0) == "1.00"
    assert tables.Column("Severity", "log_odds").format(math.log(2.5)) == "2.50"
    assert tables.p_value(0.0004) == "< 0.001" and tables.Column("Drift p", "p").format(0.2) == "0.20"
    assert tables.languages("en,zh") == "English, Chinese" and tables.languages("en, fr") == "English, fr"
    assert tables.Column("Active", "bool").format(True) == "yes"
    role = tables.Column("Role", values={"lead": "Study lead"})
    assert role.format("lead") == "Study lead" and role.format("other") == "other"


def test_headers_carry_their_units_once():
    assert tables.Column("Done", "percent").header == "Done (%)"
    assert tables.Column("Median time", "minutes").header == "Median time (min)"
    assert tables.Column("Time", "seconds").header == "Time (s)"
    assert tables.Column("Median time on task (min)", "minutes").header == "Median time on task (min)"
    assert tables.Column("Ratings", "count").header == "Ratings"


def test_the_styler_keeps_the_values_and_sets_the_text():
    frame = pd.DataFrame({"done_share": [0.125, None], "name": ["a", None], "other": [1.5, 2.5]})
    styled = tables.styled(frame, {"done_share": tables.Column("Done", "percent"), "name": tables.Column("Name")})
    styled._compute()
    body = styled._translate(False, False)["body"]
    shown = [[cell["display_value"] for cell in row[1:]] for row in body]
    assert [row[:2] for row in shown] == [["12", "a"], [tables.MISSING, tables.MISSING]]
    pd.testing.assert_frame_equal(styled.data, frame)  # sorting sorts the numbers


def _ticks(axis: dict) -> list[float]:
    start, step = axis["tick0"], axis["dtick"]
    return [start + k * step for k in range(12)]


@pytest.mark.parametrize("largest", [0, 1, 3, 9, 10, 11, 25, 260, 12_345])
def test_count_axes_tick_on_whole_numbers(largest):
    axis = charts.count_axis("Tasks", largest)
    assert axis["tickformat"] == ",d" and axis["title"]["text"] == "Tasks"
    assert float(axis["dtick"]).is_integer() and axis["dtick"] >= 1
    assert largest / axis["dtick"] <= 10


def test_the_drift_chart_of_one_shared_task_ticks_on_whole_numbers():
    path = pd.DataFrame({"task": [1], "signed": [0.25], "cusum": [0.0]})
    layout = cusum_chart(path, 0.01, "R01").to_plotly_json()["layout"]
    assert layout["xaxis"]["dtick"] == 1 and layout["xaxis"]["tickformat"] == ",d"
    assert not layout.get("shapes")  # no alert band where the test does not run


def test_the_odds_ratio_axis_shows_readable_major_ticks_only():
    table = pd.DataFrame(
        {
            "term": ["Intercept", "a", "b"],
            "odds_ratio": [0.3, 0.5, 4.0],
            "or_ci_low": [0.1, 0.12, 1.5],
            "or_ci_high": [0.9, 2.0, 9.0],
        }
    )
    axis = charts.odds_ratios(table).to_plotly_json()["layout"]["xaxis"]
    assert axis["type"] == "log"
    assert list(axis["ticktext"]) == ["0.1", "0.2", "0.5", "1", "2", "5", "10"]
    assert [float(t) for t in axis["ticktext"]] == pytest.approx(list(axis["tickvals"]))
    wide = charts.log_axis("x", [0.0005, 3000])
    assert all(math.log10(v).is_integer() for v in wide["tickvals"]) and len(wide["tickvals"]) <= 9


def test_severity_is_charted_as_odds_ratios_around_1():
    table = pd.DataFrame(
        {"rater": ["R01", "R02"], "severity": [0.0, math.log(2)], "severity_ci_low": [-0.5, 0.1]}
        | {"severity_ci_high": [0.5, 1.2]}
    )
    figure = severity_forest(table).to_plotly_json()
    assert figure["data"][0]["x"] == pytest.approx([1.0, 2.0])
    assert figure["layout"]["xaxis"]["type"] == "log" and "1" in figure["layout"]["xaxis"]["ticktext"]


def test_the_passing_rate_chart_has_no_empty_slot_for_the_composite():
    frame = pd.DataFrame(
        {
            "name": ["Base-item validity", "Composite (mean of dimensions)"],
            "pass_rate": [0.8, None],
            "pass_ci_low": [0.6, None],
            "pass_ci_high": [0.9, None],
        }
    )
    figure = charts.pass_rates(frame).to_plotly_json()
    assert list(figure["data"][0]["x"]) == ["Base-item validity"]


def test_a_large_table_is_sent_as_the_same_text_without_a_styler(monkeypatch):
    """Past STYLED_CELLS the Styler's per-cell cost is not paid: the grid gets the text itself."""
    sent = []
    monkeypatch.setattr(tables.st, "dataframe", lambda data, **options: sent.append((data, options)))
    frame = pd.DataFrame({"share": [0.125, None] * 3, "n": [1234, 5] * 3})
    columns = {"share": tables.Column("Done", "percent"), "n": tables.Column("Ratings", "count")}
    tables._grid(frame, columns, ["share", "n"])
    monkeypatch.setattr(tables, "STYLED_CELLS", 4)
    tables._grid(frame, columns, ["share", "n"])
    (small, _), (large, options) = sent
    assert small.data is frame  # values plus display text
    assert list(large["share"][:2]) == ["12", tables.MISSING] and list(large["n"][:2]) == ["1,234", "5"]
    assert options["placeholder"] == tables.MISSING
