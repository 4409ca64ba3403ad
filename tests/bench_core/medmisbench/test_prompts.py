import pytest

from bench_core.medmisbench.conditions import Condition, context_sentences, parse_conditions
from bench_core.medmisbench.data import load_medmisbench
from bench_core.medmisbench.prompts import DEFAULT_TEMPLATE_ID, LEGACY_TEMPLATE_ID, get_template
from bench_core.medmisbench.run import prepare_items


@pytest.fixture
def mq1(sample_dir):
    return next(p for p in prepare_items(load_medmisbench(sample_dir).items) if p.item.id == "mq-0001")


def test_conditions_parse_and_add_defensive_variants():
    names = [c.name for c in parse_conditions("type1, clean", defensive=True)]
    assert names == ["type1", "clean", "type1_defensive", "clean_defensive"]
    with pytest.raises(ValueError, match="unknown condition 'type3'"):
        parse_conditions("clean,type3")


def test_delivery_shows_only_what_each_condition_allows(mq1):
    item, target = mq1.item, mq1.target
    template = get_template(LEGACY_TEMPLATE_ID)
    clean = template.render(item, Condition("clean"), target)[-1]["content"]
    type1 = template.render(item, Condition("type1"), target)[-1]["content"]
    type2 = template.render(item, Condition("type2"), target)[-1]["content"]
    defended = template.render(item, Condition("type1", defensive=True), target)[-1]["content"]
    assert "Additional Clinical Context" not in clean and "expert physician" in clean
    assert "C: Hospital admission and intravenous ceftriaxone" in clean
    assert item.injection.sentences[target] in type1
    assert sum(sentence in type1 for sentence in item.injection.sentences.values()) == 1
    assert all(sentence in type2 for sentence in item.injection.sentences.values())
    assert "answer_letter" in clean and "one of: A, B, C, D, E" in clean
    assert defended.startswith("Warning") and "misleading" in defended
    assert defended.endswith(type1[len("") :]) or type1 in defended
    assert context_sentences(item, Condition("type2"), target)[2] == item.injection.sentences["C"]


def test_templates_are_versioned(mq1):
    assert DEFAULT_TEMPLATE_ID == "medmisbench-authors@1" and get_template().id == DEFAULT_TEMPLATE_ID
    assert get_template("medmisbench-notebook").id == LEGACY_TEMPLATE_ID == "medmisbench-notebook@1"
    with pytest.raises(ValueError, match="unknown delivery template"):
        get_template("nope@9")


def test_invalid_type1_target_is_refused(mq1):
    with pytest.raises(ValueError, match="invalid Type 1 target"):
        context_sentences(mq1.item, Condition("type1"), mq1.item.gold)


def test_the_earlier_template_renders_as_before(sample_dir):
    """``medmisbench-notebook@1`` is now data over format strings; its messages are byte for byte the
    ones the earlier code rendered (golden file written by that code for the sample, every condition)."""
    import json
    from pathlib import Path

    golden = json.loads((Path(__file__).parents[2] / "data" / "medmisbench_notebook_v1_golden.json").read_text())
    template = get_template(LEGACY_TEMPLATE_ID)
    rendered = {
        f"{p.item.id}|{name}": [dict(m) for m in template.render(p.item, Condition.parse(name), p.target)]
        for p in prepare_items(load_medmisbench(sample_dir).items)
        for name in ("clean", "type1", "type2", "clean_defensive", "type1_defensive", "type2_defensive")
    }
    assert rendered == golden
