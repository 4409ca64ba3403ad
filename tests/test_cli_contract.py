"""The command line is a contract outside scripts rely on: every command name and flag must exist.

See docs/architecture.md ("A new CLI command"): add, never rename.
"""

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from review_app.cli import app

BATCH_FLAGS = ("--batch", "--batch-size", "--batch-fallback", "--poll-interval", "--price-file")
CONTRACT = {
    "demo": [],
    "app": ["--host", "--port"],
    "db upgrade": [],
    "bench run medmisbench": [
        "--data", "--model", "--base-url", "--out", "--conditions", "--defensive", "--concurrency", "--seed", "--limit",
        "--template", "--template-file", "--protocol", "--temperature", *BATCH_FLAGS,
    ],
    "bench run healthcontradict": ["--data", "--model", "--base-url", "--hf", "--out", *BATCH_FLAGS],
    "bench run trojan": ["--data", "--model", "--base-url", "--judge-model", "--judge-base-url", "--out", *BATCH_FLAGS],
    "bench generate": [
        "--source", "--format", "--model", "--base-url", "--out", "--seed", "--limit", "--one-call", *BATCH_FLAGS,
    ],
    "bench report": ["--json", "--price-file"],
    "bench batch status": ["--json", "--price-file", "--refresh", "--offline", "--api-key-env"],
    "bench batch cancel": ["--api-key-env"],
    "review import": ["--kind", "--study"],
    "review study create": ["--rubrics"],
    "review pool": ["--study", "--size", "--quota", "--seed"],
    "review assign": ["--study", "--raters", "--dual-share", "--seed"],
    "review user add": ["--role", "--languages"],
    "review status": ["--study", "--json"],
    "review export": ["--study", "--out", "--format", "--real-names"],
    "stats agreement": [
        "--input", "--unit", "--rater", "--score", "--weights", "--categories", "--min-ratings", "--json",
    ],
    "stats harm-model": ["--input", "--outcome", "--fixed", "--group", "--reference", "--penalty", "--json"],
    "stats proportion": ["--successes", "--n", "--json"],
    "stats plan": [
        "--metric", "--expected", "--ci-width", "--categories", "--raters", "--odds-ratio", "--power", "--reviewers",
        "--icc", "--pilot", "--seed", "--json",
    ],
}  # fmt: skip


@pytest.mark.parametrize(("command", "flags"), CONTRACT.items(), ids=list(CONTRACT))
def test_command_and_flags_exist(command, flags):
    result = CliRunner().invoke(app, [*command.split(), "--help"], env={"COLUMNS": "200", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    text = re.sub(r"\x1b\[[0-9;]*m", "", result.output)
    for flag in flags:
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text), f"{command}: {flag} missing"


DATA = Path(__file__).resolve().parent / "data"
AGREEMENT_KEYS = {
    "n_units", "n_raters", "ac2", "ac2_se", "ac2_ci_low", "ac2_ci_high", "percent_agreement", "alpha_ordinal",
    "category_counts", "min_ratings", "n_units_dropped",
}  # fmt: skip
HARM_KEYS = {
    "n", "n_groups", "converged", "loglik", "group_variance", "icc", "separated_terms", "penalty", "terms",
}  # fmt: skip
TERM_KEYS = {"estimate", "se", "odds_ratio", "or_ci_low", "or_ci_high", "p_value", "separated"}


@pytest.mark.parametrize(("flags", "min_ratings", "dropped"), [([], 2, 1), (["--min-ratings", "1"], 1, 0)])
def test_agreement_json_keys(tmp_path, flags, min_ratings, dropped):
    path = tmp_path / "ratings.csv"
    path.write_text("task,who,score\nT1,R1,2\nT1,R2,2\nT2,R1,1\nT2,R2,0\nT3,R1,2\n")
    args = ["stats", "agreement", "--input", str(path), "--unit", "task", "--rater", "who", "--score", "score"]
    result = CliRunner().invoke(app, [*args, *flags, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) >= AGREEMENT_KEYS
    assert (data["min_ratings"], data["n_units_dropped"], data["n_units"]) == (min_ratings, dropped, 3 - dropped)


@pytest.mark.parametrize("penalty", [None, "none", "normal"])
def test_harm_model_json_keys(penalty):
    args = [
        "stats", "harm-model", "--input", str(DATA / "sim_harm_separated.csv"), "--outcome", "worst_case",
        "--fixed", "model,content_type,provenance,stratum", "--group", "rater", "--reference", "stratum=clear",
        "--reference", "content_type=cue_remapping", "--json",
    ]  # fmt: skip
    result = CliRunner().invoke(app, args + (["--penalty", penalty] if penalty else []))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) >= HARM_KEYS
    assert data["penalty"] == (penalty or "none")
    assert data["separated_terms"] == ["content_type[threshold_corruption]", "stratum[potentially_true]"]
    for name, term in data["terms"].items():
        assert set(term) == TERM_KEYS, name
        assert term["separated"] is (name in data["separated_terms"])
    separated = data["terms"]["stratum[potentially_true]"]
    if data["penalty"] == "none":
        assert separated["estimate"] is None and separated["odds_ratio"] is None
    else:
        assert separated["estimate"] < 0 and separated["se"] > 0
