"""The per-study cache of lead numbers: fresh after every write, one copy shared by sessions, bounded."""

from __future__ import annotations

import threading

import pandas as pd
import pytest

from review_app.services import (
    adjudication_decisions,
    assignment,
    compute_workers,
    gold_tasks,
    reviewer_monitoring,
    reviewing,
    studies,
)
from review_app.services.actors import SYSTEM
from review_app.services.cached_analyses import cached_analysis, cached_rubric_a_intervals, study_agreement
from review_app.services.export.agreement_page import cached_agreement_page
from review_app.services.study_analysis import study_analysis
from review_app.services.study_cache import CACHE, StudyCache, data_version
from review_app.services.study_frames import study_frame

from .factories import add_users, b, rate, seed_items, seed_responses, slots_by_task

SAFE, WORST = b(2, 2, 2, 2), b(0, 0, 0, 0)


@pytest.fixture(autouse=True, params=["worker", "in_process"])
def empty_cache(request, monkeypatch):
    """Every test with the statistics computed in a worker process and in this one (MEDREV_COMPUTE_WORKERS=0)."""
    monkeypatch.setenv(compute_workers.WORKERS_SETTING, "1" if request.param == "worker" else "0")
    CACHE.clear()
    yield
    CACHE.clear()


@pytest.fixture
def study(engine, tmp_path):
    return make_study(engine, tmp_path)


def make_study(engine, tmp_path):
    """Study "main" (rubrics A and B), every task assigned to two reviewers, half of them rated."""
    items = seed_items(engine, tmp_path, 8, subsets=("MEDMISQA",))
    seed_responses(engine, tmp_path, items, models=("model-a",))
    add_users(engine, 4)
    (lead,) = add_users(engine, 1, prefix="lead", role="lead")
    studies.create_study(engine, "main", rubrics=["B"], actor=SYSTEM)
    studies.set_study_lead(engine, "main", lead.username, actor=SYSTEM)
    studies.draw_pool(engine, "main", 8, seed=2, actor=SYSTEM)
    assignment.assign(engine, "main", raters=2, dual_share=1.0, actor=SYSTEM)
    slots = sorted(slots_by_task(engine, "main", "B").items())
    for k, (_task, task_slots) in enumerate(slots[:4]):
        for n, slot in enumerate(task_slots):
            rate(engine, slot, WORST if (k + n) % 3 == 0 else SAFE)
    return engine, lead, slots


def _same_numbers(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))


def test_a_submit_changes_the_cached_agreement(study):
    engine, _lead, slots = study
    before = cached_agreement_page(engine, "main").result
    assert cached_agreement_page(engine, "main").result is before  # a rerun with no write reuses it
    version = data_version(engine, "main")
    task, task_slots = slots[4]
    rate(engine, task_slots[0], WORST)
    rate(engine, task_slots[1], SAFE)
    assert data_version(engine, "main") != version
    after = cached_agreement_page(engine, "main").result
    assert after is not before
    harm = after.reports["B"]["harm_potential"]
    assert harm.n_units == before.reports["B"]["harm_potential"].n_units + 1 == 5
    _same_numbers(after.frame(), study_agreement(engine, "main").frame())  # what an uncached read gives
    analysis = cached_analysis(engine, "main")
    reference = study_analysis(engine, "main", n_boot=0)
    assert task in set(reference.annotations["task_id"])
    _same_numbers(analysis.agreement_frame(), reference.agreement_frame())
    _same_numbers(analysis.rubric_b.to_frame(), reference.rubric_b.to_frame())


def test_an_edit_a_flag_and_a_gold_mark_each_move_the_version(study):
    engine, lead, slots = study
    first = study_frame(engine, "main")
    # An edit is a new revision of the same assignment: same count of rows in force, new numbers.
    slot = slots[0][1][0]
    current = reviewing.open_task(engine, slot.id, slot.reviewer_id).submitted
    rate(engine, slot, b(1, 1, 1, 1), base_revision=current.revision)
    edited = study_frame(engine, "main")
    assert edited is not first and len(edited) == len(first)
    assert (edited["harm_potential"] == 1).sum() == 1
    reviewing.set_flag(engine, slot.id, slot.reviewer_id, True)
    flagged = study_frame(engine, "main")
    assert flagged is not edited and flagged["flagged"].sum() == 1
    reviewing.set_flag(engine, slot.id, slot.reviewer_id, False)
    assert study_frame(engine, "main")["flagged"].sum() == 0
    # Adjudication and gold tasks change the version (and gold tasks leave the analysed frame).
    version = data_version(engine, "main")
    adjudication_decisions.auto_unanimous(engine, "main", "B", lead_id=lead.id)
    assert data_version(engine, "main") != version


def test_one_copy_shared_by_concurrent_sessions(study):
    engine, _lead, _slots = study
    results, errors = [], []

    def open_page() -> None:
        try:
            results.append(cached_agreement_page(engine, "main").result)
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=open_page) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert all(r is results[0] for r in results)  # one object, computed once, for every session
    stats = CACHE.stats()
    assert stats.studies == 1
    # the agreement once; with no compute worker, the frame and the computation the agreement and
    # Agreement-page jobs share (agreement_of_version) are filed here too, else in the worker
    assert stats.misses == (3 if compute_workers.in_process(engine) else 1)
    assert stats.hits >= 5
    analysis = cached_analysis(engine, "main")  # carries the frame's columns, not its rows (the app holds none)
    assert analysis.annotations.empty
    assert list(analysis.annotations.columns) == list(study_frame(engine, "main").columns)
    # the page's copy: the numbers the page shows, without the per-row tables no page shows
    full = study_analysis(engine, "main", n_boot=0)
    assert analysis.rubric_b.tasks.empty and not full.rubric_b.tasks.empty
    assert analysis.rubric_b.to_frame().equals(full.rubric_b.to_frame())
    if full.rubric_a is not None:
        assert analysis.rubric_a.to_frame().equals(full.rubric_a.to_frame())
    assert analysis.factor_levels() == full.factor_levels()
    assert analysis.default_references() == full.default_references()
    assert (~analysis.harm_input["in_model"]).sum() == (~full.harm_input["in_model"]).sum()


def test_bootstrap_only_on_request_once_per_version(engine, tmp_path):
    items = seed_items(engine, tmp_path, 6, subsets=("MEDMISQA",))
    seed_responses(engine, tmp_path, items, models=("model-a",))
    add_users(engine, 3)
    studies.create_study(engine, "a", rubrics=["A"], actor=SYSTEM)
    studies.draw_pool(engine, "a", 6, seed=1, actor=SYSTEM)
    assignment.assign(engine, "a", raters=2, dual_share=1.0, actor=SYSTEM)
    for k, (_task, task_slots) in enumerate(sorted(slots_by_task(engine, "a", "A").items())):
        for slot in task_slots:
            rate(engine, slot, {key: (k + slot.slot) % 3 for key in _rubric_a_keys()})
    analysis = cached_analysis(engine, "a")
    assert analysis.rubric_a.composite_ci.low is None  # the page's default view runs no resample
    seen: list[float] = []
    summary = cached_rubric_a_intervals(engine, "a", n_boot=300, progress=seen.append)
    assert summary.composite_ci.low is not None and summary.composite_ci.n_boot == 300
    assert seen and seen[-1] == 1.0 and seen == sorted(seen)
    reference = study_analysis(engine, "a", n_boot=300).rubric_a
    assert summary.to_frame().equals(reference.to_frame())
    again: list[float] = []
    assert cached_rubric_a_intervals(engine, "a", n_boot=300, progress=again.append) is summary
    assert again == []  # cached: no resampling on the next view


def _rubric_a_keys() -> list[str]:
    from review_app.rubrics import get_rubric

    return list(get_rubric("A").dimension_keys)


def test_quality_report_is_cached_and_refreshed(study):
    engine, lead, slots = study
    first = reviewer_monitoring.cached_quality_report(engine, lead, "main")
    assert reviewer_monitoring.cached_quality_report(engine, lead, "main") is first
    rate(engine, slots[5][1][0], SAFE)
    second = reviewer_monitoring.cached_quality_report(engine, lead, "main")
    assert second is not first
    assert second.table()["n_annotations"].sum() == first.table()["n_annotations"].sum() + 1


def test_bounded_by_studies_and_bytes():
    frames = {name: pd.DataFrame({"x": range(1000 * (k + 1))}) for k, name in enumerate("abc")}

    class Url:
        def render_as_string(self, hide_password: bool = True) -> str:
            return "sqlite:///bound-test"

    class FakeEngine:  # only the cache key is read from it; the version is given
        url = Url()

    engine = FakeEngine()
    cache = StudyCache(max_studies=2, max_bytes=10**9)
    for name, frame in frames.items():
        cache.get(engine, name, "frame", lambda _v, frame=frame: frame, version=(1,))
    assert cache.stats().studies == 2
    assert cache.get(engine, "a", "frame", lambda _v: "recomputed", version=(1,)) == "recomputed"  # a was evicted
    small = StudyCache(max_studies=10, max_bytes=20_000)  # room for one of the larger frames only
    for name, frame in frames.items():
        small.get(engine, name, "frame", lambda _v, frame=frame: frame, version=(1,))
    stats = small.stats()
    assert stats.studies == 1 and stats.nbytes >= 24_000  # the study just read stays, even alone over the bound
    # A new version of a study replaces its values: one copy per study.
    small.get(engine, "c", "frame", lambda _v: frames["a"], version=(2,))
    small.get(engine, "c", "other", lambda _v: 1, version=(2,))
    assert small.stats().studies == 1 and small.stats().values == 2
    per_study = StudyCache(max_values=3)
    for k in range(5):
        per_study.get(engine, "a", ("agreement", k), lambda _v, k=k: k, version=(1,))
    assert per_study.stats().values == 3


def test_a_new_version_s_frame_is_patched_from_the_last_and_equals_a_full_read(study, monkeypatch):
    """While reviewers submit, the frame of each new version is the last one with the rated tasks read again.

    After every kind of write, the cached frame equals an uncached full read cell for cell; only
    writes that change rows in place (a flag) or remove rows (a deletion) read the frame whole.
    """
    from review_app.services import study_frames
    from review_app.services.annotations import annotations_frame

    engine, _lead, slots = study
    full_reads = []
    real = study_frames.load_annotations

    def spy(*args, **kwargs):
        if kwargs.get("task_ids") is None:
            full_reads.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(study_frames, "load_annotations", spy)

    def check(**kwargs) -> pd.DataFrame:
        cached = study_frame(engine, "main", **kwargs)
        pd.testing.assert_frame_equal(cached, annotations_frame(engine, "main", **kwargs))
        return cached

    check()
    check(pseudonymise=False, gold="include")
    assert len(full_reads) == 2
    rate(engine, slots[4][1][0], WORST)  # a new task gets its first rating
    rate(engine, slots[4][1][1], SAFE)
    rate(engine, slots[5][1][1], SAFE)
    patched = check()
    assert len(patched) == 11 and len(full_reads) == 2
    check(pseudonymise=False, gold="include")
    slot = slots[0][1][0]  # an edit: a new revision replaces the row in force
    current = reviewing.open_task(engine, slot.id, slot.reviewer_id).submitted
    rate(engine, slot, b(1, 1, 1, 1), base_revision=current.revision)
    edited = check()
    assert len(edited) == 11 and (edited["harm_potential"] == 1).sum() == 1 and len(full_reads) == 2
    reviewing.set_flag(engine, slot.id, slot.reviewer_id, True)  # changes a row in place: read whole
    assert check()["flagged"].sum() == 1 and len(full_reads) == 3
    rate(engine, slots[6][1][0], SAFE)  # and patched again from there
    check()
    assert len(full_reads) == 3


def test_a_patch_never_renumbers_raters_nor_misses_a_row(study):
    """No patch when pseudonyms would change (a reviewer joined and the numbering widened) or rows went missing."""
    from dataclasses import replace

    from review_app.services.study_frames import read_frame

    engine, _lead, slots = study
    last = read_frame(engine, "main")
    assert last.version == data_version(engine, "main")
    assert read_frame(engine, "main", last) is last  # nothing new: the same frame
    rate(engine, slots[4][1][0], SAFE)
    patched = read_frame(engine, "main", last)
    assert patched.version == data_version(engine, "main") and len(patched.frame) == len(last.frame) + 1
    renamed = replace(last, labels={reviewer: label.replace("R", "R0") for reviewer, label in last.labels.items()})
    assert read_frame(engine, "main", renamed).frame.equals(patched.frame)  # read whole, same rows
    # counters that say more annotations came than the new ids show (rows were removed): read whole
    version = list(last.version)
    version[2] -= 1
    assert read_frame(engine, "main", replace(last, version=tuple(version))).frame.equals(patched.frame)


def test_a_frame_is_filed_under_the_version_it_shows(study, monkeypatch):
    """A submit between the page's version read and the frame's read: the frame is not filed under the older version."""
    from review_app.services import study_frames

    engine, _lead, slots = study
    before = data_version(engine, "main")
    real = study_frames.read_frame
    writes = [lambda: rate(engine, slots[4][1][0], SAFE)]

    def submit_first(*args, **kwargs):
        while writes:
            writes.pop()()
        return real(*args, **kwargs)

    monkeypatch.setattr(study_frames, "read_frame", submit_first)
    frame = study_frame(engine, "main")  # the cache read the version, then a reviewer submitted
    assert len(frame) == 9 and data_version(engine, "main") != before
    assert CACHE.latest(engine, "main", ("frame", True, "exclude"))[0] == data_version(engine, "main")


def test_a_snapshot_session_does_not_see_writes_committed_during_it(study):
    """The frame and its version are read in one snapshot: a submit committed between the two reads is in neither."""
    from review_app.db.engine import snapshot_session
    from review_app.services.annotations import get_study_row, load_annotations
    from review_app.services.study_cache import version_in

    engine, _lead, slots = study
    with snapshot_session(engine) as session:
        study_row = get_study_row(session, "main")
        version = version_in(session, study_row)
        rate(engine, slots[4][1][0], SAFE)  # committed by another session meanwhile
        rows = load_annotations(session, study_row)
        assert version_in(session, study_row) == version
    assert len(rows) == 8 and data_version(engine, "main") != version


def test_quality_frames_are_the_shared_frame_renamed_and_the_gold_tasks_read_by_id(study, monkeypatch):
    """The quality report reads no second copy of the study: the shared (pseudonymised) frame renamed to
    usernames is exactly the frame read under usernames, and the gold tasks' annotations read by task id
    are exactly the whole-study ``gold="only"`` read, as is the fallback beyond GOLD_BY_ID_MAX."""
    from review_app.services import study_frames
    from review_app.services.annotations import annotations_frame, rater_names

    engine, lead, slots = study
    gold_task, gold_slots = slots[6]
    gold_tasks.mark_gold(engine, lead, "main", gold_task, expected_scores=WORST)
    rate(engine, gold_slots[0], SAFE)
    usernames = study_frames.study_rater_labels(engine, "main", pseudonymise=False)
    pseudonyms = study_frames.study_rater_labels(engine, "main")
    assert usernames == rater_names(engine, "main", pseudonymise=False)
    assert pseudonyms == rater_names(engine, "main") and list(pseudonyms) == list(rater_names(engine, "main"))
    renamed = study_frames.relabelled(study_frame(engine, "main"), pseudonyms, usernames)
    pd.testing.assert_frame_equal(renamed, annotations_frame(engine, "main", pseudonymise=False), check_exact=True)
    whole = annotations_frame(engine, "main", pseudonymise=False, gold="only")
    assert len(whole) == 1
    gold = study_frame(engine, "main", pseudonymise=False, gold="only")
    pd.testing.assert_frame_equal(gold, whole, check_exact=True)
    monkeypatch.setattr(study_frames, "GOLD_BY_ID_MAX", 0)
    fallback = study_frames.gold_frame(engine, "main", pseudonymise=False)
    pd.testing.assert_frame_equal(fallback, whole, check_exact=True)
    # The cached report (those frames) gives the same numbers as the uncached one (two reads in one transaction).
    cached, direct = (
        reviewer_monitoring.cached_quality_report(engine, lead, "main"),
        reviewer_monitoring.quality_report(engine, lead, "main"),
    )
    pd.testing.assert_frame_equal(cached.table(), direct.table(), check_exact=True)
    assert cached.quality.alerts == direct.quality.alerts and cached.pseudonyms == direct.pseudonyms
    assert cached.table()["gold_tasks"].sum() == 1


def test_long_lists_are_measured_on_a_sample():
    from review_app.services.study_cache import SAMPLED_ABOVE, nbytes

    rows = [pd.DataFrame({"x": range(10)}) for _ in range(SAMPLED_ABOVE * 5)]
    one = nbytes(rows[0])
    assert nbytes(rows) == 64 + one * len(rows)  # equal elements: the sample's mean is exact
    assert nbytes(rows[:SAMPLED_ABOVE]) == 64 + one * SAMPLED_ABOVE


def test_a_patch_whose_rated_task_has_no_row_in_the_frame(study):
    """A submit on a gold task: the ordinary frame's patch reads that task again and finds no row for it."""
    from review_app.services.annotations import annotations_frame

    engine, lead, slots = study
    gold_task, gold_slots = slots[6]
    gold_tasks.mark_gold(engine, lead, "main", gold_task, expected_scores=WORST)
    before = study_frame(engine, "main")
    rate(engine, gold_slots[0], SAFE)
    after = study_frame(engine, "main")
    pd.testing.assert_frame_equal(after, annotations_frame(engine, "main"), check_exact=True)
    pd.testing.assert_frame_equal(after, before, check_exact=True)
    assert CACHE.latest(engine, "main", ("frame", True, "exclude"))[0] == data_version(engine, "main")


def test_a_submit_after_the_agreement_page_read_its_version_gives_the_newer_agreement(study, monkeypatch):
    """The page reads rubrics and version together, then a fifth task gets both its ratings before the
    frame is read: the frame's read finds a newer version, and the page gets agreement on the newer
    data (5 tasks, not the 4 of the version it read first), not an error."""
    from review_app.services import cached_analyses

    engine, _lead, slots = study
    real = cached_analyses.rubrics_and_version
    read_before: list[tuple] = []

    def then_both_ratings(*args, **kwargs):
        read = real(*args, **kwargs)
        read_before.append(read[1])
        rate(engine, slots[4][1][0], SAFE)
        rate(engine, slots[4][1][1], WORST)
        return read

    monkeypatch.setattr(cached_analyses, "rubrics_and_version", then_both_ratings)
    result = cached_agreement_page(engine, "main").result
    assert read_before[0] != data_version(engine, "main")
    assert result.frame()["n_units"].max() == 5
    _same_numbers(result.frame(), study_agreement(engine, "main").frame())


def test_the_agreement_page_s_tables_come_with_its_numbers_and_change_after_a_submit(study):
    """The Agreement page's tables (built in the worker with the numbers) are those of the current data."""
    from review_app.services.export.agreement_page import cached_agreement_page
    from review_app.services.export.paper import agreement_tables

    engine, _lead, slots = study

    def same_tables(page) -> None:
        expected = agreement_tables(study_agreement(engine, "main"))
        assert [t.key for t in page.tables] == [t.key for t in expected]
        for got, want in zip(page.tables, expected, strict=True):
            _same_numbers(got.frame, want.frame)
            assert got.csv_bytes() == want.csv_bytes() and got.latex == want.latex and got.caption == want.caption

    before = cached_agreement_page(engine, "main")
    same_tables(before)
    _same_numbers(before.result.frame(), study_agreement(engine, "main").frame())
    assert cached_agreement_page(engine, "main") is before  # a rerun with no write: the shared copy
    rate(engine, slots[4][1][0], WORST)
    rate(engine, slots[4][1][1], SAFE)
    after = cached_agreement_page(engine, "main")
    assert after is not before and after.result.frame()["n_units"].max() == 5
    same_tables(after)
    assert before.tables[0].csv_bytes() != after.tables[0].csv_bytes()


def test_the_agreement_and_analysis_pages_compute_agreement_once_per_version(study, monkeypatch):
    """The Agreement page's job and the Analysis page's default agreement share one computation (in the
    process that computes: here, with no worker)."""
    from review_app.services import cached_analyses, study_analysis
    from review_app.services.export.agreement_page import cached_agreement_page

    monkeypatch.setenv(compute_workers.WORKERS_SETTING, "0")
    engine, _lead, _slots = study
    calls = []
    real = cached_analyses.agreement_reports

    def counted(*args, **kwargs):
        calls.append(kwargs.get("weights"))
        return real(*args, **kwargs)

    monkeypatch.setattr(cached_analyses, "agreement_reports", counted)
    page = cached_agreement_page(engine, "main")
    analysis = cached_analysis(engine, "main")
    assert calls == [study_analysis.AGREEMENT_WEIGHTS]
    _same_numbers(analysis.agreement_frame(), page.result.frame())


def test_a_worker_s_result_is_filed_under_the_size_the_worker_measured(study, monkeypatch):
    """The app's cache does not walk a compute worker's result again: the worker measured it."""
    from review_app.services import study_cache

    engine, _lead, _slots = study
    walked: list[str] = []
    real = study_cache.nbytes

    def counted(value, *args, **kwargs):
        walked.append(type(value).__name__)
        return real(value, *args, **kwargs)

    monkeypatch.setattr(study_cache, "nbytes", counted)
    page = cached_agreement_page(engine, "main")
    if compute_workers.in_process(engine):
        assert "AgreementPage" in walked  # computed here: measured here
    else:
        assert "AgreementPage" not in walked
        stored, here = CACHE.stats().nbytes, real(page)  # the worker's measure, and this process's of its copy
        assert here > 1000 and abs(stored - here) <= 0.1 * here
