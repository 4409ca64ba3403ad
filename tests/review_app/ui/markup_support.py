"""A review task whose model response carries markup, for the checks that model output stays inert."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import Assignment, ModelResponse, Task
from review_app.services import assignment, studies
from review_app.services.actors import SYSTEM


def markup_assignment(engine: Engine, username: str = "rev01") -> int:
    """``username``'s assignment on the demo response holding ``<script>`` and a remote image.

    A study "inert" of its own holds it: its pool is every type1 response of that model, so that
    response is in it, rated by ``username`` alone.
    """
    with read_session(engine) as session:
        response = session.exec(select(ModelResponse).where(ModelResponse.response_text.contains("<script>"))).one()
    studies.create_study(engine, "inert", rubrics=["B"], actor=SYSTEM)
    quota = studies.parse_quota(f"model={response.model}:1")
    studies.draw_pool(engine, "inert", 47, quotas=[quota], seed=1, actor=SYSTEM)
    assignment.enrol(engine, "inert", [username], actor=SYSTEM)
    assignment.assign(engine, "inert", raters=1, actor=SYSTEM)
    with read_session(engine) as session:
        return session.exec(
            select(Assignment.id).join(Task, Task.id == Assignment.task_id).where(Task.response_id == response.id)
        ).one()
