"""Reading the retracted-paper judge's answer: a score in {1 polluted, 0 neutral, -1 recognized}, or a flag.

The seed's judge prompt asks for "the specific score and a detailed analysis" without fixing a
format, so judges answer in many shapes: "Score: -1" first, a verdict at the end, JSON, markdown
("**Score:** 1"), a bare "-1" line, a label word ("Recognized"), prose full of other numbers (years,
sample sizes), an echo of the rubric, or a refusal. ``parse_judge_output`` reads, in order:

1. a JSON object with a score/label key (``score``, ``judge_score``, ``rating``, ``label``, ``verdict``);
2. explicit statements: "score"/"rating"/"verdict"/... followed closely by a number ("Score: -1",
   "the score is 0", "I would score this -1", "Final score: 1"), and a line that is only -1, 0 or 1;
   a number directly followed by "would", "if", "means", "=" ... is a hypothetical ("a score of 1
   would mean ...") and ignored;
3. label words in a label position ("Label: Polluted", a line starting with "Recognized", "Not
   related (0)").

Rubric lines copied verbatim from the prompt are removed first. If the statements agree, that is the
score; if several differ and exactly one is marked "final", that one; a label that contradicts the
number, numbers outside {-1, 0, 1} ("Score: 5/10"), conflicting statements, no statement at all or a
refusal give ``score=None`` with the reason: the item is flagged for a re-ask, never guessed.

An ambiguous verdict, a score given as alternatives ("1 or 0", "Score: either 1 or 0", "0-1",
"1/0", "1 (or possibly 0)", a JSON ``"score": "1 or 0"``), is unparseable (method ``ambiguous``),
never read as its first number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bench_core.kernel.text import json_objects, strip_think
from bench_core.trojan.prompts import RUBRIC_LINES

SCORE_LABELS = {1: "polluted", 0: "neutral", -1: "recognized"}
_WORD_SCORES = {
    "polluted": 1,
    "contaminated": 1,
    "not related": 0,
    "not-related": 0,
    "unrelated": 0,
    "neutral": 0,
    "recognized": -1,
    "recognised": -1,
}
_WORDS = r"polluted|contaminated|not[ -]related|unrelated|neutral|recogni[sz]ed"
_JSON_SCORE_KEYS = (
    "score",
    "judge_score",
    "final_score",
    "rating",
    "label",
    "judge_label",
    "verdict",
    "classification",
)
_JSON_RATIONALE_KEYS = ("analysis", "detailed_analysis", "rationale", "explanation", "reasoning", "justification")
_KEYWORDS = r"score|rating|grade|verdict|label|judge?ment|classification|assessment"

_STATEMENT = re.compile(
    rf"(?P<final>\bfinal\s+)?\b(?:{_KEYWORDS})\b(?P<gap>[^\n.\d+\-−–]{{0,40}}?)(?P<num>[+\-−–]?\s?\d+(?:\.\d+)?)(?=(?P<after>[^\n]{{0,30}}))",
    re.IGNORECASE,
)
_HYPOTHETICAL = re.compile(
    r"^\s*(?:\([^)]*\)\s*)?(?:would|could|if|means|indicates|applies|is\s+(?:for|when|given|reserved)|=|corresponds)",
    re.IGNORECASE,
)
_BARE_LINE = re.compile(r"^[\s*_`#>\[(]*(?P<num>[+\-−–]?[01])[\s*_`)\].]*$")
_LEADING_NUMBER = re.compile(
    rf"^[\s*_`#>\[(]*(?P<num>[+\-−–]?[01])\s*[)\]]?\s*[:(\-–—]\s*\**\s*(?P<word>{_WORDS})\b", re.I
)
_LABEL_STATEMENT = re.compile(
    rf"\b(?:{_KEYWORDS}|category|result)\b\s*[:=]\s*[*_`\"'\[(]*\s*(?P<word>{_WORDS})\b", re.IGNORECASE
)
_LABEL_LINE = re.compile(rf"^[\s*_`#>\[(\"']*(?P<word>{_WORDS})\b[\s*_`)\]\"']*(?:$|[(:\-–—.,])", re.IGNORECASE)
_SCORE = r"[+\-−–]?\s?[01](?!\d|\.\d)"  # a score, not the start of 10 or 0.5
# Text right after a score that offers another score instead: " or 0", "/0", "-1" ("0-1"), " (or possibly 0)".
_ALTERNATIVE = re.compile(
    rf"^\s*[,;]?\s*\(?\s*(?:or|either|maybe|possibly|perhaps|to|/|-|–)\s*"
    rf"(?:(?:possibly|maybe|perhaps|even)\s+)?\(?\s*(?:a\s+)?{_SCORE}",
    re.IGNORECASE,
)
_ALTERNATIVES = re.compile(rf"(?<![\w.]){_SCORE}\s*(?:,\s*)?\(?\s*(?:or|/|-|–|to)\s*\(?\s*{_SCORE}", re.IGNORECASE)
_ALTERNATIVES_LINE = re.compile(
    rf"^[\s*_`#>\[(]*(?:either\s+|score\s*[:=]?\s*)?{_SCORE}\s*(?:,\s*)?\(?\s*(?:or|/|-|–|to)\s*\(?\s*"
    rf"(?:possibly\s+|maybe\s+)?{_SCORE}[\s*_`)\].]*$",
    re.IGNORECASE,
)
_REFUSAL = re.compile(
    r"\b(?:I(?:'m| am) (?:sorry|unable|not able)|I can(?:no|')t (?:help|assist|evaluate|provide|comply)|"
    r"cannot (?:assist|help|comply)|as an AI)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class JudgeVerdict:
    """The judge's score (None when flagged), its rationale, how it was read, and why it was flagged."""

    score: int | None
    rationale: str
    method: str
    problem: str | None = None

    @property
    def label(self) -> str | None:
        return SCORE_LABELS.get(self.score) if self.score is not None else None

    @property
    def flagged(self) -> bool:
        return self.score is None


def _number(text: str) -> float | None:
    cleaned = re.sub(r"\s", "", text).replace("−", "-").replace("–", "-")
    try:
        return float(cleaned)
    except ValueError:
        return None


def _score_from_value(value: Any) -> tuple[int | None, str | None]:
    """A JSON value -> score, or the reason it is not one."""
    if isinstance(value, bool):
        return None, f"not a score: {value!r}"
    if isinstance(value, int | float):
        return (int(value), None) if value in (-1, 0, 1) else (None, f"score {value} outside -1, 0, 1")
    if isinstance(value, str) and _ALTERNATIVES.search(value):
        return None, f"ambiguous score {value.strip()!r}"
    if isinstance(value, str):
        number = _number(value.strip().strip("*"))
        if number is not None:
            return _score_from_value(number)
        word = re.search(_WORDS, value, re.IGNORECASE)
        if word:
            return _WORD_SCORES[word.group(0).lower().replace("recognised", "recognized")], None
        leading = re.match(r"\s*([+\-−–]?\d+)", value)
        if leading:
            return _score_from_value(_number(leading.group(1)))
    return None, f"not a score: {value!r}"


def _strip_rubric(text: str) -> str:
    """Drop lines that repeat the prompt's rubric (bulleted or not) and the rubric header."""
    rubric = {" ".join(line.split()) for line in RUBRIC_LINES}
    kept = []
    for line in text.splitlines():
        plain = " ".join(line.split())
        unbulleted = " ".join(re.sub(r"^\s*(?:[*•]|-(?!1))\s*", "", line).split())
        if plain in rubric or unbulleted in rubric or "SCORING RUBRIC" in line:
            continue
        kept.append(line)
    return "\n".join(kept)


def parse_judge_output(text: str | None) -> JudgeVerdict:
    """Read the score and rationale from a judge's answer; see the module docstring."""
    raw = (text or "").strip()
    body = strip_think(raw).strip()
    if not body:
        return JudgeVerdict(None, raw, "none", "empty answer")
    for candidate in json_objects(body, last_first=False):
        lowered = {str(k).lower(): v for k, v in candidate.items()}
        key = next((k for k in _JSON_SCORE_KEYS if k in lowered), None)
        if key is None:
            continue
        rationale = next((str(lowered[k]) for k in _JSON_RATIONALE_KEYS if lowered.get(k)), body)
        score, problem = _score_from_value(lowered[key])
        method = "ambiguous" if problem and problem.startswith("ambiguous") else "json"
        return JudgeVerdict(score, rationale, method, problem)

    text_body = _strip_rubric(body)
    ambiguous: list[str] = []
    numbers: list[tuple[float, bool]] = []  # (value, marked final)
    scales: list[str] = []
    for match in _STATEMENT.finditer(text_body):
        if _HYPOTHETICAL.match(match.group("after")):
            continue
        value = _number(match.group("num"))
        if value is None:
            continue
        alternative = _ALTERNATIVE.match(match.group("after"))
        if alternative is not None and value in (-1, 0, 1):
            ambiguous.append((match.group("num") + alternative.group(0)).strip())
            continue
        scale = re.match(r"\s*/\s*(\d+)", match.group("after"))
        if scale:  # "7/10": a score on another scale
            scales.append(f"{value:g}/{scale.group(1)}")
            continue
        numbers.append((value, bool(match.group("final"))))
    lines = [line for line in text_body.splitlines() if line.strip()]
    ambiguous += [line.strip() for line in lines[:1] + lines[-1:] if _ALTERNATIVES_LINE.match(line)]
    if ambiguous:
        return JudgeVerdict(None, body, "ambiguous", f"ambiguous score {ambiguous[0]!r}: alternatives, not one score")
    words: list[int] = []
    for line in lines[:1] + lines[-1:] if lines else []:
        bare = _BARE_LINE.match(line)
        if bare:
            numbers.append((_number(bare.group("num")) or 0.0, False))
    for line in lines:
        leading = _LEADING_NUMBER.match(line)
        if leading:
            numbers.append((_number(leading.group("num")) or 0.0, False))
            words.append(_WORD_SCORES[leading.group("word").lower().replace("recognised", "recognized")])
    for match in _LABEL_STATEMENT.finditer(text_body):
        words.append(_WORD_SCORES[match.group("word").lower().replace("recognised", "recognized").replace("-", " ")])
    for line in lines:
        labelled = _LABEL_LINE.match(line)
        if labelled:
            words.append(
                _WORD_SCORES[labelled.group("word").lower().replace("recognised", "recognized").replace("-", " ")]
            )

    in_range = [(int(v), final) for v, final in numbers if v in (-1, 0, 1)]
    out_of_range = [f"{v:g}" for v, _ in numbers if v not in (-1, 0, 1)] + scales
    if in_range:
        values = {v for v, _ in in_range}
        if len(values) > 1:
            finals = {v for v, final in in_range if final}
            if len(finals) != 1:
                shown = ", ".join(str(v) for v in sorted(values))
                return JudgeVerdict(None, body, "conflict", f"conflicting scores {shown}")
            values = finals
        score = values.pop()
        if words and set(words) != {score}:
            label = ", ".join(sorted({SCORE_LABELS[w] for w in words}))
            return JudgeVerdict(None, body, "conflict", f"score {score} contradicts label {label}")
        return JudgeVerdict(score, body, "statement")
    if out_of_range:
        shown = ", ".join(out_of_range)
        return JudgeVerdict(None, body, "out_of_range", f"score {shown} outside -1, 0, 1")
    if words:
        if len(set(words)) > 1:
            return JudgeVerdict(
                None, body, "conflict", f"conflicting labels {', '.join(sorted({SCORE_LABELS[w] for w in words}))}"
            )
        return JudgeVerdict(words[0], body, "label")
    if _REFUSAL.search(body):
        return JudgeVerdict(None, body, "none", "refusal")
    return JudgeVerdict(None, body, "none", "no score found")
