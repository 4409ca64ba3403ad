"""What a task shows its raters and its lead: exactly the material the protocol shows for its rubric.

The review page and the adjudication page both show :func:`material`, so a lead judges what the
raters judged; the model's identity is never part of it, and a rubric that hides the model's answer
or the target sentence leaves them out here, server-side (docs/security.md, "Blinding and
pseudonyms"). Items and responses never change once imported, so the material of a task is prepared
once per process (:func:`cached_material`) and a page rerun reads only the assignment's own rows.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from bench_core.medmisbench import taxonomy
from review_app.db.models import Item, ModelResponse, Task
from review_app.rubrics import get_rubric


@dataclass(frozen=True)
class TaskMaterial:
    """Exactly what the protocol shows for a rubric (docs/security.md, "Blinding and pseudonyms"), and nothing else.

    Raters see it on the review page and leads on the adjudication page, so a lead judges what the
    raters judged; the model's identity is never part of it.
    """

    rubric: str
    subset: str
    language: str
    question: str
    options: list[tuple[str, str]]
    gold_label: str | None
    content_type: str | None
    provenance: str | None
    target_label: str | None = None
    target_sentence: str | None = None
    condition: str | None = None
    injected_context: list[tuple[str, str]] = field(default_factory=list)
    model_answer: str | None = None
    response_text: str | None = None
    reasoning: str | None = None
    retracted: dict[str, Any] = field(default_factory=dict)
    judge: dict[str, Any] = field(default_factory=dict)
    # the taxonomy entries of the labels (display name, definition, requires, not applicable when), so
    # pages show the inline definitions without importing bench_core
    content_definition: taxonomy.ContentType | None = None
    provenance_definition: taxonomy.Provenance | None = None


def _context(item: Item, condition: str | None, target: str | None) -> list[tuple[str, str]]:
    sentences = item.injections or {}
    if condition is None or condition.startswith("clean"):
        return []
    if condition.startswith("type1"):
        return [(target, sentences[target])] if target and target in sentences else []
    return [(label, sentences[label]) for label, _text in item.options if label in sentences]


def material(item: Item, response: ModelResponse | None, rubric_key: str) -> TaskMaterial:
    """The material the protocol shows for ``rubric_key``.

    Shared by the review page and the adjudication page, so a lead adjudicates on exactly what the
    raters saw (model identity stays hidden on both).
    """
    rubric = get_rubric(rubric_key)
    target = (response.target_label if response and response.target_label else None) or item.target_label
    sentences = item.injections or {}
    view: dict[str, Any] = {
        "rubric": rubric_key,
        "subset": item.subset,
        "language": item.language,
        "question": item.question,
        "options": [(label, text) for label, text in item.options],
        "gold_label": item.gold_label,
        "content_type": item.content_type,
        "provenance": item.provenance,
        "content_definition": taxonomy.content_type(item.content_type) if item.content_type else None,
        "provenance_definition": taxonomy.provenance(item.provenance) if item.provenance else None,
    }
    if "target" in rubric.shows:
        view["target_label"] = target
        view["target_sentence"] = sentences.get(target) if target else None
    if response is not None and rubric.needs_response:
        view["condition"] = response.condition
        view["response_text"] = response.response_text
        view["reasoning"] = response.reasoning
        if "model_answer" in rubric.shows:
            view["model_answer"] = response.chosen_label
        if "injected_context" in rubric.shows:
            view["target_label"] = target if response.condition.startswith("type1") else None
            view["injected_context"] = _context(item, response.condition, target)
        if "judge_label" in rubric.shows:
            view["judge"] = {
                "label": response.payload.get("judge_label"),
                "rationale": response.payload.get("judge_rationale", ""),
            }
    if "retracted_study" in rubric.shows:
        view["retracted"] = dict(item.payload)
    return TaskMaterial(**view)


_MATERIAL_ENTRIES = 4096
_material_cache: OrderedDict[tuple, TaskMaterial] = OrderedDict()
_material_lock = threading.Lock()


def cached_material(session: Session, engine: Engine, task: Task) -> TaskMaterial:
    """A task's material, prepared once per item, response and rubric for the whole process.

    Items and responses are never changed once imported (a re-import adds or skips rows), so the
    material of a task never changes either: the review page's reruns (a score, a submit, the next
    task) read only the assignment's own rows, not the item's text again.
    """
    key = (str(engine.url), task.item_id, task.response_id, task.rubric)
    with _material_lock:
        found = _material_cache.get(key)
        if found is not None:
            _material_cache.move_to_end(key)
            return found
    item = session.get(Item, task.item_id)
    response = session.get(ModelResponse, task.response_id) if task.response_id is not None else None
    shown = material(item, response, task.rubric)
    with _material_lock:
        _material_cache[key] = shown
        while len(_material_cache) > _MATERIAL_ENTRIES:
            _material_cache.popitem(last=False)
    return shown
