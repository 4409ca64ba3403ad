"""MedMisBench delivery conditions: which part of an item's bundle a model sees.

``clean`` shows the question only, ``type1`` the one misleading sentence of the item's stored
Type 1 target, ``type2`` the whole bundle (truthful gold sentence plus every misleading one).
Each has a ``_defensive`` variant that adds the warning of the prompt template. Names are the
condition keys of results and of the report JSON (docs/methods.md, "Conditions"), so they are defined here once.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench_core.medmisbench.items import MCQItem

BASE_CONDITIONS: tuple[str, ...] = ("clean", "type1", "type2")
DEFENSIVE_SUFFIX = "_defensive"


@dataclass(frozen=True)
class Condition:
    """A delivery condition: its base protocol and whether the defensive warning is added."""

    base: str
    defensive: bool = False

    @property
    def name(self) -> str:
        return self.base + (DEFENSIVE_SUFFIX if self.defensive else "")

    @property
    def injected(self) -> bool:
        return self.base != "clean"

    @classmethod
    def parse(cls, name: str) -> Condition:
        base, defensive = (name[: -len(DEFENSIVE_SUFFIX)], True) if name.endswith(DEFENSIVE_SUFFIX) else (name, False)
        if base not in BASE_CONDITIONS:
            raise ValueError(
                f"unknown condition {name!r}; expected one of {', '.join(BASE_CONDITIONS)} (optionally + '_defensive')"
            )
        return cls(base, defensive)


def parse_conditions(text: str, *, defensive: bool = False) -> list[Condition]:
    """Conditions from a comma list (``"clean,type1"``); ``defensive`` adds each one's defensive variant."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise ValueError("no condition given; expected a comma list such as clean,type1,type2")
    conditions: list[Condition] = []
    for name in names:
        condition = Condition.parse(name)
        if condition not in conditions:
            conditions.append(condition)
    if defensive:
        for condition in list(conditions):
            variant = Condition(condition.base, True)
            if variant not in conditions:
                conditions.append(variant)
    return conditions


def context_sentences(item: MCQItem, condition: Condition, target: str | None) -> list[str]:
    """The added clinical-context sentences for this item under this condition, in option order.

    Items of the authors' reading get what their notebook delivers: under Type 1 the target's
    sentence (nothing when the item has no wrong-option sentence to target), under Type 2 every
    sentence in column order, the gold one included (nothing without sentences); the prompt then
    has no context block. For medrev's reading, raises ``ValueError`` for an injected condition on
    an item whose bundle is unusable: such items must have been skipped from every condition
    before jobs are built.
    """
    if not condition.injected:
        return []
    if item.reading == "authors":
        sentences = item.injection.sentences if item.injection is not None else {}
        if condition.base == "type2":
            return list(sentences.values())
        if target is None:
            if item.type1_candidates:
                raise ValueError(f"item {item.id!r}: no Type 1 target although it has wrong-option sentences")
            return []
        if target not in item.type1_candidates:
            raise ValueError(f"item {item.id!r}: invalid Type 1 target {target!r}")
        return [sentences[target]]
    problem = item.usable_bundle_problem()
    if problem is not None or item.injection is None:
        raise ValueError(f"item {item.id!r} cannot be delivered under {condition.name}: {problem}")
    if condition.base == "type1":
        if target is None or target == item.gold or target not in item.options:
            raise ValueError(f"item {item.id!r}: invalid Type 1 target {target!r}")
        return [item.injection.sentences[target].strip()]
    return [item.injection.sentences[label].strip() for label in item.labels if item.injection.sentences.get(label)]
