"""The demo study's harm model is one a new lead can read: it converges and every standard error is finite.

A harm model with separated levels (a content type without a worst case, a clarity stratum with
one annotation) is reported as "not estimable", which is no way to meet the app. The demo simulates
reviews with item-level falsehood clarity, reviewer severity and a 45-item pool, so every level of
every factor has worst-case and other outcomes. Checked at the service level, on a freshly seeded demo.
"""

from __future__ import annotations

import math

from review_app.db.connect import dispose_engines, get_engine
from review_app.demo import DEMO_JUDGE_STUDY, DEMO_STUDY, seed_demo
from review_app.services.judge_audit import judge_audit_summary
from review_app.services.study_analysis import study_analysis


def test_demo_harm_model_converges_with_every_standard_error_finite(tmp_path):
    report = seed_demo(tmp_path / "demo.db")
    try:
        engine = get_engine(report.url)
        analysis = study_analysis(engine, DEMO_STUDY, n_boot=50)
        model = analysis.harm_model
        assert model is not None, analysis.notes
        assert model.converged
        assert not model.separated_terms, model.separation_notes()
        assert all(t.estimable and math.isfinite(t.se) and t.se > 0 for t in model.terms), model.to_frame()
        assert not [w for w in model.warnings if w.startswith("separation:")]
        levels = analysis.factor_levels()
        assert len(levels["stratum"]) == 3 and len(levels["content_type"]) == 5  # every level is in the model
        used = analysis.harm_input[analysis.harm_input["in_model"].astype(bool)]
        for column in ("model", "content_type", "provenance", "stratum"):
            events = used.groupby(column)["worst_case"].agg(["sum", "count"])
            assert ((events["sum"] > 0) & (events["sum"] < events["count"])).all(), events

        audit = judge_audit_summary(engine, DEMO_JUDGE_STUDY)
        assert audit.n_pairs > 0 and 0 < len(audit.disagreements) < audit.n_pairs  # the demo judge is not perfect
        assert list(audit.by_confidence["confidence"]) == [0, 1, 2]
    finally:
        dispose_engines()
