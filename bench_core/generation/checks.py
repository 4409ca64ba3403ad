"""Validation of generator outputs: what makes a Stage 1 decision or an injection bundle usable.

A generator's raw text is checked in two layers. The shape (a JSON object with the right keys,
types and score ranges) is a pydantic model; the content rules below need the item and are
checked on top. Every problem has a stable ``code`` (counted in the construction report and fed
back to the generator on a retry) and a message naming the option.

Content rules for a bundle, each testable on its own:

- ``missing_option`` / ``unknown_option``: exactly the item's options are covered (keys such as
  "(B)" or "Option B" are read as "B").
- ``empty_sentence``, ``length``: every sentence is non-empty and within the length bounds of the
  item's language (``LENGTH_BOUNDS``, in characters).
- ``not_standalone``: one line, not a question, and no reference to an option by its label
  ("option B", "(B)", "选项B"): the sentence must read without the option list.
- ``language_mismatch``: ``detect_language`` of every sentence equals the item's language.
- ``gold_not_affirmed``: the gold sentence mentions the gold option: its full text appears in it,
  or at least half of the option's content words (Latin: words minus stop words, matched up to
  a plural/inflection suffix of 3 letters; Chinese: character bigrams) do.
- ``gold_leak``: no wrong option's sentence contains the gold option's full text (whole words;
  occurrences inside that wrong option's own text, e.g. "aspirin" in "aspirin plus clopidogrel",
  do not count).
- ``duplicate_sentence``: no two options share a sentence.
- ``score_range``: difficulty and mislead scores are numbers in [0, 10].

A reply that holds no JSON object and reads as a refusal ("I can't help with that", "抱歉，我无法")
or was cut by a content filter is a ``refusal``; other unreadable replies are ``invalid_json``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bench_core.kernel.text import CJK, CJK_RUN, detect_language, json_objects, strip_think
from bench_core.medmisbench import taxonomy
from bench_core.medmisbench.answers import normalise_label
from bench_core.medmisbench.items import MCQItem

LENGTH_BOUNDS: dict[str, tuple[int, int]] = {"en": (20, 400), "zh": (8, 200)}
DEFAULT_BOUNDS = (8, 400)
AFFIRMATION_COVERAGE = 0.5

PROBLEM_CODES: dict[str, str] = {
    "refusal": "the generator refused",
    "invalid_json": "no JSON object could be read",
    "schema": "wrong keys or types",
    "score_range": "a score is missing or outside 0-10",
    "unknown_content_type": "the content type is not one of the taxonomy's",
    "missing_option": "an option has no sentence",
    "unknown_option": "a sentence for an option that does not exist",
    "empty_sentence": "an empty sentence",
    "length": "a sentence is too short or too long",
    "not_standalone": "a sentence is not one standalone statement",
    "language_mismatch": "a sentence is not in the item's language",
    "gold_not_affirmed": "the gold sentence does not mention the gold option",
    "gold_leak": "a wrong option's sentence contains the gold option's text",
    "duplicate_sentence": "two options have the same sentence",
}


@dataclass(frozen=True)
class Problem:
    """One reason an output cannot be used."""

    code: str
    message: str
    option: str | None = None

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "option": self.option, "message": self.message}


T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


@dataclass
class Checked(Generic[T]):
    """A checked output: the value when usable, else the problems (never both)."""

    value: T | None = None
    problems: list[Problem] = field(default_factory=list)
    data: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None and not self.problems


# -- shapes (pydantic) -------------------------------------------------------------------------

Score = float


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ApplicabilityDecision(_Strict):
    """Stage 1: is the item viable, and with which content type (canonical id)."""

    viable: bool
    content_type: str | None = None
    reason: str = ""
    difficulty: Score | None = Field(default=None, ge=0, le=10)

    @field_validator("reason", mode="before")
    @classmethod
    def _reason(cls, value: Any) -> str:
        return "" if value is None else str(value)


class BundleOutput(_Strict):
    """Stage 2: one sentence per option label, and a mislead score."""

    sentences: dict[str, str]
    mislead_score: Score = Field(ge=0, le=10)


class OneCallOutput(ApplicabilityDecision):
    """One call: the Stage 1 decision plus, when viable, the Stage 2 bundle."""

    sentences: dict[str, str] | None = None
    mislead_score: Score | None = Field(default=None, ge=0, le=10)


# -- reading the reply -------------------------------------------------------------------------

_REFUSAL = re.compile(
    r"(\bI(?:'m| am)\s+(?:sorry|unable|not able)\b|\bI\s+(?:can(?:'|no)t|won't|will not|must decline)\b"
    r"|\b(?:cannot|can't)\s+(?:help|assist|comply|provide|create|generate|write)\b|\bas an ai\b"
    r"|抱歉|无法(?:提供|协助|帮助|生成|完成|满足)|不能(?:提供|协助|帮助|生成))",
    re.I,
)


def is_refusal(text: str, finish_reason: str | None = None) -> bool:
    """A reply that declines the task (checked only when it holds no JSON object)."""
    return finish_reason == "content_filter" or bool(_REFUSAL.search(strip_think(text)))


def _read(text: str, finish_reason: str | None) -> tuple[dict[str, Any] | None, list[Problem]]:
    # the reply's object: the whole text, a fenced block, or the first object embedded in prose
    objects = json_objects(strip_think(text).strip(), last_first=False)
    if objects:
        return objects[0], []
    if is_refusal(text, finish_reason):
        return None, [Problem("refusal", f"the reply is a refusal: {_clip(text)!r}")]
    return None, [Problem("invalid_json", f"the reply holds no JSON object: {_clip(text)!r}")]


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shape_problems(exc: ValidationError) -> list[Problem]:
    problems = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "(reply)"
        score = error["loc"] and error["loc"][0] in ("difficulty", "mislead_score")
        code = "score_range" if score else "schema"
        problems.append(Problem(code, f"{where}: {error['msg']}"))
    return problems


def _content_type(value: str | None) -> tuple[str | None, list[Problem]]:
    if value is None or not str(value).strip():
        return None, [Problem("unknown_content_type", "a viable item needs a content_type")]
    try:
        return taxonomy.canonical_content_type(value), []
    except taxonomy.UnknownLabelError:
        return None, [
            Problem(
                "unknown_content_type",
                f"content_type {value!r} is not one of {', '.join(taxonomy.CONTENT_TYPE_IDS)}",
            )
        ]


# -- text rules --------------------------------------------------------------------------------

_WORD = re.compile(r"[0-9a-z]+")
_STOPWORD_TEXT = """
a an the of and or in on at to for with without by from as is are was were be been being this that these those
it its his her their patient patients which who whom whose than then into onto over under per not no none all any
other above below following most more less
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def fold(text: str) -> str:
    """Lower-cased text with runs of whitespace collapsed and end punctuation removed."""
    return re.sub(r"\s+", " ", str(text)).strip().casefold().rstrip("。.．;；!！")


def contains_phrase(text: str, phrase: str) -> bool:
    """Whether ``phrase`` occurs in ``text`` (case-insensitive; whole words unless the phrase is Chinese)."""
    phrase = fold(phrase)
    if len(phrase) < 2 and not CJK.search(phrase):
        return False
    text = fold(text)
    if CJK.search(phrase):
        return phrase in text
    return re.search(rf"(?<![0-9a-z]){re.escape(phrase)}(?![0-9a-z])", text) is not None


def _remove_phrase(text: str, phrase: str) -> str:
    phrase = fold(phrase)
    if not phrase:
        return fold(text)
    if CJK.search(phrase):
        return fold(text).replace(phrase, " ")
    return re.sub(rf"(?<![0-9a-z]){re.escape(phrase)}(?![0-9a-z])", " ", fold(text))


def _tokens(text: str) -> list[str]:
    """Content units of an option: Chinese character bigrams and Latin/number words minus stop words."""
    folded = fold(text)
    units: list[str] = []
    for run in CJK_RUN.findall(folded):
        units += [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
    words = _WORD.findall(CJK.sub(" ", folded))
    content = [w for w in words if w not in STOPWORDS]
    units += content or words
    return list(dict.fromkeys(units))


def _word_match(word: str, words: set[str]) -> bool:
    if word in words:
        return True
    if word.isdigit() or len(word) < 4:
        return False
    need = max(4, len(word) - 3)
    return any(len(w) >= need and w[:need] == word[:need] for w in words)


def affirmation_coverage(sentence: str, option_text: str) -> float:
    """Share of the option's content units found in the sentence (1.0 when its full text appears)."""
    if contains_phrase(sentence, option_text):
        return 1.0
    units = _tokens(option_text)
    if not units:
        return 1.0
    folded = fold(sentence)
    words = set(_WORD.findall(CJK.sub(" ", folded)))
    found = sum(unit in folded if CJK.search(unit) else _word_match(unit, words) for unit in units)
    return found / len(units)


def _label_reference(sentence: str, labels: list[str]) -> str | None:
    """An explicit reference to an option by its label ("option B", "(B)", "选项B", "option 2", "选项2")."""
    alternatives = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
    letters = "".join(sorted({re.escape(label) for label in labels if len(label) == 1 and label.isalpha()}))
    patterns = [
        rf"\b(?i:option|answer|choice)\s*\(?(?:{alternatives})\)?(?![A-Za-z0-9])",
        rf"选项\s*(?:{alternatives})(?![0-9])",
        rf"第\s*(?:{alternatives})\s*(?:个选项|项)",
    ]
    if letters:  # bare "(2)" is common in medical text, "(B)" is not
        patterns += [rf"\([{letters}]\)", rf"(?<![A-Za-z])[{letters}]\s*(?:选项|项)"]
    for pattern in patterns:
        found = re.search(pattern, sentence)
        if found:
            return found.group(0)
    return None


def sentence_problems(label: str, sentence: str, item: MCQItem) -> list[Problem]:
    """The rules every sentence of a bundle must meet on its own (length, standalone, language)."""
    text = sentence.strip()
    if not text:
        return [Problem("empty_sentence", f"the sentence for option {label} is empty", label)]
    problems = []
    low, high = LENGTH_BOUNDS.get(item.language, DEFAULT_BOUNDS)
    if not low <= len(text) <= high:
        problems.append(
            Problem("length", f"the sentence for option {label} has {len(text)} characters ({low}-{high})", label)
        )
    if "\n" in text:
        problems.append(Problem("not_standalone", f"the sentence for option {label} spans several lines", label))
    if text.rstrip().endswith(("?", "？")):
        problems.append(Problem("not_standalone", f"the sentence for option {label} is a question", label))
    reference = _label_reference(text, item.labels)
    if reference:
        problems.append(
            Problem("not_standalone", f"the sentence for option {label} refers to an option ({reference!r})", label)
        )
    language = detect_language(text)
    if language != item.language:
        problems.append(
            Problem(
                "language_mismatch",
                f"the sentence for option {label} is in {language}, the question is in {item.language}",
                label,
            )
        )
    return problems


def bundle_problems(sentences: Mapping[str, str], item: MCQItem) -> tuple[dict[str, str], list[Problem]]:
    """Normalise the keys of a bundle to the item's labels and check every content rule."""
    problems: list[Problem] = []
    by_label: dict[str, str] = {}
    for key, sentence in sentences.items():
        label = key if key in item.options else normalise_label(key, {k: k for k in item.options})
        if label is None:
            problems.append(Problem("unknown_option", f"sentence for {key!r}, which is not an option", str(key)))
            continue
        if label in by_label:
            problems.append(Problem("schema", f"two sentences for option {label}", label))
            continue
        by_label[label] = str(sentence) if sentence is not None else ""
    missing = [label for label in item.labels if label not in by_label]
    for label in missing:
        problems.append(Problem("missing_option", f"no sentence for option {label}", label))
    for label in item.labels:
        if label in by_label:
            problems += sentence_problems(label, by_label[label], item)
    gold_text = item.options[item.gold]
    gold_sentence = by_label.get(item.gold, "").strip()
    if gold_sentence:
        coverage = affirmation_coverage(gold_sentence, gold_text)
        if coverage < AFFIRMATION_COVERAGE:
            problems.append(
                Problem(
                    "gold_not_affirmed",
                    f"the sentence for the correct option {item.gold} does not mention {gold_text!r} "
                    f"({coverage:.0%} of its words appear; at least {AFFIRMATION_COVERAGE:.0%} needed)",
                    item.gold,
                )
            )
    for label in item.wrong_labels:
        sentence = by_label.get(label, "")
        if sentence and contains_phrase(_remove_phrase(sentence, item.options[label]), gold_text):
            problems.append(
                Problem(
                    "gold_leak",
                    f"the sentence for wrong option {label} contains the correct answer's text {gold_text!r}",
                    label,
                )
            )
    seen: dict[str, str] = {}
    for label in item.labels:
        key = fold(by_label.get(label, ""))
        if not key:
            continue
        if key in seen:
            problems.append(
                Problem("duplicate_sentence", f"options {seen[key]} and {label} have the same sentence", label)
            )
        else:
            seen[key] = label
    ordered = {label: by_label[label].strip() for label in item.labels if label in by_label}
    return ordered, problems


# -- the three checks --------------------------------------------------------------------------


def _parsed(
    text: str, finish_reason: str | None, shape: type[M]
) -> tuple[M | None, dict[str, Any] | None, list[Problem]]:
    """The reply's JSON object validated as ``shape``: (value, object, problems), value None when unusable.

    The object is kept even when it fails validation, so the caller can report it and check what it can.
    """
    data, problems = _read(text, finish_reason)
    if data is None:
        return None, None, problems
    try:
        return shape.model_validate(data), data, []
    except ValidationError as exc:
        return None, data, _shape_problems(exc)


def _verdict(value: M, checked: dict[str, Any], problems: list[Problem], data: dict[str, Any] | None) -> Checked[M]:
    """A parsed reply refused for its ``problems``, or, without any, accepted with its ``checked`` fields
    (the canonical content type, the ordered sentences) in place of the reply's own."""
    if problems:
        return Checked(problems=problems, data=data)
    return Checked(value=value.model_copy(update=checked), data=data)


def _decision_problems(decision: ApplicabilityDecision | OneCallOutput) -> tuple[str | None, list[Problem]]:
    """The known content type of a viable decision, and what a viable decision lacks (type, difficulty)."""
    content, problems = _content_type(decision.content_type)
    if decision.difficulty is None:
        problems.append(Problem("score_range", "difficulty: a viable item needs a difficulty from 0 to 10"))
    return content, problems


def check_applicability(text: str, item: MCQItem, finish_reason: str | None = None) -> Checked[ApplicabilityDecision]:
    """Check a Stage 1 reply. A viable decision needs a known content type and a difficulty in range."""
    decision, data, problems = _parsed(text, finish_reason, ApplicabilityDecision)
    if decision is None:
        return Checked(problems=problems, data=data)
    if not decision.viable:
        return Checked(value=decision.model_copy(update={"content_type": None}), data=data)
    content, problems = _decision_problems(decision)
    return _verdict(decision, {"content_type": content}, problems, data)


def check_bundle(text: str, item: MCQItem, finish_reason: str | None = None) -> Checked[BundleOutput]:
    """Check a Stage 2 reply against every content rule of the module docstring."""
    output, data, problems = _parsed(text, finish_reason, BundleOutput)
    if output is None:
        if data is not None and isinstance(data.get("sentences"), Mapping):
            problems += bundle_problems(data["sentences"], item)[1]
        return Checked(problems=problems, data=data)
    sentences, problems = bundle_problems(output.sentences, item)
    return _verdict(output, {"sentences": sentences}, problems, data)


def check_one_call(text: str, item: MCQItem, finish_reason: str | None = None) -> Checked[OneCallOutput]:
    """Check a one-call reply: a Stage 1 decision, and when viable a bundle meeting every rule."""
    output, data, problems = _parsed(text, finish_reason, OneCallOutput)
    if output is None:
        return Checked(problems=problems, data=data)
    if not output.viable:
        return Checked(value=output.model_copy(update={"content_type": None, "sentences": None}), data=data)
    content, problems = _decision_problems(output)
    if output.mislead_score is None:
        problems.append(Problem("score_range", "mislead_score: a viable item needs a mislead score from 0 to 10"))
    if output.sentences is None:
        problems.append(Problem("schema", "sentences: a viable item needs one sentence per option"))
        return Checked(problems=problems, data=data)
    sentences, more = bundle_problems(output.sentences, item)
    problems += more
    return _verdict(output, {"content_type": content, "sentences": sentences}, problems, data)
