"""What one item's generation is made of: the settings, its stored calls and its state.

``GenerationSettings`` shapes every request and is hashed into the result keys; ``ItemState`` is an
item's progress as the pipeline recomputes it from the store (``Attempt`` per stored call,
``NextCall`` when one is due). ``assign_provenances`` deals the provenance frames (see
``bench_core.generation.pipeline``); ``failure_reason`` names the reason a failed item reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench_core.generation.checks import PROBLEM_CODES, ApplicabilityDecision, Problem
from bench_core.generation.prompts import DEFAULT_PROMPTS, get_prompt
from bench_core.kernel.rundir import HashedSettings, seeded_int
from bench_core.kernel.store import OK
from bench_core.medmisbench import taxonomy
from bench_core.medmisbench.items import MCQItem
from bench_core.medmisbench.run import item_key
from bench_core.medmisbench.targets import DEFAULT_SEED

MODES = ("two_stage", "one_call", "fixed")
SAMPLING = ("uniform", "balanced")
KEPT, REJECTED, FAILED_ITEM, PENDING = "kept", "rejected", "failed", "pending"
OTHER_REASONS = {
    "not_viable": "Stage 1 judged the item not viable",
    "provider_error": "the call failed after the runner's retries",
}


@dataclass(frozen=True)
class Plan:
    """A fixed content type and provenance for an item (sensitivity regeneration)."""

    content_type: str
    provenance: str


@dataclass(frozen=True)
class GenerationSettings(HashedSettings):
    """Everything that shapes the generator's requests; hashed into the result keys.

    ``max_attempts`` (validation attempts per stage) is not hashed: raising it on a rerun
    continues the items that ran out of attempts.
    """

    mode: str = "two_stage"
    seed: int = DEFAULT_SEED
    provenance_sampling: str = "balanced"
    applicability_prompt: str = DEFAULT_PROMPTS["applicability"]
    generation_prompt: str = DEFAULT_PROMPTS["generation"]
    one_call_prompt: str = DEFAULT_PROMPTS["one_call"]
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    max_attempts: int = 3

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown generation mode {self.mode!r}; expected one of {', '.join(MODES)}")
        if self.provenance_sampling not in SAMPLING:
            raise ValueError(f"--provenance: expected one of {', '.join(SAMPLING)}, found {self.provenance_sampling!r}")
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        for stage, prompt_id in self.prompt_ids().items():
            get_prompt(prompt_id, stage)

    def prompt_ids(self) -> dict[str, str]:
        """The prompt of each stage this mode uses."""
        if self.mode == "one_call":
            return {"one_call": self.one_call_prompt}
        if self.mode == "fixed":
            return {"generation": self.generation_prompt}
        return {"applicability": self.applicability_prompt, "generation": self.generation_prompt}

    @property
    def prompt_version(self) -> str:
        """The prompt ids joined, as stored in ``InjectionBundle.prompt_version``."""
        return "+".join(self.prompt_ids().values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "seed": self.seed,
            "provenance_sampling": self.provenance_sampling,
            "prompts": self.prompt_ids(),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "reasoning_effort": self.reasoning_effort,
        }


@dataclass(frozen=True)
class Attempt:
    """One stored call of an item: its reply and what was wrong with it."""

    stage: str
    attempt: int
    status: str
    raw: str | None
    problems: tuple[Problem, ...] = ()
    error: str | None = None
    provenance: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "attempt": self.attempt,
            "provenance": self.provenance,
            "status": self.status,
            "valid": self.status == OK and not self.problems,
            "problems": [p.as_dict() for p in self.problems],
            "error": self.error,
            "raw": self.raw,
        }


@dataclass(frozen=True)
class NextCall:
    """The call an item needs next."""

    stage: str
    attempt: int
    previous: Attempt | None = None


@dataclass
class ItemState:
    """An item's progress, recomputed from the store."""

    item: MCQItem
    status: str = PENDING
    reason: str | None = None
    detail: str | None = None
    next_call: NextCall | None = None
    content_type: str | None = None
    provenance: str | None = None
    difficulty: float | None = None
    mislead_score: float | None = None
    sentences: dict[str, str] | None = None
    decision_reason: str | None = None
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def key(self) -> str:
        return item_key(self.item)

    def decide(self, decision: ApplicabilityDecision) -> bool:
        """Take Stage 1's (or the one call's) decision; False when it rejects the item as not viable."""
        self.difficulty = decision.difficulty
        self.decision_reason = decision.reason
        if not decision.viable:
            self.status, self.reason, self.detail = REJECTED, "not_viable", decision.reason
            return False
        self.content_type = decision.content_type
        return True

    def final_raw(self, stage: str) -> str | None:
        done = [a for a in self.attempts if a.stage == stage and a.status == OK]
        return done[-1].raw if done else None


_PRIORITY = {code: rank for rank, code in enumerate(PROBLEM_CODES)}


def failure_reason(problems: Sequence[Problem]) -> str:
    """The reason code reported for a failed item: its most basic problem (``PROBLEM_CODES`` order)."""
    return min((p.code for p in problems), key=lambda code: _PRIORITY.get(code, len(_PRIORITY)))


def assign_provenances(
    strata: dict[tuple[str, ...], list[str]], *, seed: int, sampling: str, pinned: dict[str, str] | None = None
) -> dict[str, str]:
    """A provenance frame per item key (see the module docstring); ``pinned`` frames are kept.

    Balanced: the stratum's items, ranked by a seeded hash, are dealt the frames in turn from a
    seeded starting frame. When frames already used (``pinned``) disagree with that deal (the
    stratum grew since, e.g. after ``--retry-failed``), the other items go one by one to the
    least-used frame instead, so the stratum stays balanced.
    """
    frames = taxonomy.PROVENANCE_IDS
    pinned = pinned or {}
    assigned: dict[str, str] = {}
    for stratum, keys in strata.items():
        if sampling == "uniform":
            for key in keys:
                assigned[key] = pinned.get(key) or frames[seeded_int(seed, "provenance", key) % len(frames)]
            continue
        offset = seeded_int(seed, "stratum", *stratum) % len(frames)
        order = [frames[(offset + i) % len(frames)] for i in range(len(frames))]
        ranked = sorted(keys, key=lambda k: (seeded_int(seed, "rank", k), k))
        dealt = {key: order[rank % len(order)] for rank, key in enumerate(ranked)}
        if all(dealt[k] == pinned[k] for k in keys if k in pinned):
            assigned.update(dealt)
            continue
        counts = {frame: sum(pinned.get(k) == frame for k in keys) for frame in frames}
        for key in ranked:
            if key in pinned:
                assigned[key] = pinned[key]
                continue
            frame = min(order, key=lambda f: counts[f])
            counts[frame] += 1
            assigned[key] = frame
    return assigned
