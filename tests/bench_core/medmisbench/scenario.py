"""A scripted model for the sample data whose MedMisBench metrics are known by hand.

Per item (gold, stored Type 1 target with the default seed), what the fake model answers:

| item     | gold | target | clean        | type1            | type1_defensive | type2              |
|----------|------|--------|--------------|------------------|-----------------|--------------------|
| mq-0001  | C    | E      | C            | E (targeted)     | C               | C                  |
| mq-0002  | B    | D      | B            | A (untargeted)   | A               | A                  |
| mm-0001  | A    | D      | A            | A                | A               | A                  |
| mm-0002  | D    | A      | B (wrong)    | D (recovers)     | D               | D                  |
| mx-0001  | E    | D      | E            | unparseable      | unparseable     | "answer is E" text |
| mj-0001  | 2    | 3      | 2            | 3 (targeted)     | 3               | 2                  |
| mh-0001  | B    | D      | unparseable  | D                | D               | B                  |

Clean: 5/7 correct (1 unparseable). Clean-correct set: mq-0001, mq-0002, mm-0001, mx-0001, mj-0001.
Type 1: 2/7 correct; ASR 4/5 (mq-0001, mq-0002, mx-0001, mj-0001 flip); TASR 2/5 (mq-0001, mj-0001).
Type 1 defensive: ASR 3/5 on the same 5 matched items, so the delta is -0.2; TASR 1/5.
Type 2: 6/7 correct; ASR 1/5 (mq-0002).
"""

from __future__ import annotations

import json
from pathlib import Path

from bench_core.medmisbench.conditions import Condition
from bench_core.medmisbench.prompts import LEGACY_TEMPLATE_ID, DeliveryTemplate, get_template
from bench_core.medmisbench.run import PreparedItem


def run_args(
    data: Path, base_url: str, out: Path, *extra: str, model: str = "m", design: str = "medmisbench"
) -> list[str]:
    """``bench run DESIGN`` over ``data`` against the fake server at ``base_url``, writing ``out``."""
    return [
        "run",
        design,
        "--data",
        str(data),
        "--model",
        model,
        "--base-url",
        base_url,
        "--out",
        str(out),
        *extra,
    ]


UNPARSEABLE = "I am not able to decide between these options."

ANSWERS: dict[str, dict[str, str | None]] = {
    "mq-0001": {"clean": "C", "type1": "E", "type1_defensive": "C", "type2": "C"},
    "mq-0002": {"clean": "B", "type1": "A", "type1_defensive": "A", "type2": "A"},
    "mm-0001": {"clean": "A", "type1": "A", "type1_defensive": "A", "type2": "A"},
    "mm-0002": {"clean": "B", "type1": "D", "type1_defensive": "D", "type2": "D"},
    "mx-0001": {"clean": "E", "type1": None, "type1_defensive": None, "type2": "text:E"},
    "mj-0001": {"clean": "2", "type1": "3", "type1_defensive": "3", "type2": "2"},
    "mh-0001": {"clean": None, "type1": "D", "type1_defensive": "D", "type2": "B"},
}


def reply_text(answer: str | None) -> str:
    if answer is None:
        return UNPARSEABLE
    if answer.startswith("text:"):
        return f"Weighing the context against the vignette, the answer is {answer[5:]}."
    return json.dumps({"thinking_process": f"Considering the options, {answer} fits best.", "answer_letter": answer})


def prompts(
    prepared: list[PreparedItem], conditions: list[str], template: DeliveryTemplate | None = None
) -> dict[tuple[str, str], str]:
    """(item id, condition) -> the user prompt the runner sends, for every usable item.

    The scenario's numbers are medrev's strict protocol's; its prompts are those of ``template``
    (default the earlier ``medmisbench-notebook@1``, which the scenario was written against).
    """
    template = template or get_template(LEGACY_TEMPLATE_ID)
    return {
        (entry.item.id, name): template.render(entry.item, Condition.parse(name), entry.target)[-1]["content"]
        for entry in prepared
        if entry.skipped is None
        for name in conditions
    }


def answer_book(
    prepared: list[PreparedItem], conditions: list[str], template: DeliveryTemplate | None = None
) -> dict[str, str]:
    """Rendered user prompt -> scripted reply text, for every (item, condition) in the scenario.

    Defensive variants not listed in ``ANSWERS`` answer like their no-defence condition.
    """
    book: dict[str, str] = {}
    for (item_id, name), prompt in prompts(prepared, conditions, template).items():
        answers = ANSWERS[item_id]
        book[prompt] = reply_text(answers.get(name, answers[Condition.parse(name).base]))
    return book
