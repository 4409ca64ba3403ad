"""Stratified, seeded review pools."""

from collections import Counter

import pytest
from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import Item, ModelResponse, Task
from review_app.services import studies
from review_app.services.actors import SYSTEM
from review_app.services.errors import Conflict, InvalidInput

from .factories import seed_items, seed_responses

PAPER_QUOTAS = [
    "subset=MEDMISQA:35,MEDMISMCQA:35,MEDMISXPERTQA:25,MEDMISHLE:5",
    "provenance=neutral:34,authority:33,patient:33",
    "model=model-a:33,model-b:34,model-c:33",
]


@pytest.fixture
def populated(engine, tmp_path):
    items = seed_items(engine, tmp_path, 400, subsets=("MEDMISQA", "MEDMISMCQA", "MEDMISXPERTQA", "MEDMISHLE"))
    seed_responses(engine, tmp_path, items)
    return engine


def _pool(engine, name):
    with read_session(engine) as session:
        rows = session.exec(
            select(Task, Item, ModelResponse)
            .join(Item, Item.id == Task.item_id)
            .join(ModelResponse, ModelResponse.id == Task.response_id, isouter=True)
            .where(Task.study_id == studies.get_study(engine, name).id)
            .order_by(Task.pool_rank, Task.rubric)
        ).all()
    return rows


def test_paper_quotas_are_met_exactly_and_reproducibly(populated):
    engine = populated
    for name in ("s1", "s2", "s3"):
        studies.create_study(engine, name, rubrics=["A", "B"], actor=SYSTEM)
    quotas = [studies.parse_quota(q) for q in PAPER_QUOTAS]
    result = studies.draw_pool(engine, "s1", 100, quotas=quotas, seed=11, actor=SYSTEM)
    assert result.units == 100 and result.tasks == 200
    assert result.achieved["subset"] == {"MEDMISQA": 35, "MEDMISMCQA": 35, "MEDMISXPERTQA": 25, "MEDMISHLE": 5}
    assert result.achieved["provenance"] == {"neutral": 34, "authority": 33, "patient": 33}
    assert result.achieved["model"] == {"model-a": 33, "model-b": 34, "model-c": 33}
    rows = _pool(engine, "s1")
    b_rows = [(t, i, r) for t, i, r in rows if t.rubric == "B"]
    assert Counter(r.model for _t, _i, r in b_rows) == {"model-a": 33, "model-b": 34, "model-c": 33}
    assert len({i.id for _t, i, _r in b_rows}) == 100  # one unit per item
    assert all(t.response_id is None for t, _i, _r in rows if t.rubric == "A")
    studies.draw_pool(engine, "s2", 100, quotas=quotas, seed=11, actor=SYSTEM)
    studies.draw_pool(engine, "s3", 100, quotas=quotas, seed=12, actor=SYSTEM)
    units = {name: [(t.item_id, t.response_id) for t, _i, _r in _pool(engine, name)] for name in ("s1", "s2", "s3")}
    assert units["s1"] == units["s2"]
    assert units["s1"] != units["s3"]


def test_weights_are_scaled_to_the_size():
    quota = studies.parse_quota("provenance=Neutral False Statement:1,patient:1,authority:1")
    assert quota.allocate(100) == {"neutral": 34, "patient": 33, "authority": 33}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("colour=red:1", "one of subset"),
        ("provenance=tabloid:3", "unknown provenance"),
        ("subset=MEDMISQA", "VALUE:COUNT"),
        ("subset=MEDMISQA:x", "not a number"),
    ],
)
def test_bad_quotas(text, message):
    with pytest.raises(InvalidInput, match=message):
        studies.parse_quota(text)


def test_impossible_quota_is_refused_with_the_reason(populated):
    studies.create_study(populated, "s", rubrics=["B"], actor=SYSTEM)
    quotas = [studies.parse_quota("subset=MEDMISHLE:150,MEDMISQA:50")]
    with pytest.raises(InvalidInput, match=r"subset=MEDMISHLE: quota 150, only 100 distinct items"):
        studies.draw_pool(populated, "s", 200, quotas=quotas, actor=SYSTEM)
    assert _pool(populated, "s") == []


def test_second_pool_needs_add_and_never_repeats_items(populated):
    studies.create_study(populated, "s", rubrics=["A"], actor=SYSTEM)
    studies.draw_pool(populated, "s", 50, seed=1, actor=SYSTEM)
    with pytest.raises(Conflict, match="--add"):
        studies.draw_pool(populated, "s", 50, seed=2, actor=SYSTEM)
    studies.draw_pool(populated, "s", 50, seed=2, add=True, actor=SYSTEM)
    rows = _pool(populated, "s")
    assert len(rows) == 100 and len({t.item_id for t, _i, _r in rows}) == 100
    assert sorted({t.pool_rank for t, _i, _r in rows}) == list(range(1, 101))


def test_language_filter_and_unusable_bundles(engine, tmp_path):
    items = seed_items(engine, tmp_path, 20)
    seed_responses(engine, tmp_path, items)
    studies.create_study(engine, "en-only", rubrics=["A", "B"], actor=SYSTEM)
    result = studies.draw_pool(engine, "en-only", 16, languages={"en"}, seed=3, actor=SYSTEM)
    assert "MEDMISJOURNEY" not in result.achieved["subset"]
    with pytest.raises(InvalidInput, match="only 16 distinct items"):
        studies.create_study(engine, "too-big", rubrics=["B"], actor=SYSTEM)
        studies.draw_pool(engine, "too-big", 17, languages={"en"}, actor=SYSTEM)
