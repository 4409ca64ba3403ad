"""Source loaders: small files written in each public layout, including malformed and excluded rows."""

from __future__ import annotations

import csv
import json

import pytest

from bench_core.generation.source_options import extract_options
from bench_core.generation.sources import load_source
from bench_core.kernel.errors import DatasetError


def _jsonl(path, rows):
    lines = [row if isinstance(row, str) else json.dumps(row, ensure_ascii=False) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _dropped(report):
    """(line, reason, field) of every dropped row."""
    return sorted((d.issue.line, d.reason, d.issue.field) for d in report.dropped)


FIVE = {"A": "Ampicillin", "B": "Ceftriaxone", "C": "Doxycycline", "D": "Vancomycin", "E": "Azithromycin"}


def test_medqa_options_dict_list_and_answer_text(tmp_path):
    path = _jsonl(
        tmp_path / "US_test.jsonl",
        [
            {
                "question": "Best drug?",
                "options": FIVE,
                "answer": "Doxycycline",
                "answer_idx": "C",
                "meta_info": "step1",
            },
            {
                "question": "BigBio layout?",
                "options": [{"key": "A", "value": "Yes"}, {"key": "B", "value": "No"}],
                "answer_idx": "B",
            },
            {"question": "Only the answer text?", "options": FIVE, "answer": "vancomycin"},
            '{"question": "cut off", "options": ',
            {"question": "Label out of range?", "options": FIVE, "answer_idx": "F"},
            {"question": "Text and label disagree?", "options": FIVE, "answer": "Ampicillin", "answer_idx": "B"},
            {"options": FIVE, "answer_idx": "A"},
            {"question": "One option?", "options": {"A": "Only"}, "answer_idx": "A"},
            "",
            {"question": "Same text twice?", "options": {"A": "Aspirin", "B": "aspirin"}, "answer_idx": "A"},
            {
                "question": "患者最可能的诊断是什么？",
                "options": {"A": "急性胃炎", "B": "急性胰腺炎"},
                "answer_idx": "B",
            },
        ],
    )
    report = load_source(path, "medqa")
    assert [(i.id, i.gold, i.subset, i.language) for i in report.items] == [
        ("US_test-1", "C", "MEDMISQA", "en"),
        ("US_test-2", "B", "MEDMISQA", "en"),
        ("US_test-3", "D", "MEDMISQA", "en"),
        ("US_test-11", "B", "MEDMISQA", "zh"),
    ]
    assert report.items[1].options == {"A": "Yes", "B": "No"}
    assert _dropped(report) == [
        (4, "unreadable", None),
        (5, "gold_not_in_options", "answer_idx"),
        (6, "gold_mismatch", "answer"),
        (7, "missing_field", "question"),
        (8, "bad_options", "options"),
        (10, "bad_options", "options"),
    ]
    assert report.n_rows == 10  # the blank line is not a row
    assert report.counts() == {
        "bad_options": 2,
        "unreadable": 1,
        "gold_not_in_options": 1,
        "gold_mismatch": 1,
        "missing_field": 1,
    }
    with pytest.raises(DatasetError, match=r"US_test.jsonl:4: malformed JSON") as info:
        load_source(path, "medqa", strict=True)
    assert len(info.value.issues) == 6


def _mcqa(index, cop, **extra):
    row = {
        "id": f"m{index}",
        "question": f"Question {index}?",
        "opa": "alpha",
        "opb": "beta",
        "opc": "gamma",
        "opd": "delta",
        "cop": cop,
        "choice_type": "single",
        "subject_name": "Anatomy",
    }
    row.update(extra)
    return row


def test_medmcqa_detects_the_cop_base_per_file(tmp_path):
    one_based = _jsonl(
        tmp_path / "train.json",
        [_mcqa(1, 1), _mcqa(2, 4), _mcqa(3, -1), _mcqa(4, 2, opc=""), _mcqa(5, 7), _mcqa(6, "x")],
    )
    report = load_source(one_based, "medmcqa")
    assert [(i.id, i.gold) for i in report.items] == [("m1", "A"), ("m2", "D")]
    assert _dropped(report) == [
        (3, "no_gold", "cop"),
        (4, "bad_options", "opc"),
        (5, "gold_not_in_options", "cop"),
        (6, "no_gold", "cop"),
    ]
    assert "read as 1-based (a value 4 was seen)" in report.notes[0]

    zero_based = tmp_path / "validation.csv"
    with zero_based.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(_mcqa(0, 0)))
        writer.writeheader()
        writer.writerows([_mcqa(1, 0), _mcqa(2, 3), _mcqa(3, "c")])
    report = load_source(zero_based, "medmcqa")
    assert [(i.id, i.gold, i.source_line) for i in report.items] == [("m1", "A", 2), ("m2", "D", 3), ("m3", "C", 4)]
    assert "0-based" in report.notes[0]

    ambiguous = _jsonl(tmp_path / "dev.jsonl", [_mcqa(1, 1), _mcqa(2, 3)])
    report = load_source(ambiguous, "medmcqa")
    assert [i.gold for i in report.items] == ["A", "C"] and "could not be detected" in report.notes[0]
    assert [i.gold for i in load_source(ambiguous, "medmcqa", cop_base=0).items] == ["B", "D"]

    mixed = _jsonl(tmp_path / "mixed.jsonl", [_mcqa(1, 0), _mcqa(2, 4)])
    with pytest.raises(DatasetError, match="both 0 and 4"):
        load_source(mixed, "medmcqa")


def test_medxpertqa_text_reasoning_items_with_options_stripped_from_the_stem(tmp_path):
    ten = {chr(65 + i): f"choice {i}" for i in range(10)}
    formatted = " ".join(f"({k}) {v}" for k, v in ten.items())
    path = _jsonl(
        tmp_path / "test.jsonl",
        [
            {
                "id": "Text-1",
                "question": f"A 30-year-old has X. What next? Answer Choices: {formatted}",
                "options": ten,
                "label": "H",
                "medical_task": "Treatment",
                "body_system": "Cardiovascular",
                "question_type": "Reasoning",
            },
            {
                "id": "Text-2",
                "question": "Define Y. Answer Choices: (A) p (B) q",
                "options": {"A": "p", "B": "q"},
                "label": "A",
                "question_type": "Understanding",
            },
            {
                "id": "MM-3",
                "question": "See the image. Answer Choices: (A) p (B) q",
                "options": {"A": "p", "B": "q"},
                "label": "B",
                "images": ["MM-3-a.jpeg"],
                "question_type": "Reasoning",
            },
            {
                "id": "Text-4",
                "question": "String options? Answer Choices: (A) red (B) blue (C) green",
                "options": "(A) red (B) blue (C) green",
                "label": "C",
                "question_type": "Reasoning",
            },
            {
                "id": "Text-5",
                "question": "JSON string options?",
                "options": '{"A": "one", "B": "two"}',
                "label": "b",
                "question_type": "Reasoning",
            },
            {
                "id": "Text-6",
                "question": "Label missing? Answer Choices: (A) p (B) q",
                "options": {"A": "p", "B": "q"},
                "label": "Z",
                "question_type": "Reasoning",
            },
            {"id": "Text-7", "question": "Only embedded (A) first (B) second", "label": "A"},
        ],
    )
    report = load_source(path, "medxpertqa")
    kept = {i.id: i for i in report.items}
    assert list(kept) == ["Text-1", "Text-4", "Text-5", "Text-7"]
    assert kept["Text-1"].question == "A 30-year-old has X. What next?"
    assert kept["Text-1"].options == ten and kept["Text-1"].gold == "H" and kept["Text-1"].subset == "MEDMISXPERTQA"
    assert kept["Text-4"].options == {"A": "red", "B": "blue", "C": "green"} and kept["Text-4"].question == (
        "String options?"
    )
    assert kept["Text-5"].gold == "B"
    assert (kept["Text-7"].question, kept["Text-7"].options) == ("Only embedded", {"A": "first", "B": "second"})
    assert _dropped(report) == [
        (2, "not_reasoning", "question_type"),
        (3, "image_dependent", "images"),
        (6, "gold_not_in_options", "label"),
    ]
    assert not [d for d in report.malformed if d.reason in ("not_reasoning", "image_dependent")]
    assert "Text-2" in {i.id for i in load_source(path, "medxpertqa", reasoning_only=False).items}


def test_medjourney_options_come_from_the_prompt(tmp_path):
    stem = "患者，男，45岁，饮酒后上腹部剧烈疼痛6小时，向腰背部放射。最可能的诊断是"
    lines = "A. 急性胃炎\nB. 急性胰腺炎\nC. 急性阑尾炎\nD. 急性胆囊炎"
    path = _jsonl(
        tmp_path / "medjourney_dr.jsonl",
        [
            {"prompt": f"以下是中国医学考试中的单项选择题，请选出正确答案。\n{stem}\n{lines}\n答案：", "target": "B"},
            {"id": "j2", "prompt": f"{stem}\nA、急性胃炎\nB、急性胰腺炎\nC、急性阑尾炎", "target": "B. 急性胰腺炎"},
            {"prompt": f"{stem}\n(A) 急性胃炎\n(B) 急性胰腺炎", "target": "急性胰腺炎"},
            {"prompt": f"{stem}\n{lines}\n请直接回答选项字母。", "target": "答案：C"},
            {"prompt": "请为这位患者写一份出院小结。", "target": "患者出院后注意休息。"},
            {"prompt": f"{stem}\n{lines}", "target": "AB"},
            {"prompt": f"{stem}\n{lines}", "target": "急性心肌梗死"},
            {"prompt": f"{stem}\n{lines}"},
        ],
    )
    report = load_source(path, "medjourney")
    assert [(i.id, i.gold, i.language, i.subset) for i in report.items] == [
        ("medjourney_dr-1", "B", "zh", "MEDMISJOURNEY"),
        ("j2", "B", "zh", "MEDMISJOURNEY"),
        ("medjourney_dr-3", "B", "zh", "MEDMISJOURNEY"),
        ("medjourney_dr-4", "C", "zh", "MEDMISJOURNEY"),
    ]
    assert all(i.question == stem for i in report.items)  # instructions and "答案：" removed
    assert report.items[0].options == {"A": "急性胃炎", "B": "急性胰腺炎", "C": "急性阑尾炎", "D": "急性胆囊炎"}
    assert _dropped(report) == [
        (5, "not_multiple_choice", "prompt"),
        (6, "multiple_answers", "target"),
        (7, "gold_not_in_options", "target"),
        (8, "missing_field", "target"),
    ]


def test_hle_keeps_text_only_biology_medicine_multiple_choice(tmp_path):
    question = (
        "Which enzyme is deficient in Gaucher disease?\n\n"
        "Answer Choices:\nA. Hexosaminidase A\nB. Glucocerebrosidase\nC. Sphingomyelinase"
    )
    base = {
        "question": question,
        "image": "",
        "answer_type": "multipleChoice",
        "raw_subject": "Medicine",
        "category": "Biology/Medicine",
        "author_name": "x",
        "rationale": "y",
    }
    path = _jsonl(
        tmp_path / "hle.jsonl",
        [
            {**base, "id": "h1", "answer": "B"},
            {**base, "id": "h2", "answer": "B", "image": "data:image/png;base64,AAAA"},
            {**base, "id": "h3", "answer": "B", "category": "Math", "raw_subject": "Algebra"},
            {**base, "id": "h4", "answer": "42", "answer_type": "exactMatch"},
            {**base, "id": "h5", "answer": "Sphingomyelinase"},
            {**{k: v for k, v in base.items() if k != "category"}, "id": "h6", "answer": "A"},
            {**{k: v for k, v in base.items() if k != "category"}, "id": "h7", "answer": "A", "raw_subject": "Physics"},
            {**base, "id": "h8", "answer": "Cerebrosidase"},
            {**base, "id": "h9", "answer": "A", "question": "No choices here?"},
        ],
    )
    report = load_source(path, "hle")
    assert [(i.id, i.gold) for i in report.items] == [("h1", "B"), ("h5", "C"), ("h6", "A")]
    assert report.items[0].question == "Which enzyme is deficient in Gaucher disease?"
    assert report.items[0].options == {"A": "Hexosaminidase A", "B": "Glucocerebrosidase", "C": "Sphingomyelinase"}
    assert _dropped(report) == [
        (2, "image_dependent", "image"),
        (3, "not_medical", "category"),
        (4, "not_multiple_choice", "answer_type"),
        (7, "not_medical", "raw_subject"),
        (8, "gold_not_in_options", "answer"),
        (9, "not_multiple_choice", "question"),
    ]
    assert [d.reason for d in report.malformed] == ["gold_not_in_options"]


def test_medrev_plain_format_json_and_csv(tmp_path):
    path = _jsonl(
        tmp_path / "study.jsonl",
        [
            {"id": "s1", "question": "Q1?", "options": {"A": "x", "B": "y"}, "answer": "B", "subset": "MedMisQA"},
            {"id": "s2", "question": "问题？", "options": ["甲药", "乙药"], "answer": "甲药", "subset": "pilot zh"},
            {"id": "s3", "question": "Gap?", "options": {"A": "x", "C": "y"}, "answer": "A"},
            {"id": "s1", "question": "Again?", "options": {"A": "x", "B": "y"}, "answer": "A", "subset": "MEDMISQA"},
            {"id": "s5", "question": "Lang?", "options": {"A": "x", "B": "y"}, "answer": "A", "language": "fr"},
        ],
    )
    report = load_source(path, "medrev")
    assert [(i.id, i.subset, i.gold, i.language) for i in report.items] == [
        ("s1", "MEDMISQA", "B", "en"),
        ("s2", "PILOT_ZH", "A", "zh"),
    ]
    assert _dropped(report) == [
        (3, "bad_options", "options"),
        (4, "duplicate_id", "id"),
        (5, "invalid_item", "language"),
    ]

    table = tmp_path / "study.csv"
    table.write_text("id,question,opa,opb,opc,answer\nc1,Q?,x,y,z,C\nc2,Q?,x,,z,A\n", encoding="utf-8")
    report = load_source(table, "medrev", subset="pilot")
    assert [(i.id, i.subset, i.options, i.gold) for i in report.items] == [
        ("c1", "PILOT", {"A": "x", "B": "y", "C": "z"}, "C")
    ]
    assert _dropped(report) == [(3, "bad_options", "opb")]


def test_unknown_format_and_missing_file_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown source format 'pubmedqa'"):
        load_source(tmp_path, "pubmedqa")
    with pytest.raises(DatasetError, match="no such file or folder"):
        load_source(tmp_path / "nope.jsonl", "medqa")


@pytest.mark.parametrize(
    ("text", "stem", "options"),
    [
        ("Q?\nA. x\nB. y", "Q?", {"A": "x", "B": "y"}),
        ("Q?\nAnswer Choices:\nA) x\nB) y\nC) z", "Q?", {"A": "x", "B": "y", "C": "z"}),
        ("Q? (A) x (B) y", "Q?", {"A": "x", "B": "y"}),
        ("A 24-year-old man.\nA. x\nB. y", "A 24-year-old man.", {"A": "x", "B": "y"}),
        ("Q?\nA. only one", None, None),
    ],
)
def test_extract_options(text, stem, options):
    found = extract_options(text)
    assert (found[0], found[1]) == (stem, options) if stem else found is None
