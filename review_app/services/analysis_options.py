"""A study's analysis choices, stored with the study so every page and the export use the same ones.

:class:`AnalysisOptions` holds the harm model's reference levels, the mean-reviewer tie rule, whether
items without a clarity score enter the harm model as a level, and the opt-in penalised fit; the
defaults are the paper's (docs/methods.md, "The harm model"). They live in
``Study.settings["analysis"]``; only a lead of the study or an admin changes them, audited with the
before and after. The harm model's default reference for the model term is the study's first model
(:func:`first_model`), so the spec a study's harm model is fitted under is :func:`harm_spec`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session, select

from review_app.analysis import AnalysisInputError
from review_app.analysis.harm_model import Penalty
from review_app.analysis.rubric_b import DEFAULT_TIE_RULE, TIE_RULES
from review_app.analysis.study_harm_model import HARM_MODEL_FIXED, UNRATED_CHOICES, HarmModelSpec
from review_app.db.engine import read_session, write_session
from review_app.db.models import ModelResponse, Reviewer, Study, Task
from review_app.services import audit
from review_app.services.actors import LEAD_ROLES, SYSTEM, Actor, acting_actor, acting_user, require_study_lead
from review_app.services.annotations import get_study_row
from review_app.services.errors import InvalidInput, PermissionDenied, SessionEnded
from review_app.services.studies import lead_of

SETTINGS_KEY = "analysis"


@dataclass(frozen=True)
class AnalysisOptions:
    """A study's analysis choices; the defaults reproduce the paper's analysis.

    ``references`` holds only the levels the lead chose (factor -> level); every other factor takes
    the paper's reference (cue remapping, neutral, clear, the study's first model). ``tie_rule`` breaks
    mean-reviewer ties (``less_safe``, ``safer`` or ``exclude``). ``unrated``: ``exclude`` leaves
    annotations on items without a clarity score out of the harm model (counted), ``level`` keeps
    them as a clarity level. ``penalty``: ``none`` (maximum likelihood) or a prior such as ``normal``.
    """

    references: dict[str, str] = field(default_factory=dict)
    tie_rule: str = DEFAULT_TIE_RULE
    unrated: str = "exclude"
    penalty: str = "none"

    def __post_init__(self) -> None:
        unknown = sorted(set(self.references) - set(HARM_MODEL_FIXED))
        if unknown:
            raise InvalidInput(
                f"reference level set for {', '.join(unknown)}; the harm model's factors are "
                f"{', '.join(HARM_MODEL_FIXED)}"
            )
        if any(not isinstance(v, str) or not v.strip() for v in self.references.values()):
            raise InvalidInput("a reference level must be a non-empty level name")
        if self.tie_rule not in TIE_RULES:
            raise InvalidInput(f"unknown tie rule {self.tie_rule!r}; choose one of {', '.join(TIE_RULES)}")
        if self.unrated not in UNRATED_CHOICES:
            raise InvalidInput(
                f"unknown handling of unrated items {self.unrated!r}; choose {', '.join(UNRATED_CHOICES)}"
            )
        try:
            canonical = Penalty.parse(self.penalty).key
        except AnalysisInputError as error:
            raise InvalidInput(str(error)) from None
        object.__setattr__(self, "penalty", canonical)
        object.__setattr__(self, "references", {k: v.strip() for k, v in sorted(self.references.items())})

    @classmethod
    def from_settings(cls, settings: dict[str, Any] | None) -> AnalysisOptions:
        """The options stored in a study's settings (defaults when none were saved)."""
        stored = dict((settings or {}).get(SETTINGS_KEY) or {})
        known = {k: stored[k] for k in ("references", "tie_rule", "unrated", "penalty") if k in stored}
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def key(self) -> str:
        """A stable text form (cache keys)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    def harm_spec(self, first_model: str | None) -> HarmModelSpec:
        """The harm-model spec these options give a study whose first model is ``first_model``."""
        return HarmModelSpec(dict(self.references), first_model, self.unrated, self.penalty)


def first_model(session: Session, study_id: int) -> str | None:
    """The study's first model: the model of the earliest imported response among its tasks.

    It is the harm model's default reference for the model term (the paper lists its models in
    import order and compares against the first), settable by the lead.
    """
    # Responses in id order, each probing its tasks (ix_task_response_id) until one is the study's:
    # a join sorted 1,000,000 tasks' responses (0.37 s on every lead rerun).
    of_study = select(Task.id).where(Task.response_id == ModelResponse.id, Task.study_id == study_id).exists()
    return session.exec(select(ModelResponse.model).where(of_study).order_by(ModelResponse.id).limit(1)).first()


def harm_spec(session: Session, study: Study) -> HarmModelSpec:
    """The harm-model spec of a study: its saved analysis options and its first model."""
    return AnalysisOptions.from_settings(study.settings).harm_spec(first_model(session, study.id))


def analysis_options(engine: Engine, study_name: str, *, actor: Actor = SYSTEM) -> AnalysisOptions:
    """The analysis choices saved for a study (the paper's defaults when none were saved), for a lead of it."""
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        lead_of(session, actor, study)
        return AnalysisOptions.from_settings(study.settings)


def save_analysis_options(
    engine: Engine,
    study_name: str,
    options: AnalysisOptions,
    *,
    actor: Actor | Reviewer | int | None = None,
    actor_id: int | None = None,
) -> AnalysisOptions:
    """Store a study's analysis choices (a lead of the study, or an admin); audited with the before and after.

    ``actor_id=`` is the older spelling of ``actor=`` (an account id).
    """
    acting = acting_actor(actor, actor_id)
    with write_session(engine) as session:
        try:
            me = acting_user(session, acting, roles=LEAD_ROLES)
        except SessionEnded:
            raise
        except PermissionDenied:
            raise PermissionDenied("only an active study lead or admin can change the analysis settings") from None
        study = get_study_row(session, study_name)
        require_study_lead(session, me, study)
        before = AnalysisOptions.from_settings(study.settings)
        settings = dict(study.settings)
        settings[SETTINGS_KEY] = options.to_dict()
        study.settings = settings
        session.add(study)
        audit.record(
            session,
            actor_id=me.id if me is not None else None,
            action="study.analysis_options",
            entity="study",
            entity_id=study.id,
            study_id=study.id,
            before=before.to_dict(),
            after=options.to_dict(),
        )
    return options
