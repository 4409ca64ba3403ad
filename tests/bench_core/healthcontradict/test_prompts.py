"""The five HealthContradict templates are the authors' text, character for character."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench_core.healthcontradict.data import load_queries
from bench_core.healthcontradict.items import HCInstance
from bench_core.healthcontradict.prompts import DEFAULT_TEMPLATE_SET, get_template_set, parse_templates

DATA = Path(__file__).resolve().parents[2] / "data" / "healthcontradict"
TEMPLATES = get_template_set(DEFAULT_TEMPLATE_SET)


def test_nc_reproduces_every_released_prompt():
    queries = load_queries(DATA / "query-all.jsonl")
    rows = [json.loads(line) for line in (DATA / "prompts_1.jsonl").read_text().splitlines()]
    assert len(rows) == 920
    for row in rows:
        assert row["template_id"] == TEMPLATES["NC"].number == 1
        assert TEMPLATES["NC"].render(queries[row["topic_id"]].query) == row["prompt"]


# The authors' a3_create_prompt.py, written out: correct = the document whose stance is the answer.
EXPECTED = {
    "CC": "Answer the following question with only YES or NO based on the given contextual knowledge.\n"
    "Question: Can coffee help you lose weight?\nContext: GREEN COFFEE HELPS  \nAnswer:",
    "IC": "Answer the following question with only YES or NO based on the given contextual knowledge.\n"
    "Question: Can coffee help you lose weight?\nContext: Of course not! {braces} \nAnswer:",
    "CIC": "Answer the following question with only YES or NO based on the given contextual knowledge.\n"
    "Question: Can coffee help you lose weight?\nContext:\nGREEN COFFEE HELPS\n\nOf course not! {braces} \nAnswer:",
    "ICC": "Answer the following question with only YES or NO based on the given contextual knowledge.\n"
    "Question: Can coffee help you lose weight?\nContext:\nOf course not! {braces}\n\nGREEN COFFEE HELPS \nAnswer:",
}


@pytest.mark.parametrize("name", ["CC", "IC", "CIC", "ICC"])
def test_context_templates_place_the_correct_document_by_stance(name):
    instance = HCInstance(
        instance_id="0",
        topic_id=1,
        query="Can coffee help you lose weight?",
        query_stance="yes",
        doc_a="GREEN COFFEE HELPS",
        doc_b="Of course not! {braces}",
    )
    assert TEMPLATES[name].render(instance.query, instance.correct_doc, instance.incorrect_doc) == EXPECTED[name]
    flipped = instance.model_copy(update={"query_stance": "no", "doc_a": instance.doc_b, "doc_b": instance.doc_a})
    assert flipped.correct_doc == "GREEN COFFEE HELPS"  # the no-stance document is correct when the answer is no
    assert TEMPLATES[name].render(flipped.query, flipped.correct_doc, flipped.incorrect_doc) == EXPECTED[name]


def test_template_numbers_and_names():
    assert [(t.name, t.number) for t in TEMPLATES.templates] == [
        ("NC", 1),
        ("CC", 2),
        ("IC", 3),
        ("CIC", 4),
        ("ICC", 5),
    ]
    assert parse_templates("icc, nc") == ["NC", "ICC"]
    with pytest.raises(ValueError, match="XX"):
        parse_templates("NC,XX")
    with pytest.raises(ValueError, match="unknown HealthContradict template set"):
        get_template_set("healthcontradict-repo@99")
