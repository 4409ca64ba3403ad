"""``medrev stats``: stable JSON keys, readable tables, and exit code 2 on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from review_app.cli import app

DATA = Path(__file__).resolve().parents[1] / "data"
runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, ["stats", *args])


@pytest.fixture
def ratings_csv(tmp_path: Path) -> Path:
    path = tmp_path / "ratings.csv"
    rows = [("T1", "R1", 2), ("T1", "R2", 2), ("T2", "R1", 1), ("T2", "R3", 2), ("T3", "R2", 0), ("T3", "R3", 0)]
    rows += [("T4", "R1", 2), ("T4", "R2", "")]
    pd.DataFrame(rows, columns=["task", "who", "score"]).to_csv(path, index=False)
    return path


def test_agreement_json_keys(ratings_csv: Path) -> None:
    result = _run(
        "agreement", "--input", str(ratings_csv), "--unit", "task", "--rater", "who", "--score", "score", "--json"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    expected = {
        "n_units",
        "n_raters",
        "ac2",
        "ac2_se",
        "ac2_ci_low",
        "ac2_ci_high",
        "percent_agreement",
        "alpha_ordinal",
        "category_counts",
    }
    assert expected <= set(data)
    assert data["n_units"] == 3 and data["n_raters"] == 3
    assert data["category_counts"] == {"0": 2, "1": 1, "2": 3}
    assert data["percent_agreement"] == pytest.approx(2 / 3)


def test_agreement_identity_weights_report_ac1(ratings_csv: Path) -> None:
    result = _run(
        "agreement",
        "--input",
        str(ratings_csv),
        "--unit",
        "task",
        "--rater",
        "who",
        "--score",
        "score",
        "--weights",
        "identity",
        "--categories",
        "0,1,2",
        "--json",
    )
    data = json.loads(result.stdout)
    assert "ac1" in data and "ac2" not in data and "ac2_se" in data


def test_agreement_table(ratings_csv: Path) -> None:
    result = _run("agreement", "--input", str(ratings_csv), "--unit", "task", "--rater", "who", "--score", "score")
    assert result.exit_code == 0
    assert "AC2" in result.stdout and "percent agreement" in result.stdout


@pytest.mark.parametrize(
    ("edit", "args", "message"),
    [
        (None, ["--score", "nope"], "no column(s) 'nope'"),
        ("T5,R1,high\n", [], "column 'score' must be numeric: line 10 holds 'high'"),
        ("T5,R1,7\n", [], "line 10 holds 7, outside the categories {0, 1, 2}"),
        (None, ["--weights", "cubic"], "unknown --weights 'cubic'"),
        (",R1,1\n", [], "column 'task': line 10 has a score in 'score' but no 'task'"),
        ("T5,,1\n", [], "column 'who': line 10 has a score in 'score' but no 'who'"),
        ("T1,R1,0\n", [], "column 'score': line 10: rater 'R1' scored unit 'T1' more than once (first at line 2)"),
        (None, ["--categories", "a,b"], "--categories must be comma-separated numbers"),
    ],
)
def test_agreement_bad_input(ratings_csv: Path, edit: str | None, args: list[str], message: str) -> None:
    if edit:
        with ratings_csv.open("a") as handle:
            handle.write(edit)
    base = ["agreement", "--input", str(ratings_csv), "--unit", "task", "--rater", "who", "--score", "score"]
    if args and args[0] == "--score":
        base = base[:-2]
    result = _run(*base, *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_missing_input_file(tmp_path: Path) -> None:
    result = _run("agreement", "--input", str(tmp_path / "none.csv"), "--unit", "u", "--rater", "r", "--score", "s")
    assert result.exit_code == 2 and "does not exist" in result.stderr


def harm_args(data: str) -> list[str]:
    """``stats harm-model`` on a simulated panel file: worst-case outcome, the design's fixed effects."""
    return [
        "harm-model",
        "--input",
        str(DATA / data),
        "--outcome",
        "worst_case",
        "--fixed",
        "model,content_type,provenance,stratum",
        "--group",
        "rater",
    ]


HARM_ARGS = harm_args("sim_harm.csv")
REFERENCES = [
    "--reference",
    "model=claude",
    "--reference",
    "content_type=cue_remapping",
    "--reference",
    "provenance=neutral",
    "--reference",
    "stratum=clear",
]


def test_harm_model_json() -> None:
    result = _run(*HARM_ARGS, *REFERENCES, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {"n", "n_groups", "converged", "loglik", "group_variance", "icc", "terms"} <= set(data)
    assert (data["n"], data["n_groups"], data["converged"]) == (160, 14, True)
    assert "Intercept" in data["terms"] and "provenance[patient]" in data["terms"]
    assert "provenance[neutral]" not in data["terms"]
    term = data["terms"]["provenance[patient]"]
    assert set(term) == {"estimate", "se", "odds_ratio", "or_ci_low", "or_ci_high", "p_value", "separated"}
    assert data["separated_terms"] == [] and data["penalty"] == "none"
    assert data["reference_levels"]["provenance"] == "neutral"
    assert term["estimate"] == pytest.approx(-1.0298813477, abs=2e-3)  # lme4::glmer


def test_harm_model_table_keeps_bracketed_term_names() -> None:
    result = _run(*HARM_ARGS, *REFERENCES)
    assert result.exit_code == 0
    assert "provenance[patient]" in result.stdout and "latent ICC" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--reference", "provenance=martian"], "unknown reference level 'martian' for column 'provenance'"),
        (["--reference", "provenance"], "--reference must look like COL=LEVEL"),
        (["--group", "nope"], "no column(s) 'nope'"),
    ],
)
def test_harm_model_bad_input(args: list[str], message: str) -> None:
    result = _run(*HARM_ARGS, *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_proportion_json_and_text() -> None:
    result = _run("proportion", "--successes", "155", "--n", "158", "--json")
    data = json.loads(result.stdout)
    assert set(data) == {"k", "n", "rate", "ci_low", "ci_high"}
    assert (round(data["ci_low"], 3), round(data["ci_high"], 3)) == (0.946, 0.994)
    text = _run("proportion", "--successes", "34", "--n", "89")
    assert "38.2%" in text.stdout and "28.8" in text.stdout


def test_proportion_k_above_n() -> None:
    result = _run("proportion", "--successes", "90", "--n", "89")
    assert result.exit_code == 2 and "exceed the number of trials" in result.stderr


def test_agreement_min_ratings(ratings_csv: Path) -> None:
    base = ["agreement", "--input", str(ratings_csv), "--unit", "task", "--rater", "who", "--score", "score"]
    default = json.loads(_run(*base, "--json").stdout)
    assert (default["min_ratings"], default["n_units"], default["n_units_dropped"]) == (2, 3, 1)
    every = json.loads(_run(*base, "--min-ratings", "1", "--json").stdout)
    assert (every["min_ratings"], every["n_units"], every["n_units_dropped"]) == (1, 4, 0)
    table = _run(*base).stdout
    assert "units (>= 2 ratings)" in table and "units set aside (< 2 ratings)" in table
    bad = _run(*base, "--min-ratings", "0")
    assert bad.exit_code == 2 and "min_ratings must be a whole number of at least 1" in bad.stderr


def test_agreement_min_ratings_one_is_gwets_handbook(tmp_path: Path) -> None:
    from tests.review_app.analysis.gwet_handbook import raw_4raters_long

    path = tmp_path / "raw4raters.csv"
    raw_4raters_long().to_csv(path, index=False)
    args = ["agreement", "--input", str(path), "--unit", "Units", "--rater", "rater", "--score", "score"]
    result = _run(*args, "--categories", "1,2,3,4,5", "--min-ratings", "1", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert round(data["ac2"], 5) == 0.89894 and data["n_units"] == 12 and data["n_units_dropped"] == 0


SEPARATED_ARGS = [*harm_args("sim_harm_separated.csv"), *REFERENCES]


def test_harm_model_separation_is_named_in_the_table() -> None:
    result = runner.invoke(app, ["stats", *SEPARATED_ARGS], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "stratum[potentially_true]" in text and "n/e" in text
    assert "stratum = potentially_true (against clear): not estimable (no events in this level)" in " ".join(
        text.split()
    )
    assert "e+" not in text and not any(len(word) > 12 and word.replace(".", "").isdigit() for word in text.split())


def test_harm_model_penalty_is_named_everywhere() -> None:
    table = runner.invoke(app, ["stats", *SEPARATED_ARGS, "--penalty", "normal"], env={"COLUMNS": "80"})
    assert table.exit_code == 0, table.output
    flat = " ".join(table.stdout.split())
    assert "penalised likelihood" in flat and "normal(sd = c(10, 2.5))" in flat and "cov.prior = NULL" in flat
    data = json.loads(_run(*SEPARATED_ARGS, "--penalty", "normal", "--json").stdout)
    assert data["penalty"] == "normal" and "bglmer" in data["penalty_description"]
    assert data["terms"]["stratum[potentially_true]"]["estimate"] == pytest.approx(-2.2063102369, abs=2e-3)  # bglmer
    assert data["terms"]["stratum[potentially_true]"]["separated"] is True


@pytest.mark.parametrize("penalty", ["firth", "normal:-2"])
def test_harm_model_bad_penalty(penalty: str) -> None:
    result = _run(*HARM_ARGS, "--penalty", penalty)
    assert result.exit_code == 2 and "--penalty" in result.stderr and "Traceback" not in result.output


def test_harm_model_outcome_error_names_the_file_line(tmp_path: Path) -> None:
    """Line 3 misses a fixed value (dropped); the bad outcome on line 5 is named as line 5, not row 3."""
    path = tmp_path / "harm.csv"
    path.write_text("y,a,g\n1,x,G1\n0,,G2\n1,y,G1\nperhaps,y,G2\n0,x,G1\n1,y,G2\n")
    result = _run("harm-model", "--input", str(path), "--outcome", "y", "--fixed", "a", "--group", "g")
    assert result.exit_code == 2
    assert "outcome column 'y' must hold 0/1 (or true/false): line 5 holds 'perhaps'" in result.stderr


def test_agreement_row_errors_name_the_file_line_past_blank_and_multiline_rows(tmp_path: Path) -> None:
    """Blank lines and a quoted cell spanning two lines do not shift the line named for a row without a unit."""
    path = tmp_path / "ratings.csv"
    path.write_text('unit,rater,score,note\nT1,R1,1,"two\nlines"\n\nT1,R2,2,\n,R1,0,\n')
    result = _run("agreement", "--input", str(path), "--unit", "unit", "--rater", "rater", "--score", "score")
    assert result.exit_code == 2
    assert f"{path}: column 'unit': line 6 has a score in 'score' but no 'unit'" in " ".join(result.stderr.split())
