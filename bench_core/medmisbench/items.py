"""Typed records shared by every benchmark design.

These pydantic models are the contract between loaders, the runner, the metrics and the review
app: a value that reaches them has been validated once, here, and is trusted afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from bench_core.medmisbench import taxonomy

# Up to 8 characters, as the review database's label columns: the authors' reader takes any "(1a2)"-style
# label embedded in a stem, which can be longer than the usual "A" or "12".
Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=8)]
NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Reading = Literal["medrev", "authors"]

# Evaluation protocols (docs/methods.md, "The two protocols"): ``authors`` reproduces the authors'
# notebook (its row reading, accounting and answer reading), ``strict`` is medrev's own. An item
# records the reading it was made with, so a run directory's items say which protocol its results
# follow (items saved before protocols existed were read the medrev way: ``strict``).
PROTOCOLS = ("authors", "strict")
DEFAULT_PROTOCOL = "authors"


def reading_for(protocol: str) -> Reading:
    """The row reading of a protocol."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; expected one of {', '.join(PROTOCOLS)}")
    return "authors" if protocol == "authors" else "medrev"


class InjectionBundle(BaseModel):
    """The option-aligned misleading-context bundle of one item.

    ``sentences`` maps every option label to its sentence: the gold option's entry is a truthful
    affirmation, every other entry a misleading sentence that supports that distractor.
    """

    model_config = ConfigDict(frozen=True)

    sentences: dict[str, str]
    # None only for rows of the authors' reading whose labels are missing or unknown (their notebook
    # evaluates such rows; the strata leave them out). medrev's reading refuses them.
    content_type: str | None
    provenance: str | None
    generator_model: str | None = None
    prompt_version: str | None = None
    difficulty: float | None = Field(default=None, ge=0, le=10)
    mislead_score: float | None = Field(default=None, ge=0, le=10)

    @field_validator("content_type")
    @classmethod
    def _content(cls, value: str | None) -> str | None:
        return None if value is None else taxonomy.canonical_content_type(_plain_label(value))

    @field_validator("provenance")
    @classmethod
    def _provenance(cls, value: str | None) -> str | None:
        return None if value is None else taxonomy.canonical_provenance(_plain_label(value))


def _plain_label(value: str) -> str:
    problem = taxonomy.label_characters_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


class ItemInvalid(ValueError):
    """An item medrev's reading refuses, with the item field at fault (``field``), for messages naming it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ItemProblem:
    """One reason medrev's own reading refuses an item: the item field at fault and what is wrong.

    ``field`` is in the item's terms (``options``, ``gold``, ``injection.sentences``,
    ``injection.content_type``, ``injection.provenance``); each reader names it in its own file's terms
    (the released format's ``answer`` or ``injectc``, a run directory's ``item.gold``). ``labels`` are the
    option labels concerned (sentences for options that do not exist).
    """

    field: str
    message: str
    labels: tuple[str, ...] = ()


def item_problems(
    item_id: str, options: dict[str, str], gold: str, injection: InjectionBundle | None
) -> list[ItemProblem]:
    """Every reason medrev's reading refuses an item: the one definition of a valid item, used by every reader.

    The released-format loader refuses such rows under the ``strict`` protocol and loads them with a warning
    under ``authors`` (the notebook evaluates them); ``MCQItem`` refuses them for medrev's reading whoever
    builds it; ``bench report`` warns about them and ``review import`` refuses them in a run directory's
    ``items.jsonl``, as it does in a released-format file.
    """
    problems: list[ItemProblem] = []
    if len(options) < 2:
        problems.append(ItemProblem("options", f"item {item_id!r} has {len(options)} option(s); at least 2 are needed"))
    if gold not in options:
        shown = ", ".join(options) or "none"
        problems.append(ItemProblem("gold", f"gold answer {gold!r} is not among the options ({shown})"))
    if injection is not None:
        unknown = tuple(label for label in injection.sentences if label not in options)
        if unknown:
            problems.append(
                ItemProblem(
                    "injection.sentences",
                    f"injection sentence(s) for option(s) that do not exist: {', '.join(unknown)}",
                    unknown,
                )
            )
        for name, kind in (("content_type", "content type"), ("provenance", "provenance")):
            if getattr(injection, name) is None:
                problems.append(
                    ItemProblem(f"injection.{name}", f"item {item_id!r} has injections without a known {kind}")
                )
    return problems


class MCQItem(BaseModel):
    """A multiple-choice question with ordered options, a gold label and an optional bundle.

    ``reading`` says which row reader made the item. ``"medrev"`` items are checked (at least two
    options, the gold label among them, sentences only for existing options). ``"authors"`` items
    are what the authors' notebook reads from the same row and evaluates, checks or not: a gold
    label whose option cell was a placeholder, a sentence for a dropped option. ``raw_question`` is
    the stem exactly as the notebook puts it in the prompt (unstripped) when it differs from
    ``question``; ``type1_target`` is the Type 1 target stored with the benchmark, when the file
    has one (chosen once, the same for every model: docs/methods.md, "Conditions").
    """

    model_config = ConfigDict(frozen=True)

    id: NonEmpty
    subset: NonEmpty
    language: str = "en"
    question: NonEmpty
    options: dict[Label, NonEmpty]
    gold: Label
    injection: InjectionBundle | None = None
    source_file: str | None = None
    source_line: int | None = None
    reading: Reading = "medrev"
    raw_question: str | None = None
    type1_target: Label | None = None

    @field_validator("subset")
    @classmethod
    def _subset(cls, value: str) -> str:
        return taxonomy.canonical_subset(value)

    @model_validator(mode="after")
    def _check(self) -> MCQItem:
        if self.type1_target is not None and self.type1_target not in self.type1_candidates:
            raise ValueError(
                f"Type 1 target {self.type1_target!r} is not a wrong option with a misleading sentence "
                f"({', '.join(self.type1_candidates) or 'none'})"
            )
        if self.reading == "authors":
            return self
        problems = self.medrev_problems()
        if problems:
            raise ItemInvalid(problems[0].field, problems[0].message)
        return self

    def medrev_problems(self) -> list[ItemProblem]:
        """Why medrev's own reading would refuse this item (``item_problems``); empty when it is valid."""
        return item_problems(self.id, self.options, self.gold, self.injection)

    @property
    def labels(self) -> list[str]:
        return list(self.options)

    @property
    def wrong_labels(self) -> list[str]:
        return [label for label in self.options if label != self.gold]

    @property
    def protocol(self) -> str:
        """The evaluation protocol this item's reading belongs to (``authors`` or ``strict``)."""
        return "authors" if self.reading == "authors" else "strict"

    @property
    def prompt_question(self) -> str:
        """The stem as it goes into a prompt: the unstripped text the authors' reader keeps, else ``question``."""
        return self.question if self.raw_question is None else self.raw_question

    @property
    def type1_candidates(self) -> list[str]:
        """The labels a Type 1 target can be: wrong options with a misleading sentence, in option order.

        For the authors' reading these are the sentence labels other than the gold one, as their
        notebook draws from (a sentence whose option cell was a placeholder included); for medrev's,
        the wrong options, which all have a sentence when the bundle is usable.
        """
        sentences = self.injection.sentences if self.injection is not None else {}
        if self.reading == "authors":
            return [label for label in sentences if label.strip().upper() != self.gold.upper()]
        return [label for label in self.wrong_labels if sentences.get(label, "").strip()]

    @property
    def content_type(self) -> str | None:
        """The bundle's content type (taxonomy id), or None for an item without injections."""
        return self.injection.content_type if self.injection else None

    @property
    def provenance(self) -> str | None:
        """The bundle's provenance frame (taxonomy id), or None for an item without injections."""
        return self.injection.provenance if self.injection else None

    def usable_bundle_problem(self) -> str | None:
        """Why this item's bundle cannot be delivered, or None when it can.

        An item is usable when every wrong option has a non-empty misleading sentence.
        """
        if self.injection is None or not any(s.strip() for s in self.injection.sentences.values()):
            return "no injections"
        missing = [w for w in self.wrong_labels if not self.injection.sentences.get(w, "").strip()]
        if missing:
            return f"no misleading sentence for wrong option(s) {', '.join(missing)}"
        return None
