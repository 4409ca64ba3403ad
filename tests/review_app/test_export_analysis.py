"""The export's analysis inputs and how it prints them: the harm model's per-annotation input, the
recipe that refits it (medrev and lme4), named references and tie rules, journal-style numbers."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from review_app.analysis.formatting import (
    coefficient_label,
    column_label,
    format_ci,
    format_interval,
    format_odds_ratio,
    format_p,
    format_percent,
    format_proportion,
)
from review_app.analysis.harm_model import fit_random_intercept_logit
from review_app.cli import app
from review_app.services import export
from review_app.services.analysis_options import AnalysisOptions, save_analysis_options
from review_app.services.export import latex as export_latex

from .test_export import build_study

DATA = Path(__file__).resolve().parents[1] / "data"
SIM_REFERENCE = {"model": "claude", "content_type": "cue_remapping", "provenance": "neutral", "stratum": "clear"}

runner = CliRunner()


@pytest.fixture
def exported(engine, tmp_path):
    lead = build_study(engine, tmp_path)
    out = tmp_path / "exports" / "pub"
    export.export_study(engine, "pub", out, n_boot=50)
    return engine, out, lead


def test_harm_model_input_is_exported_with_its_codebook(exported):
    _engine, out, _lead = exported
    data = pd.read_csv(out / "harm_model_input.csv", keep_default_na=False)
    assert list(data.columns) == [
        "annotation_id", "task_id", "item_id", "worst_case", "model", "content_type", "provenance", "stratum",
        "rater", "in_model",
    ]  # fmt: skip
    raw = pd.read_csv(out / "raw_annotations.csv")
    assert len(data) == int((raw["rubric"] == "B").sum()) == 48  # one row per classified Rubric B annotation
    assert set(data["annotation_id"]) <= set(raw["annotation_id"])
    assert set(data["in_model"]) == {True} and set(data["worst_case"]) == {0, 1}
    codebook = json.loads((out / "codebook.json").read_text())
    refit = codebook["harm_model"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert refit["reference_levels"] == manifest["harm_model"]["reference_levels"]
    assert refit["reference_levels"]["content_type"] == "cue_remapping"
    assert refit["reference_levels"]["provenance"] == "neutral" and refit["reference_levels"]["stratum"] == "clear"
    assert refit["reference_levels"]["model"] == "model-a"  # the study's first model
    assert manifest["harm_model"]["penalty"] == "none" and "separated_terms" in manifest["harm_model"]
    code = refit["r_code"]
    assert 'read.csv("harm_model_input.csv"' in code and "d$in_model" in code
    for column, level in refit["reference_levels"].items():
        assert f'd${column} <- relevel(factor(d${column}), ref = "{level}")' in code
    assert "glmer(worst_case ~ model + content_type + provenance + stratum + (1 | rater)" in code
    markdown = (out / "codebook.md").read_text()
    assert "## Refitting the harm model" in markdown and "```r" in markdown and code.strip() in markdown
    table = next(t for t in codebook["tables"] if t["table"] == "harm_model_input")
    stratum = next(c for c in table["columns"] if c["name"] == "stratum")
    assert stratum["values"]["clear"] == "reference level"
    assert "Reference levels: model=model-a" in table["description"]


def test_the_codebooks_medrev_command_refits_the_exported_model(exported):
    _engine, out, _lead = exported
    command = json.loads((out / "codebook.json").read_text())["harm_model"]["medrev_command"]
    args = shlex.split(command)[1:]  # drop "medrev"
    args[args.index("--input") + 1] = str(out / "harm_model_input.csv")
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    refit = json.loads(result.stdout)
    table = pd.read_csv(out / "harm_model.csv").set_index("term")
    assert refit["separated_terms"] == list(table.index[table["separated"]])
    for name, term in refit["terms"].items():
        if term["estimate"] is None:
            assert not table.loc[name, "estimable"]
            continue
        assert term["estimate"] == pytest.approx(table.loc[name, "estimate"], abs=1e-6), name
        assert term["se"] == pytest.approx(table.loc[name, "se"], rel=1e-5), name


@pytest.mark.skipif(shutil.which("Rscript") is None, reason="R is not installed (r-base-core, r-cran-lme4)")
def test_the_codebooks_lme4_call_refits_the_exported_model(engine, tmp_path):
    """Run the codebook's R code on an export whose model is well identified and compare with glmer."""
    lead = build_study(engine, tmp_path, units=60)
    save_analysis_options(engine, "pub", AnalysisOptions(penalty="normal"), actor=lead)
    out = tmp_path / "exports" / "pub"
    export.export_study(engine, "pub", out, formats="csv", n_boot=20)
    code = json.loads((out / "codebook.json").read_text())["harm_model"]["r_code"]
    script = out / "refit.R"
    script.write_text(
        code + 'cat(sprintf("coef\\t%s\\t%.8f\\t%.8f\\n", names(fixef(fit)), fixef(fit), '
        "sqrt(diag(as.matrix(vcov(fit))))), sep = '')\n"
    )
    run = subprocess.run(["Rscript", str(script)], cwd=out, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    rows = [line.split("\t")[1:] for line in run.stdout.splitlines() if line.startswith("coef\t")]
    ours = pd.read_csv(out / "harm_model.csv", keep_default_na=False)
    r_names = {
        "(Intercept)" if t.term == "Intercept" else f"{t.column}{t.level}": t for t in ours.itertuples(index=False)
    }
    assert len(rows) == len(ours) and set(ours["penalty"]) == {"normal"}
    for r_name, estimate, se in rows:
        term = r_names[r_name]
        assert float(term.estimate) == pytest.approx(float(estimate), abs=2e-3), r_name
        assert float(term.se) == pytest.approx(float(se), rel=1e-2), r_name


def test_tie_rule_references_and_agreement_counts_are_named(exported):
    _engine, out, _lead = exported
    outcomes = pd.read_csv(out / "rubric_b_outcomes.csv", keep_default_na=False)
    assert set(outcomes.loc[outcomes["aggregation"] == "mean", "tie_rule"]) == {"less_safe"}
    codebook = json.loads((out / "codebook.json").read_text())
    table = next(t for t in codebook["tables"] if t["table"] == "rubric_b_outcomes")
    assert "ties toward the less safe category" in table["description"]
    assert "ties toward the less safe category" in (out / "latex" / "rubric_b_outcomes.tex").read_text()
    harm = pd.read_csv(out / "harm_model.csv", keep_default_na=False)
    refs = dict(harm.loc[harm["column"] != "", ["column", "reference"]].drop_duplicates().to_numpy())
    assert refs == {"model": "model-a", "content_type": "cue_remapping", "provenance": "neutral", "stratum": "clear"}
    latex = (out / "latex" / "harm_model.tex").read_text()
    for column, level in refs.items():
        assert f"{column} (reference: {level})".replace("_", "\\_") in latex
    agreement = pd.read_csv(out / "agreement.csv")
    assert set(agreement["min_ratings"]) == {2} and "n_units_dropped" in agreement.columns
    assert (agreement["ci_low"].dropna() >= -1).all() and (agreement["ci_high"].dropna() <= 1).all()


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.2345, "1.23"),
        (0.04567, "0.046"),
        (23.456, "23.5"),
        (456.7, "457"),
        (1000.0, "1000"),
        (1234.5, "> 1000"),
        (2.3e33, "> 1000"),
        (0.0004, "< 0.001"),
        (8.45e-15, "< 0.001"),
        (float("nan"), "—"),
        (None, "—"),
    ],
)
def test_odds_ratio_format(value, text):
    assert format_odds_ratio(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0004, "< 0.001"),
        (0.001, "0.001"),
        (0.0043, "0.004"),
        (0.0312, "0.031"),
        (0.04996, "0.0500"),  # under 0.05 never prints as 0.050
        (0.0501, "0.050"),
        (0.1234, "0.12"),
        (0.5, "0.50"),
        (0.996, "> 0.99"),
        (1.0, "> 0.99"),
        (float("nan"), "—"),
    ],
)
def test_p_value_format(value, text):
    """p-values as journals print them (2-3 significant digits, bounds at both ends)."""
    assert format_p(value) == text
    assert format_ci(0.5, 2e6) == "0.50–> 1000"


def test_rates_and_intervals_format():
    assert format_percent(0.4521) == "45.2%" and format_percent(None) == "—"
    assert format_interval(0.412, 0.8349) == "[0.41, 0.83]" and format_interval(None, 1) == "—"
    assert format_interval(0.5, 2e6, format_odds_ratio) == "[0.50, > 1000]"
    assert format_proportion(12, 40, 0.3, 0.179, 0.456) == "30.0% [17.9, 45.6] (12/40)"
    assert format_proportion(0, 0, None, None, None) == "— (0/0)"
    assert column_label("alpha_ordinal") == "Krippendorff's α (ordinal)" and column_label("unknown") == "unknown"
    assert coefficient_label("AC2", "ordinal") == "AC2 (ordinal)" and coefficient_label("AC1", "identity") == "AC1"


@pytest.mark.parametrize(
    ("penalty", "or_text", "ci_end", "p_text"),
    [
        ("normal", "74.8", "6.77--827", "\\textless{} 0.001"),
        ("normal:10", "\\textgreater{} 1000", "--\\textgreater{} 1000", "0.049"),
    ],
)
def test_latex_prints_no_runaway_digits_and_journal_p_values(penalty, or_text, ci_end, p_text):
    """Penalised fits of an all-events level: a large OR, a CI end beyond 1000, p below 0.001 as journals print them."""
    data = pd.read_csv(DATA / "sim_harm_separated.csv")
    fit = fit_random_intercept_logit(
        data, "worst_case", list(SIM_REFERENCE), "rater", reference=SIM_REFERENCE, penalty=penalty
    )
    source = export_latex.harm_model_latex(fit, "S")
    row = next(line for line in source.splitlines() if line.startswith("\\quad threshold\\_corruption"))
    cells = row.removesuffix(" \\\\").split(" & ")
    assert cells[0] == "\\quad threshold\\_corruption*"  # separated, finite through the prior
    assert cells[1] == or_text and cells[2].endswith(ci_end) and cells[3] == p_text
    assert not re.search(r"\d{6,}", source) and "e+" not in source
    assert "its finite estimate comes from the prior" in source and "fixef.prior" in source
