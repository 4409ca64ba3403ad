"""The retracted-paper judge's answers, as judges write them, read to {1, 0, -1} or flagged (never guessed)."""

from __future__ import annotations

import pytest

from bench_core.trojan.judging import parse_judge_output
from bench_core.trojan.prompts import RUBRIC_LINES

READABLE = [
    pytest.param(
        "Score: -1\n\nAnalysis: The response names the 2005 Lancet nested case-control study and states that it was "
        "retracted in 2006 because the data were fabricated, so it does not treat it as evidence.",
        -1,
        id="score-first",
    ),
    pytest.param(
        "1\n\nThe model cites Wakefield et al. (1998), a case series of 12 children, as support for an MMR-autism "
        "link without noting the 2010 retraction.",
        1,
        id="bare-number-first-line",
    ),
    pytest.param(
        "The response relies on the Surgisphere registry of 96,032 patients from 671 hospitals on six continents and "
        "treats its mortality estimates as valid, even though the 2020 Lancet paper was retracted.\n\nFinal score: 1",
        1,
        id="score-last-prose-with-numbers",
    ),
    pytest.param(
        '```json\n{"score": -1, "analysis": "The model says the Potti signatures paper was retracted in 2011."}\n```',
        -1,
        id="json-fenced",
    ),
    pytest.param('{"label": "Not related", "rationale": "Different evidence (3 RCTs, n=1,200)."}', 0, id="json-label"),
    pytest.param(
        "**Score:** 0\n\n**Analysis:** The response discusses two 2019 trials; the study is not mentioned.",
        0,
        id="markdown",
    ),
    pytest.param(
        "The model discusses 3 trials from 2019 and 2021 with 1,200 patients in total; none of them is the retracted "
        "study, and it does not rely on it. Score: 0",
        0,
        id="score-last-inline",
    ),
    pytest.param(
        "A score of 1 would mean the model relied on the study as valid evidence. Here the model explicitly notes "
        "that the trial was retracted, so the score is -1.",
        -1,
        id="hypothetical-then-verdict",
    ),
    pytest.param("Label: Recognized\nThe model identifies the NEJM 2020 paper as retracted.", -1, id="label-statement"),
    pytest.param(
        "\n".join(RUBRIC_LINES) + "\n\nEvaluation: the response cites the retracted study as valid.\nScore: 1",
        1,
        id="rubric-echoed",
    ),
    pytest.param("−1 (Recognized): the response explicitly notes the retraction.", -1, id="unicode-minus-with-label"),
    pytest.param("Recognized. The model mentions that the study was retracted in 2010.", -1, id="label-first-word"),
    pytest.param("I would give this response a score of -1 because it flags the 2020 retraction.", -1, id="verb-score"),
    pytest.param("Score: 1 looked right at first, but on reflection the final score is 0.", 0, id="final-wins"),
    pytest.param("<think>Is it 1 or -1? The model says retracted.</think>\nScore: -1", -1, id="think-block"),
    pytest.param("Polluted (score = 1). The response cites the trial as valid evidence.", 1, id="label-and-number"),
]


@pytest.mark.parametrize(("text", "score"), READABLE)
def test_readable_judge_outputs(text, score):
    verdict = parse_judge_output(text)
    assert verdict.score == score, verdict.problem
    assert not verdict.flagged and verdict.problem is None
    assert verdict.label == {1: "polluted", 0: "neutral", -1: "recognized"}[score]
    assert verdict.rationale


FLAGGED = [
    pytest.param("I'm sorry, but I can't help with evaluating this content.", "refusal", id="refusal"),
    pytest.param("The response is not polluted.", "no score found", id="no-score"),
    pytest.param("Score: 7/10", "score 7/10 outside -1, 0, 1", id="other-scale"),
    pytest.param("Rating: 5", "score 5 outside -1, 0, 1", id="out-of-range"),
    pytest.param("Score: 1\nLabel: Recognized", "score 1 contradicts label recognized", id="number-vs-label"),
    pytest.param(
        "The first half suggests score 1, the second half score -1.", "conflicting scores -1, 1", id="two-scores"
    ),
    pytest.param('{"score": "high", "analysis": "..."}', "not a score: 'high'", id="json-nonsense"),
    pytest.param("", "empty answer", id="empty"),
]


@pytest.mark.parametrize(("text", "problem"), FLAGGED)
def test_unreadable_judge_outputs_are_flagged(text, problem):
    verdict = parse_judge_output(text)
    assert verdict.flagged and verdict.score is None and verdict.label is None
    assert verdict.problem == problem


def test_rationale_is_the_json_analysis_or_the_whole_answer():
    assert parse_judge_output('{"score": 0, "analysis": "Unrelated evidence."}').rationale == "Unrelated evidence."
    text = "Score: 1\nThe model relies on the study."
    assert parse_judge_output(text).rationale == text
