"""Typed records shared by every benchmark design.

These pydantic models are the contract between loaders, the runner, the metrics and the review
app: a value that reaches them has been validated once, here, and is trusted afterwards.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from bench_core.medmisbench import taxonomy

Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=3)]
NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class InjectionBundle(BaseModel):
    """The option-aligned misleading-context bundle of one item.

    ``sentences`` maps every option label to its sentence: the gold option's entry is a truthful
    affirmation, every other entry a misleading sentence that supports that distractor.
    """

    model_config = ConfigDict(frozen=True)

    sentences: dict[str, str]
    content_type: str
    provenance: str
    generator_model: str | None = None
    prompt_version: str | None = None
    difficulty: float | None = Field(default=None, ge=0, le=10)
    mislead_score: float | None = Field(default=None, ge=0, le=10)

    @field_validator("content_type")
    @classmethod
    def _content(cls, value: str) -> str:
        return taxonomy.canonical_content_type(value)

    @field_validator("provenance")
    @classmethod
    def _provenance(cls, value: str) -> str:
        return taxonomy.canonical_provenance(value)


class MCQItem(BaseModel):
    """A multiple-choice question with ordered options, a gold label and an optional bundle."""

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

    @field_validator("subset")
    @classmethod
    def _subset(cls, value: str) -> str:
        return taxonomy.canonical_subset(value)

    @model_validator(mode="after")
    def _check(self) -> MCQItem:
        if len(self.options) < 2:
            raise ValueError(f"item {self.id!r} has {len(self.options)} option(s); at least 2 are needed")
        if self.gold not in self.options:
            raise ValueError(f"gold label {self.gold!r} is not among the options ({', '.join(self.options)})")
        if self.injection is not None:
            unknown = set(self.injection.sentences) - set(self.options)
            if unknown:
                raise ValueError(f"injection sentences for unknown options: {', '.join(sorted(unknown))}")
        return self

    @property
    def labels(self) -> list[str]:
        return list(self.options)

    @property
    def wrong_labels(self) -> list[str]:
        return [label for label in self.options if label != self.gold]

    @property
    def content_type(self) -> str | None:
        """The bundle's content type (taxonomy id), or None for an item without injections."""
        return self.injection.content_type if self.injection else None

    @property
    def provenance(self) -> str | None:
        """The bundle's provenance frame (taxonomy id), or None for an item without injections."""
        return self.injection.provenance if self.injection else None

    def usable_bundle_problem(self) -> str | None:
        """Why this item's bundle cannot be delivered (SPEC 1.2), or None when it can.

        An item is usable when every wrong option has a non-empty misleading sentence.
        """
        if self.injection is None or not any(s.strip() for s in self.injection.sentences.values()):
            return "no injections"
        missing = [w for w in self.wrong_labels if not self.injection.sentences.get(w, "").strip()]
        if missing:
            return f"no misleading sentence for wrong option(s) {', '.join(missing)}"
        return None
