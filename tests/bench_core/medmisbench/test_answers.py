import pytest

from bench_core.medmisbench.answers import extract_answer, normalise_label

OPTIONS = {"A": "Mitral regurgitation", "B": "Aortic stenosis", "C": "Hypertrophic cardiomyopathy", "D": "VSD"}


@pytest.mark.parametrize(
    ("text", "label", "method"),
    [
        ('{"thinking_process": "murmur radiates", "answer_letter": "B"}', "B", "json"),
        ('```json\n{"thinking_process": "x", "answer_letter": "(c)"}\n```', "C", "json"),
        ('Sure.\n{"thinking_process": "x", "answer_letter": "Option D"} done', "D", "json"),
        ('{"answer": "Aortic stenosis"}', "B", "json"),
        ("<think>the answer is A</think>The answer is B.", "B", "answer_is"),
        ("The answer is a difficult one, but the answer is (D).", "D", "answer_is"),
        ('{"answer_letter": "Z"}\nSo the answer is C', "C", "answer_is"),
        ("Final answer: **C**", "C", "final_answer"),
        ("Reasoning...\n\nB.\n", "B", "label_line"),
        ("It is most consistent with aortic stenosis.", "B", "option_text"),
        ("Either mitral regurgitation or aortic stenosis.", None, "unparseable"),
        ("", None, "unparseable"),
        ("The answer is E", None, "unparseable"),  # not an option
    ],
)
def test_extraction_order_and_fallbacks(text, label, method):
    parsed = extract_answer(text, OPTIONS)
    assert (parsed.label, parsed.method) == (label, method)


def test_json_reasoning_is_kept_even_when_the_label_comes_from_a_fallback():
    parsed = extract_answer('{"thinking_process": "because", "answer_letter": ""} answer is A', OPTIONS)
    assert (parsed.label, parsed.reasoning) == ("A", "because")


def test_numeric_and_chinese_labels():
    options = {"1": "急性胃炎", "2": "急性胰腺炎", "3": "急性阑尾炎"}
    assert extract_answer('{"answer_letter": 2}', options).label == "2"
    assert extract_answer("综合分析，答案是 2。", options).label == "2"
    assert extract_answer("答案：3", options).label == "3"
    assert extract_answer("最可能是急性胰腺炎", options).label == "2"


def test_normalise_label_rejects_unknown_and_booleans():
    assert normalise_label("b)", OPTIONS) == "B"
    assert normalise_label(True, OPTIONS) is None
    assert normalise_label("K", OPTIONS) is None
