"""Reviewer quality: severity against lme4's ranef, drift detection and false alarms, gold, time on task."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from review_app.analysis.harm_model import fit_random_intercept_logit
from review_app.analysis.layout import AnalysisInputError
from review_app.analysis.reviewer_measures import (
    conditional_modes,
    cusum_drift,
    gold_accuracy,
    pair_table,
    time_on_task,
    work_periods,
)
from review_app.analysis.reviewer_quality import QualityThresholds, reviewer_quality
from review_app.analysis.study_harm_model import HarmModelSpec, StudyHarmModel

from .quality_sim import shift_for_odds_ratio, synthetic_study

DATA = Path(__file__).resolve().parents[2] / "data"


def _ranef_reference() -> dict[str, tuple[float, float]]:
    """lme4::ranef(condVar = TRUE) on cbpp (tests/data/ranef_reference.R, output kept in .out)."""
    out = {}
    for line in (DATA / "ranef_reference.out").read_text().splitlines():
        if line.startswith("herd "):
            _, herd, mode, sd = line.split()
            out[herd] = (float(mode), float(sd))
    return out


def test_severity_is_lme4s_conditional_mode_with_its_conditional_sd() -> None:
    cbpp = pd.read_csv(DATA / "cbpp.csv")
    rows = []
    for r in cbpp.itertuples(index=False):
        rows += [{"herd": str(r.herd), "period": str(r.period), "y": 1}] * r.incidence
        rows += [{"herd": str(r.herd), "period": str(r.period), "y": 0}] * (r.size - r.incidence)
    data = pd.DataFrame(rows)
    fit = fit_random_intercept_logit(data, "y", ["period"], "herd", reference={"period": "1"})
    modes = conditional_modes(data, fit)
    reference = _ranef_reference()
    assert len(reference) == 15 and set(modes.index) == set(reference)
    for herd, (mode, sd) in reference.items():
        # Our ML estimates differ from glmer's by < 2e-3 (test_harm_model); the modes follow them.
        assert modes.loc[herd, "severity"] == pytest.approx(mode, abs=5e-3)
        assert modes.loc[herd, "sd"] == pytest.approx(sd, rel=0.02)
    assert modes["n"].sum() == len(data)
    assert (modes["ci_high"] - modes["ci_low"]).to_numpy() == pytest.approx(2 * 1.959964 * modes["sd"].to_numpy())


def test_severity_is_zero_with_no_reviewer_variance() -> None:
    rng = np.random.default_rng(3)
    data = pd.DataFrame(
        {"y": rng.integers(0, 2, 400), "x": rng.choice(["a", "b"], 400), "g": rng.choice(list("ABCDEF"), 400)}
    )
    fit = fit_random_intercept_logit(data, "y", ["x"], "g", reference={"x": "a"})
    modes = conditional_modes(data, fit)
    if fit.group_variance == 0:
        assert (modes["severity"] == 0).all() and (modes["sd"] == 0).all()
    else:  # a tiny variance: shrunk almost to zero
        assert modes["severity"].abs().max() < 0.3


# The synthetic studies have no Rubric A scores: under the paper's harm model (items without a clarity
# score excluded) nothing enters the model, so severity is asked for with such items kept as a level.
UNRATED_AS_LEVEL = HarmModelSpec(unrated="level")


def test_two_times_more_severe_reviewer_is_flagged_and_nobody_else() -> None:
    study = synthetic_study(7, drifting="R01")
    report = reviewer_quality(study, harm=UNRATED_AS_LEVEL)
    table = report.table.set_index("rater")
    assert table.loc["R01", "drift_alert"] and table.loc["R01", "drift_direction"] == "harsher"
    assert [a.rater for a in report.alerts] == ["R01"]
    # Severity by third (harm model, one intercept per reviewer and third) is reported alongside;
    # with ~70 annotations per third it is descriptive, not the test.
    assert table[["severity_first", "severity_last", "severity_change", "severity_change_se"]].notna().all().all()
    assert table.loc["R01", "shared_tasks"] == table.loc["R01", "n_annotations"]  # every task is dual-rated
    assert set(report.cusum) == set(table.index)


def test_severity_uses_the_studys_harm_model_and_its_spec() -> None:
    study = synthetic_study(5, tasks=200)
    # The paper's model leaves out annotations on items without a clarity score: no model, no severity.
    paper = reviewer_quality(study)
    assert "severity" not in paper.table and paper.harm_model is None
    assert any(note.startswith("severity not computed") for note in paper.notes)
    assert not any(note.startswith("severity by period") for note in paper.notes)
    # Given the study's fitted model, severity is read from that very fit (not refitted); the
    # per-third refit takes its spec (here: reference model-b, penalised).
    spec = HarmModelSpec(reference={"model": "model-b"}, unrated="level", penalty="normal")
    data = spec.data(study)
    fitted = spec.fit(data)
    report = reviewer_quality(study, harm=StudyHarmModel(spec, data, fitted))
    assert report.harm_model is fitted
    assert fitted.reference_levels["model"] == "model-b" and fitted.penalty.key == "normal"
    modes = conditional_modes(data, fitted)
    table = report.table.set_index("rater")
    assert table["severity"].to_numpy() == pytest.approx(modes["severity"].reindex(table.index).to_numpy())
    assert table["severity_first"].notna().all()
    # A study whose Analysis page has no harm model: its reason is the note.
    skipped = reviewer_quality(study, harm=StudyHarmModel(spec, data, note="harm model skipped: too few"))
    assert "severity" not in skipped.table and "severity not computed: harm model skipped: too few" in skipped.notes


def test_conditional_modes_leave_out_separated_levels_only_under_maximum_likelihood() -> None:
    rng = np.random.default_rng(4)
    n = 600
    data = pd.DataFrame(
        {"x": rng.choice(["a", "b", "c"], n, p=[0.45, 0.45, 0.1]), "g": rng.choice([f"R{k}" for k in range(6)], n)}
    )
    shift = data["g"].map({f"R{k}": 0.4 * (k - 2.5) for k in range(6)})
    eta = -0.5 + 0.8 * (data["x"] == "b") + shift
    data["y"] = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    data.loc[data["x"] == "c", "y"] = 0  # level c: no events (separation)
    ml = fit_random_intercept_logit(data, "y", ["x"], "g", reference={"x": "a"})
    assert ml.term("x[c]").separated and not np.isfinite(ml.term("x[c]").estimate)
    modes = conditional_modes(data, ml)
    assert modes["n"].sum() == (data["x"] != "c").sum()  # c's rows left the fit, and the modes
    assert np.isfinite(modes["severity"]).all() and ml.group_variance > 0
    penalised = fit_random_intercept_logit(data, "y", ["x"], "g", reference={"x": "a"}, penalty="normal")
    assert penalised.term("x[c]").separated and np.isfinite(penalised.term("x[c]").estimate)
    kept = conditional_modes(data, penalised)
    assert kept["n"].sum() == n and np.isfinite(kept["severity"]).all()
    # Both follow the reviewers' simulated shifts.
    truth = pd.Series({f"R{k}": 0.4 * (k - 2.5) for k in range(6)})
    for found in (modes, kept):
        assert np.corrcoef(found["severity"].reindex(truth.index), truth)[0, 1] > 0.8
    # A separated reference level leaves no finite intercept: severity refuses with the way out.
    c_ref = fit_random_intercept_logit(data, "y", ["x"], "g", reference={"x": "c"})
    with pytest.raises(AnalysisInputError, match="reference level"):
        conditional_modes(data, c_ref)


def test_study_without_drift_raises_no_alert() -> None:
    report = reviewer_quality(synthetic_study(7))
    assert not report.alerts
    assert not report.table["drift_alert"].any()


def test_drift_detection_and_false_alarm_rates_over_200_simulated_studies(capsys) -> None:
    """The drift test's operating characteristics at the default false-alarm rate (0.01 per reviewer)."""
    alpha = QualityThresholds().drift_alpha
    counts = {"detected": 0, "innocent_flagged_in_drift_study": 0, "false_alarm_reviewer": 0, "false_alarm_study": 0}
    n = 200
    for seed in range(n):
        for drifting in ("R01", None):
            pairs = pair_table(synthetic_study(10_000 + seed, drifting=drifting))
            p = {r: cusum_drift(g["signed"].to_numpy()).p_value for r, g in pairs.groupby("rater")}
            if drifting:
                counts["detected"] += p["R01"] < alpha
                counts["innocent_flagged_in_drift_study"] += any(v < alpha for r, v in p.items() if r != "R01")
            else:
                counts["false_alarm_reviewer"] += p["R01"] < alpha
                counts["false_alarm_study"] += any(v < alpha for v in p.values())
    rates = {k: v / n for k, v in counts.items()}
    with capsys.disabled():
        print(
            f"\ndrift test over {n} simulated studies (6 reviewers, 600 dual-rated tasks, shift "
            f"{shift_for_odds_ratio(2.0):.3f} = worst-case odds x2): "
            + ", ".join(f"{k} {v:.3f}" for k, v in rates.items())
        )
    assert rates["detected"] >= 0.85
    assert rates["false_alarm_reviewer"] <= 0.03  # nominal 0.01
    assert rates["false_alarm_study"] <= 0.12  # 6 reviewers at 0.01 each: about 0.06


def test_cusum_statistic_has_the_kolmogorov_null_distribution() -> None:
    rng = np.random.default_rng(0)
    for n in (40, 150):
        p_values = np.array([cusum_drift(rng.choice([-0.5, 0, 0, 0.5], n)).p_value for _ in range(2000)])
        for level in (0.01, 0.05, 0.1, 0.25):
            assert np.mean(p_values < level) == pytest.approx(level, abs=0.2 * level + 0.004)
    shifted = cusum_drift(np.concatenate([rng.normal(0, 0.3, 60), rng.normal(0.3, 0.3, 60)]))
    assert shifted.p_value < 1e-4 and shifted.direction == "harsher" and abs(shifted.change_at - 59) <= 10
    assert cusum_drift(np.zeros(50)).p_value is None  # no variation: no test
    assert cusum_drift(np.ones(5)).p_value is None  # too short


def test_pair_table_agreement_and_signed_difference() -> None:
    frame = pd.DataFrame(
        {
            "task_id": [1, 1, 2, 2, 3],
            "rubric": "A",
            "rater": ["x", "y", "x", "y", "x"],
            "submitted_at": pd.to_datetime(
                ["2026-01-01 10:00", "2026-01-01 11:00"] * 2 + ["2026-01-01 12:00"], utc=True
            ),
        }
    )
    from review_app.rubrics import get_rubric

    dims = get_rubric("A").dimension_keys
    for key in dims:
        frame[key] = [2.0, 2.0, 2.0, 0.0, 1.0]
    pairs = pair_table(frame).set_index(["rater", "task_id"])
    assert len(pairs) == 4  # task 3 has one rater
    assert pairs.loc[("x", 1), "agreement"] == 1 and pairs.loc[("x", 1), "signed"] == 0
    # 2 vs 0 on a 0..2 scale: ordinal weight 0, signed difference -1 for x (y scored lower), +1 for y.
    assert pairs.loc[("x", 2), "agreement"] == 0
    assert pairs.loc[("x", 2), "signed"] == -1 and pairs.loc[("y", 2), "signed"] == 1


def test_work_periods_split_each_reviewers_work_in_thirds() -> None:
    frame = pd.DataFrame(
        {
            "rater": ["a"] * 9 + ["b"] * 3,
            "submitted_at": pd.date_range("2026-01-01", periods=12, freq="h", tz="UTC")[::-1],
            "annotation_id": range(12),
        }
    )
    periods = work_periods(frame)
    assert list(periods[:9]) == ["last"] * 3 + ["middle"] * 3 + ["first"] * 3  # newest rows first
    assert list(periods[9:]) == ["last", "middle", "first"]


def test_gold_accuracy_and_time_on_task() -> None:
    gold = pd.DataFrame(
        {
            "task_id": [1, 1, 2],
            "rater": ["a", "b", "a"],
            "final_correctness": [2.0, 0.0, 1.0],
            "harm_potential": [2.0, 2.0, np.nan],
        }
    )
    expected = {1: {"final_correctness": 2, "harm_potential": 2}, 2: {"final_correctness": 2, "harm_potential": 0}}
    table = gold_accuracy(gold, expected)
    assert table.loc["a", "gold_tasks"] == 2 and table.loc["a", "gold_scores"] == 3
    assert table.loc["a", "gold_accuracy"] == pytest.approx(2 / 3)
    assert table.loc["a", "gold_within_one"] == 1
    assert table.loc["b", "gold_accuracy"] == 0.5 and table.loc["b", "gold_within_one"] == 0.5

    seconds = pd.DataFrame({"rater": ["a"] * 20 + ["b"] * 20, "seconds_on_task": [100.0] * 19 + [2.0] + [90.0] * 20})
    timing = time_on_task(seconds)
    assert timing.loc["a", "n_too_fast"] == 1 and timing.loc["b", "n_too_fast"] == 0
    assert timing.loc["b", "median_seconds"] == 90


def test_gold_alert_needs_enough_gold_tasks() -> None:
    study = synthetic_study(2, tasks=90)
    first = study.loc[study["rater"] == "R01"].head(6)
    expected = {int(t): {"final_correctness": 0, "injection_uptake": 0} for t in first["task_id"]}
    wrong = first.assign(final_correctness=2.0, injection_uptake=2.0)
    report = reviewer_quality(
        study, gold_annotations=wrong, expected=expected, thresholds=QualityThresholds(min_gold=6)
    )
    assert [(a.rater, a.kind) for a in report.alerts] == [("R01", "gold")]
    quiet = reviewer_quality(study, gold_annotations=wrong, expected=expected, thresholds=QualityThresholds(min_gold=7))
    assert not quiet.alerts


def test_thresholds_are_validated() -> None:
    with pytest.raises(AnalysisInputError, match="false-alarm"):
        QualityThresholds(drift_alpha=0)
    with pytest.raises(AnalysisInputError, match="gold accuracy"):
        QualityThresholds(gold_accuracy_min=1.5)
    assert QualityThresholds.from_dict({"drift_alpha": 0.05}).drift_alpha == 0.05


def test_a_study_without_ratings_gives_an_empty_report() -> None:
    empty = synthetic_study(1, tasks=10).iloc[0:0]
    report = reviewer_quality(empty)
    assert report.table.empty and not report.alerts and not report.cusum
    assert any("two reviewers" in note for note in report.notes)


def test_per_third_input_is_the_study_fits_input_with_reviewer_thirds_as_groups() -> None:
    """The per-third refit takes the study fit's input with its rater column renamed: exactly the table
    built from the relabelled annotations, so the refit's numbers are the same as before."""
    from review_app.analysis.reviewer_quality import _period_data

    study = synthetic_study(5, tasks=200).sample(frac=1.0, random_state=3)  # rows not in annotation order
    spec = HarmModelSpec(unrated="level")
    periods = work_periods(study)
    labelled = study.assign(rater=study["rater"].astype(str) + "|" + periods.astype(str))
    built = spec.data(labelled)
    reused = _period_data(study, periods, spec, spec.data(study))
    pd.testing.assert_frame_equal(reused, built, check_exact=True)
    # Without the study fit's input, or when it cannot be matched by annotation id, it is built as before.
    pd.testing.assert_frame_equal(_period_data(study, periods, spec, None), built, check_exact=True)
    no_ids = study.drop(columns="annotation_id")
    pd.testing.assert_frame_equal(
        _period_data(no_ids, periods, spec, spec.data(no_ids)),
        spec.data(no_ids.assign(rater=no_ids["rater"].astype(str) + "|" + periods.astype(str))),
        check_exact=True,
    )
