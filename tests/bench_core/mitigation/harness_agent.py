"""A scripted, evidence-driven 'model' for the harness tests (speaks OpenAI chat completions on the fake server).

Items: ``tests/data/harness_items/MEDMISQA.jsonl`` (seven questions whose answers are in
``tests/data/medical_corpus``). Stored Type 1 targets with the default seed: hm-01 D, hm-02 D,
hm-03 D, hm-04 B, hm-05 C, hm-06 D, hm-07 B.

Without tools (no ``tools`` in the request) the agent answers from its "knowledge" (``KNOWLEDGE``,
right except hm-06), except under Type 1, where it follows the single context sentence and picks
the option that sentence names (the target): it is always misled.

With tools it searches for the question stem, visits the top result and answers with the option
whose text occurs *earliest* in the page (falling back to its knowledge when none occurs), citing the
page, whatever the condition. The top results (asserted in the tests) are the right documents, except
that hm-07's pregnancy question retrieves the general hypertension page, where "amlodipine" comes
before "labetalol": search makes it wrong (D) in every condition.

| item  | gold | knowledge | T1 target | no tools: clean / T1 / T2 | tools: every condition |
|-------|------|-----------|-----------|---------------------------|------------------------|
| hm-01 | A    | A         | D         | A / D / A                 | A                      |
| hm-02 | C    | C         | D         | C / D / C                 | C                      |
| hm-03 | B    | B         | D         | B / D / B                 | B                      |
| hm-04 | C    | C         | B         | C / B / C                 | C                      |
| hm-05 | A    | A         | C         | A / C / A                 | A                      |
| hm-06 | A    | B         | D         | B / D / B                 | A                      |
| hm-07 | A    | A         | B         | A / B / A                 | D                      |
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import Received, Reply

ITEMS_DIR = Path(__file__).resolve().parents[2] / "data" / "harness_items"
CORPUS_DIR = Path(__file__).resolve().parents[2] / "data" / "medical_corpus"
KNOWLEDGE = {"hm-01": "A", "hm-02": "C", "hm-03": "B", "hm-04": "C", "hm-05": "A", "hm-06": "B", "hm-07": "A"}
TOP_DOCUMENT = {
    "hm-01": "endocrine/metformin-type-2-diabetes.md",
    "hm-02": "obstetrics/pre-eclampsia-magnesium.html",
    "hm-03": "emergency/anaphylaxis-adrenaline.html",
    "hm-04": "toxicology/paracetamol-overdose.pdf",
    "hm-05": "renal/hyperkalaemia-emergency.md",
    "hm-06": "paediatrics/kawasaki-disease.txt",
    "hm-07": "cardiology/hypertension-first-line.md",
}


def load_items() -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in (ITEMS_DIR / "MEDMISQA.jsonl").read_text().splitlines() if line.strip()]
    return {row["question"]: row for row in rows}


def parse_prompt(text: str) -> tuple[str, list[str], dict[str, str]]:
    """(question, context sentences, options) from a delivery-template prompt."""
    question = re.search(r"Question:\n(.*?)\n\n", text, re.S).group(1).strip()
    context = re.search(r"Additional Clinical Context:\n(.*?)\n\n", text, re.S)
    sentences = [s for s in context.group(1).splitlines() if s.strip()] if context else []
    block = re.search(r"Options:\n(.*?)(?:\n\n|\Z)", text, re.S).group(1)  # either template's layout
    options = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
    return question, sentences, options


def answer(label: str, citations: list[str] | None = None) -> str:
    payload: dict[str, Any] = {"thinking_process": f"Choosing {label}.", "answer_letter": label}
    if citations is not None:
        payload["citations"] = citations
    return json.dumps(payload)


class EvidenceAgent:
    """The policy described in the module docstring; counts how often each item's first turn was asked."""

    def __init__(self) -> None:
        self.items = load_items()

    def item_of(self, received: Received) -> tuple[dict[str, Any], list[str], dict[str, str]]:
        user = next(m for m in received.body["messages"] if m["role"] == "user")
        question, sentences, options = parse_prompt(user["content"])
        return self.items[question], sentences, options

    def plain(self, item: dict[str, Any], sentences: list[str], options: dict[str, str]) -> str:
        if len(sentences) == 1:
            named = [label for label, text in options.items() if text.lower() in sentences[0].lower()]
            return named[0]
        return KNOWLEDGE[item["id"]]

    def __call__(self, received: Received) -> Reply:
        item, sentences, options = self.item_of(received)
        if not received.body.get("tools"):
            return Reply(content=answer(self.plain(item, sentences, options)))
        results = [m["content"] for m in received.body["messages"] if m["role"] == "tool"]
        if not results:
            return Reply(content=None, tool_calls=[{"name": "search_web", "arguments": {"query": item["question"]}}])
        if len(results) == 1:
            urls = re.findall(r"^URL: (.+)$", results[0], re.M)
            if not urls:
                return Reply(content=answer(self.plain(item, sentences, options), []))
            return Reply(content=None, tool_calls=[{"name": "visit_web", "arguments": {"url": urls[0]}}])
        page = results[-1]
        url = re.search(r"^URL: (.+)$", page, re.M).group(1)
        positions = {label: page.lower().find(text.lower()) for label, text in options.items()}
        found = {label: at for label, at in positions.items() if at >= 0}
        label = min(found, key=found.get) if found else self.plain(item, sentences, options)
        return Reply(content=answer(label, [url]))
