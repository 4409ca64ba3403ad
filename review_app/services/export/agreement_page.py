"""The Agreement page's numbers and tables for one choice of weights and minimum ratings, cached per data version.

Computed in the compute worker (``compute_workers``) and shared by every session through the study cache
(``study_cache``), so that a lead's rerun does not hold up the reviewers served by the same process; the
tables themselves are :func:`review_app.services.export.paper.agreement_tables`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine

from review_app.services import cached_analyses, compute_workers, studies, study_analysis
from review_app.services.actors import SYSTEM, Actor
from review_app.services.export.paper import PaperTable, agreement_tables
from review_app.services.study_analysis import StudyAgreement
from review_app.services.study_cache import CACHE


@dataclass(frozen=True, eq=False)
class AgreementPage:
    """What the Agreement page shows for one choice of weights and minimum ratings: numbers and tables."""

    result: StudyAgreement
    tables: tuple[PaperTable, ...]


def cached_agreement_page(
    engine: Engine,
    study_name: str,
    *,
    weights: str = study_analysis.AGREEMENT_WEIGHTS,
    min_ratings: int = study_analysis.MIN_RATINGS,
    actor: Actor = SYSTEM,
) -> AgreementPage:
    """The study's agreement and its paper tables (CSV written), once per data version, shared by every session.

    Built in the compute worker with the numbers: built in the app, the tables and their CSV files
    would cost Python time on every rerun that reviewers' requests to the same server wait for, and
    while reviewers submit every rerun is a new data version. ``actor`` must lead the study (checked
    before a cached page is served).
    """
    studies.check_lead_of(engine, study_name, actor=actor)
    cached_analyses.check_agreement_options(weights, min_ratings)
    rubrics, version = cached_analyses.rubrics_and_version(engine, study_name)

    def compute(version: tuple[int, ...]) -> AgreementPage:
        return compute_workers.run(engine, _agreement_page_job, study_name, version, rubrics, weights, int(min_ratings))

    key = ("agreement_page", weights, int(min_ratings))
    return CACHE.get(engine, study_name, key, compute, current_version=version)


def _agreement_page_job(
    engine: Engine, study_name: str, version: tuple[int, ...], rubrics: list[str], weights: str, min_ratings: int
) -> AgreementPage:
    """The Agreement page of the frame of ``version`` (a compute-worker job)."""
    result = cached_analyses.agreement_of_version(engine, study_name, version, rubrics, weights, min_ratings)
    tables = tuple(agreement_tables(result))
    for table in tables:
        table.csv_bytes()  # written here: the file travels with the table (its cached property)
    return AgreementPage(result, tables)
