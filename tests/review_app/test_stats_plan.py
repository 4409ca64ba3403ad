"""``medrev stats plan``: stable JSON keys, pilot studies from the database, one-line errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from review_app.analysis.sample_size import wilson_sample_size
from review_app.cli import app

runner = CliRunner()
CONTRACT_KEYS = {"n_tasks", "n_dual", "dual_share", "simulations", "seed"}


def _plan(*args: str, env: dict | None = None):
    return runner.invoke(app, ["stats", "plan", *args], env=env)


def test_rate_plan_json_keys_and_closed_form() -> None:
    result = _plan("--metric", "rate", "--expected", "0.38", "--ci-width", "0.2", "--seed", "3", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert CONTRACT_KEYS | {"achieved_ci_width"} <= set(data)
    assert data["n_tasks"] == wilson_sample_size(0.38, 0.2) == 87
    assert data["n_dual"] == 0 and data["dual_share"] == 0 and data["seed"] == 3
    assert data["simulations"] == 2000 and abs(data["achieved_ci_width"] - 0.2) < 0.01


def test_ac2_plan_json_and_text() -> None:
    args = ["--metric", "ac2", "--expected", "0.7", "--ci-width", "0.3", "--categories", "3", "--raters", "2"]
    result = _plan(*args, "--simulations", "40", "--workers", "1", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert CONTRACT_KEYS | {"achieved_ci_width"} <= set(data) and data["n_dual"] == data["n_tasks"] > 10
    again = json.loads(_plan(*args, "--simulations", "40", "--workers", "2", "--json").stdout)
    assert again == data  # same seed, same plan, whatever the number of processes
    text = _plan(*args, "--simulations", "40", "--workers", "1")
    assert text.exit_code == 0 and f"Plan (ac2): {data['n_tasks']} tasks" in text.stdout


def test_harm_plan_json_keys() -> None:
    result = _plan(
        "--metric", "harm-or", "--odds-ratio", "3", "--power", "0.8", "--reviewers", "6", "--icc", "0.1",
        "--simulations", "60", "--workers", "1", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert CONTRACT_KEYS | {"achieved_power"} <= set(data) and "achieved_ci_width" not in data
    assert data["n_dual"] == round(0.72 * data["n_tasks"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--metric", "kappa", "--ci-width", "0.1"], "unknown metric 'kappa'"),
        (["--metric", "rate", "--expected", "0.3"], "target CI width"),
        (["--metric", "ac2", "--ci-width", "0.2"], "expected AC2"),
        (["--metric", "harm-or", "--odds-ratio", "2", "--reviewers", "5"], "ICC"),
        (["--metric", "rate", "--expected", "2", "--ci-width", "0.1"], "expected rate"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(args: list[str], message: str) -> None:
    result = _plan(*args)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_pilot_study_from_the_database(tmp_path) -> None:
    from review_app.db.connect import dispose_engines
    from review_app.demo import seed_demo

    url = f"sqlite:///{tmp_path / 'demo.db'}"
    seed_demo(tmp_path / "demo.db", fresh=True)
    pilot = "Demo: MedMisBench clinician review"
    # The demo's harm model has events in every level; two levels are made event-free (as a small
    # pilot can be) to check that separated levels are planned around.
    from review_app.db.connect import get_engine

    from .factories import make_level_event_free

    assert make_level_event_free(get_engine(url), pilot, "content_type", "exception_poisoning") > 0
    assert make_level_event_free(get_engine(url), pilot, "stratum", "potentially_true") > 0
    dispose_engines()
    env = {"MEDREV_DATABASE_URL": url}
    result = _plan("--metric", "rate", "--ci-width", "0.2", "--pilot", pilot, "--json", env=env)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["notes"][0].startswith("expected rate") and data["seconds_per_rating"] > 0
    assert data["reviewer_hours"] == pytest.approx(data["n_tasks"] * data["seconds_per_rating"] / 3600)
    harm = _plan(
        "--metric", "harm-or", "--odds-ratio", "3", "--pilot", pilot, "--simulations", "50", "--json", env=env
    )  # fmt: skip
    assert harm.exit_code == 0, harm.output
    data = json.loads(harm.stdout)
    assert data["assumptions"]["reviewers"] == 8 and data["assumptions"]["term"].startswith("model[")
    # The pilot's Analysis-page model has two separated levels (no finite ML estimate): they are
    # simulated with no effect, not with the NaN that made every simulated study event-free.
    (separated,) = [note for note in data["notes"] if note.startswith("not estimable in the pilot")]
    assert "content_type[exception_poisoning]" in separated and "stratum[potentially_true]" in separated
    assert data["assumptions"]["term"] not in separated
    assert 0 < data["achieved_power"] <= 1 and data["n_dual"] == round(0.72 * data["n_tasks"])
    missing = _plan("--metric", "rate", "--ci-width", "0.2", "--pilot", "no such study", env=env)
    assert missing.exit_code == 2 and "no study named 'no such study'" in missing.stderr
    dispose_engines()
