"""Typed records of HealthContradict: queries, documents, contradiction pairs and instances.

Loaders (``bench_core.healthcontradict.data``), prompts, the run and the report all pass these
around; a value that reaches them has been validated once, by the pydantic model, and is trusted
afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

Stance = Literal["yes", "no"]


class HCQuery(BaseModel):
    """One health question with its factual answer (supported by scientific evidence)."""

    model_config = ConfigDict(frozen=True)

    topic_id: int
    query: str
    query_stance: Stance


class HCDocument(BaseModel):
    """One web document judged by TREC assessors as supporting (yes) or dissuading (no) the treatment."""

    model_config = ConfigDict(frozen=True)

    topic_id: int
    doc_id: str
    stance: Stance
    text: str | None


@dataclass(frozen=True)
class HCPair:
    """A contradiction pair of two documents of one topic, as in ``doc-contradict.csv``."""

    topic_id: int
    doc1_id: str
    doc2_id: str
    pair_type: str = "contradiction"


class HCInstance(BaseModel):
    """A question, its factual answer and two contradicting documents: ``doc_a`` says yes, ``doc_b`` no."""

    model_config = ConfigDict(frozen=True)

    instance_id: str
    topic_id: int
    query: str
    query_stance: Stance
    doc_a: str
    doc_b: str
    doc_a_id: str | None = None
    doc_b_id: str | None = None

    @field_validator("instance_id", mode="before")
    @classmethod
    def _id_text(cls, value: object) -> object:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @property
    def correct_doc(self) -> str:
        """The document whose stance equals the factual answer."""
        return self.doc_a if self.query_stance == "yes" else self.doc_b

    @property
    def incorrect_doc(self) -> str:
        return self.doc_b if self.query_stance == "yes" else self.doc_a


@dataclass
class HCDataset:
    """Loaded instances plus how they were obtained (recorded in the run manifest)."""

    instances: list[HCInstance]
    source: str
    pairing: str
    files: list[str] = field(default_factory=list)
