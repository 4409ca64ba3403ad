"""Judge audit: retracted-paper traces imported as tasks, clinicians' labels against the judge's."""

from pathlib import Path

import pytest
from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import Assignment, ModelResponse, Task
from review_app.rubrics import ScoreSheet
from review_app.services import assignment, importing, reviewing, studies
from review_app.services.actors import SYSTEM
from review_app.services.judge_audit import judge_audit_summary

from .factories import add_users

DEMO_TROJAN = Path(__file__).resolve().parents[2] / "review_app" / "demo_data" / "trojan"


def _gwet_ac1(pairs: list[tuple[int, int]], categories=(-1, 0, 1)) -> float:
    """Gwet's AC1 for two raters, written out independently of the analysis package."""
    n = len(pairs)
    pa = sum(a == b for a, b in pairs) / n
    pi = {k: (sum(a == k for a, _ in pairs) + sum(b == k for _, b in pairs)) / (2 * n) for k in categories}
    pe = sum(p * (1 - p) for p in pi.values()) / (len(categories) - 1)
    return (pa - pe) / (1 - pe)


@pytest.fixture
def audit(engine):
    assert importing.detect_kind(DEMO_TROJAN) == "judge"
    records, responses = importing.import_path(engine, DEMO_TROJAN, actor=SYSTEM)
    assert (records.kind, records.new, responses.new) == ("records", 6, 12)
    assert [s.unchanged for s in importing.import_path(engine, DEMO_TROJAN, actor=SYSTEM)] == [6, 12]
    add_users(engine, 2)
    studies.create_study(engine, "audit", rubrics=["judge"], actor=SYSTEM)
    assert (
        studies.draw_pool(engine, "audit", 12, seed=1, actor=SYSTEM).tasks == 12
    )  # every trace, both models per record
    assignment.assign(engine, "audit", raters=1, dual_share=0.0, actor=SYSTEM)
    return engine


def test_judge_audit_agreement_and_confusion(audit):
    engine = audit
    with read_session(engine) as session:
        rows = session.exec(
            select(Assignment, ModelResponse)
            .join(Task, Task.id == Assignment.task_id)
            .join(ModelResponse, ModelResponse.id == Task.response_id)
            .order_by(Assignment.id)
        ).all()
    pairs = []
    for n, (a, response) in enumerate(rows):
        judge = response.payload["judge_label"]
        clinician = judge if n % 4 else (judge + 1 if judge < 1 else -1)  # every fourth disagrees
        sheet = ScoreSheet(rubric="judge", scores={"clinician_label": clinician, "confidence": 2})
        reviewing.submit(engine, a.id, a.reviewer_id, sheet, client_token=f"t{a.id}", base_revision=0)
        pairs.append((judge, clinician))
    summary = judge_audit_summary(engine, "audit")
    assert summary.n_pairs == 12 and summary.n_flagged == 0
    assert summary.percent_agreement == pytest.approx(9 / 12)
    assert summary.agreement.coefficient == pytest.approx(_gwet_ac1(pairs), abs=1e-9)
    assert int(summary.confusion.to_numpy().sum()) == 12
    assert int(summary.confusion.to_numpy().trace()) == 9
    assert len(summary.disagreements) == 3 and set(summary.disagreements["judge"]) <= {
        "recognized",
        "neutral",
        "polluted",
    }
    assert "AC1" in summary.summary()


def test_judge_audit_task_shows_the_study_the_response_and_the_judge(audit):
    engine = audit
    with read_session(engine) as session:
        a = session.exec(select(Assignment).order_by(Assignment.id)).first()
    view = reviewing.open_task(engine, a.id, a.reviewer_id)
    assert view.rubric == "judge"
    assert view.material.retracted["title"] and view.material.retracted["note"]
    assert view.material.response_text and view.material.judge["label"] in (-1, 0, 1)
    assert "model" not in repr(view.material.judge)


def test_import_command_creates_a_judge_audit_study(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from review_app.cli import app
    from review_app.db.connect import dispose_engines, get_engine
    from review_app.db.models import Study

    monkeypatch.setenv("MEDREV_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    try:
        result = CliRunner().invoke(app, ["review", "import", str(DEMO_TROJAN), "--study", "Audit"])
        assert result.exit_code == 0, result.output
        assert "created study 'Audit' (judge audit)" in result.output
        with read_session(get_engine()) as session:
            assert session.exec(select(Study)).one().rubrics == "judge"
    finally:
        dispose_engines()
