"""The one set of text helpers the designs share: CJK, ``<think>`` stripping, JSON objects, language."""

import pytest

from bench_core.kernel.text import CJK, CJK_RUN, detect_language, json_objects, strip_think


@pytest.mark.parametrize(
    ("char", "cjk"),
    [("中", True), ("\u3400", True), ("\u4dbf", True), ("\uf900", True), ("\ufaff", True), ("A", False), ("ア", False)],
)
def test_cjk_covers_extension_a_unified_and_compatibility_ideographs(char, cjk):
    assert bool(CJK.fullmatch(char)) is cjk


def test_cjk_runs_split_at_latin_text():
    assert CJK_RUN.findall("阿司匹林 aspirin 豈更") == ["阿司匹林", "豈更"]


def test_strip_think_drops_every_block_and_tolerates_none():
    assert strip_think("<think>plan</think>Answer: B <THINK>\nmore\n</think>.") == "Answer: B ."
    assert strip_think(None) == ""


def test_json_objects_order_whole_text_then_fences_then_inline():
    text = 'Draft {"answer": "A"} then\n```json\n{"answer": "B"}\n```\nand ```{"answer": "C"}``` final {"answer": "D"}'
    last_first = [o["answer"] for o in json_objects(text)]
    first_first = [o["answer"] for o in json_objects(text, last_first=False)]
    # fenced blocks come before inline objects; inline objects include the fenced ones (they are balanced braces)
    assert last_first[:2] == ["C", "B"] and last_first[2:] == ["D", "C", "B", "A"]
    assert first_first[:2] == ["B", "C"] and first_first[2:] == ["A", "B", "C", "D"]
    assert json_objects('{"score": -1}', last_first=False) == [{"score": -1}, {"score": -1}]
    assert json_objects("no object [1, 2] here") == []


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("What is the dose of aspirin?", "en"),
        ("患者，女，52岁，CT 示肺部结节", "zh"),
        ("Serum HbA1c was 6.0% (中)", "en"),
    ],
)
def test_detect_language_by_share_of_cjk_letters(text, language):
    assert detect_language(text) == language
