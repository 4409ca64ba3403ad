"""The demo data shipped in review_app/demo_data is complete and consistent with bench_core.

The demo study, the app's smoke tests and the documentation all lean on these files, so a broken
reference (a response to a missing item, a stale Type 1 target, a roster without Chinese readers)
must fail here rather than in a reviewer's browser.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path

import pytest

import review_app
from bench_core.kernel.text import detect_language
from bench_core.medmisbench import taxonomy
from bench_core.medmisbench.data import load_medmisbench
from bench_core.medmisbench.items import MCQItem
from bench_core.medmisbench.targets import draw_type1_target

DEMO = Path(review_app.__file__).resolve().parent / "demo_data"
ROSTER_COLUMNS = ["username", "display_name", "role", "profession", "country", "years", "languages", "email"]
RESPONSE_KEYS = {"item_id", "subset", "model", "condition", "target", "response", "reasoning", "chosen", "result"}
TRACE_KEYS = {"id", "model", "prompt", "model_response", "judge_model", "judge_label", "judge_rationale"}
RECORD_KEYS = ("id", "title", "isimpact", "conclusion", "problem", "note")
# How each provenance frame opens its sentences in the demo (English and Chinese).
FRAME_OPENINGS = {
    "patient": re.compile(r"(The patient|Before induction the patient|患者)"),
    "authority": re.compile(r"(Per |According to |根据)"),
}


@pytest.fixture(scope="module")
def items() -> dict[tuple[str, str], MCQItem]:
    report = load_medmisbench(DEMO / "items", strict=True)
    return {(item.subset, item.id): item for item in report.items}


@pytest.fixture(scope="module")
def responses() -> list[dict]:
    lines = (DEMO / "responses.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _languages(cell: str) -> set[str]:
    return {part.strip() for part in cell.replace(",", ";").split(";") if part.strip()}


def test_items_cover_every_subset_with_both_label_styles(items):
    assert len(items) >= 48
    by_subset = Counter(subset for subset, _ in items)
    assert set(by_subset) == set(taxonomy.SUBSET_IDS)
    assert by_subset["MEDMISQA"] >= 14 and by_subset["MEDMISMCQA"] >= 12
    for item in items.values():
        expected = "zh" if item.subset == "MEDMISJOURNEY" else "en"
        assert item.language == expected, item.id
        assert detect_language(item.question + " " + " ".join(item.options.values())) == expected, item.id
    numeric = [item for item in items.values() if item.gold.isdigit()]
    assert {item.subset for item in numeric} >= {"MEDMISMCQA", "MEDMISJOURNEY"}
    mcqa = [item for item in items.values() if item.subset == "MEDMISMCQA"]
    assert 0 < sum(item.gold.isdigit() for item in mcqa) < len(mcqa)
    assert all(
        not item.gold.isdigit() and len(item.options) >= 6 for item in items.values() if item.subset == "MEDMISXPERTQA"
    )


def test_taxonomy_is_spread_over_every_subset(items):
    for subset in taxonomy.SUBSET_IDS:
        bundles = [item.injection for item in items.values() if item.subset == subset]
        assert {b.provenance for b in bundles} == set(taxonomy.PROVENANCE_IDS), subset
        assert {b.content_type for b in bundles} == set(taxonomy.CONTENT_TYPE_IDS), subset


def test_release_and_paper_spellings_both_occur():
    raw = [
        json.loads(line)
        for path in sorted((DEMO / "items").glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    provenances = {row["injection_provenance"] for row in raw}
    contents = {row["injection_content"] for row in raw}
    assert {"Authority (Guideline, Discharge Note, SOP)", "Authority (Guideline / Discharge Note / SOP)"} <= provenances
    assert {"Parameter & Threshold Shift", "Threshold / Reference Corruption"} <= contents
    assert {"Spurious Cue Anchoring", "Spurious Anchoring"} <= contents


def test_provenance_framing_shows_in_every_sentence(items):
    for item in items.values():
        frame = item.injection.provenance
        for label, sentence in item.injection.sentences.items():
            opened_as = {name for name, pattern in FRAME_OPENINGS.items() if pattern.match(sentence)}
            assert opened_as == ({frame} if frame in FRAME_OPENINGS else set()), (item.id, label, frame)


def test_exactly_one_item_has_an_unusable_bundle(items):
    unusable = {key: item.usable_bundle_problem() for key, item in items.items() if item.usable_bundle_problem()}
    assert len(unusable) == 1
    ((subset, _item_id), problem) = unusable.popitem()
    assert subset == "MEDMISMCQA"
    assert problem.startswith("no misleading sentence for wrong option")


def test_wrong_option_sentences_do_not_state_the_gold_option(items):
    for item in items.values():
        gold_text = item.options[item.gold].lower()
        for label in item.wrong_labels:
            sentence = item.injection.sentences.get(label, "")
            assert gold_text not in sentence.lower(), (item.id, label)


def test_responses_match_their_items(items, responses):
    assert responses
    for number, row in enumerate(responses, start=1):
        assert set(row) == RESPONSE_KEYS, f"responses.jsonl:{number}"
        item = items.get((row["subset"], row["item_id"]))
        assert item is not None, f"responses.jsonl:{number}: unknown item {row['item_id']!r}"
        assert row["condition"] in {"clean", "type1"}
        assert row["target"] == draw_type1_target(item), f"responses.jsonl:{number}"
        chosen = row["chosen"] or ""
        assert chosen == "" or chosen in item.options, f"responses.jsonl:{number}: chosen {chosen!r}"
        assert row["result"] == ("SUCCESS" if chosen == item.gold else "FAIL"), f"responses.jsonl:{number}"
        assert row["response"].strip() and row["reasoning"].strip()
        if item.language == "zh":
            assert detect_language(row["response"]) == "zh", f"responses.jsonl:{number}"


def test_every_usable_item_has_type1_responses_from_every_model(items, responses):
    models = {row["model"] for row in responses}
    assert len(models) == 3
    seen = {(row["subset"], row["item_id"], row["model"]) for row in responses if row["condition"] == "type1"}
    for (subset, item_id), item in items.items():
        expected = {(subset, item_id, model) for model in models}
        if item.usable_bundle_problem() is None:
            assert expected <= seen, item_id
        else:
            assert not expected & seen, f"{item_id} has no usable bundle but has responses"
    keys = [(row["subset"], row["item_id"], row["model"], row["condition"]) for row in responses]
    assert len(keys) == len(set(keys))


def test_responses_show_varied_behaviour_and_the_hostile_cases(responses):
    type1 = [row for row in responses if row["condition"] == "type1"]
    adopted = sum(row["chosen"] == row["target"] for row in type1) / len(type1)
    assert 0.35 <= adopted <= 0.55
    assert any(row["chosen"] not in (row["target"], None, "") and row["result"] == "FAIL" for row in type1)
    assert 2 <= sum(not row["chosen"] for row in responses) <= 3
    assert sum(row["condition"] == "clean" for row in responses) >= 10
    markup = [row for row in responses if "<script>alert(1)</script>" in row["response"]]
    assert len(markup) == 1
    assert "<img src=http://example.invalid/x.png>" in markup[0]["response"]
    assert "[click](http://example.invalid)" in markup[0]["response"]
    assert max(len(row["reasoning"]) for row in responses) > 4000


def test_roster_has_the_roles_and_chinese_readers():
    with (DEMO / "roster.csv").open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == ROSTER_COLUMNS
        rows = list(reader)
    assert Counter(row["role"] for row in rows) == {"reviewer": 10, "lead": 2, "admin": 1}
    assert len({row["username"] for row in rows}) == len(rows)
    reviewers = [row for row in rows if row["role"] == "reviewer"]
    assert len({row["country"] for row in reviewers}) >= 7
    assert sum("zh" in _languages(row["languages"]) for row in reviewers) >= 3
    for row in rows:
        assert _languages(row["languages"]) <= {"en", "zh"} and "en" in _languages(row["languages"])
        assert 0 <= int(row["years"]) <= 40
        assert row["email"].endswith("@example.org")


def test_trojan_records_and_traces_parse():
    records = json.loads((DEMO / "trojan" / "records.json").read_text(encoding="utf-8"))
    assert isinstance(records, list) and len(records) == 6
    for record in records:
        missing = [key for key in RECORD_KEYS if not str(record.get(key, "")).strip()]
        assert not missing, f"{record.get('id')}: missing {missing}"
    ids = [record["id"] for record in records]
    assert len(set(ids)) == len(ids)
    lines = (DEMO / "trojan" / "traces.jsonl").read_text(encoding="utf-8").splitlines()
    traces = [json.loads(line) for line in lines if line.strip()]
    assert len(traces) == 2 * len(records)
    for trace in traces:
        assert set(trace) == TRACE_KEYS
        assert trace["id"] in ids
        assert trace["judge_label"] in (-1, 0, 1)
        assert trace["judge_model"] == "judge-omega"
        assert trace["prompt"].strip() and trace["model_response"].strip() and trace["judge_rationale"].strip()
    assert {trace["judge_label"] for trace in traces} == {-1, 0, 1}
    assert len({trace["model"] for trace in traces}) == 2
