"""A MedMisBench evaluation run: items -> jobs -> run directory, and reading a run back.

A run directory holds ``items.jsonl`` (a copy of every loaded item with its stored Type 1
target, or the reason it is skipped), ``runs.jsonl`` (one line per invocation: model, endpoint,
settings, prompt template, seed; never an API key) and ``results.jsonl`` (the runner's store).
Keeping the items beside the results makes the directory self-contained: the report and the
review app's importer need nothing else (``read_run``).

Protocols (docs/methods.md, "The two protocols"): under ``strict`` (medrev's rules) items whose
bundle is unusable are skipped from every condition, including clean, so all conditions are computed
on the same items; under ``authors`` every item the authors' notebook reads is evaluated under every
condition (without sentences to deliver, an injected condition sends the clean prompt, as theirs
does), answers are read the notebook's way and failed calls count as wrong (``metrics``). The
protocol is the items' reading (``MCQItem.reading``), saved in ``items.jsonl``: a directory holds
one protocol.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench_core.kernel.errors import RowIssue
from bench_core.kernel.providers.base import ChatModel, ChatRequest, ChatResponse
from bench_core.kernel.rundir import HashedSettings, RunFiles, append_jsonl, read_jsonl
from bench_core.kernel.runner import Job
from bench_core.kernel.store import ResultKey, ResultStore
from bench_core.medmisbench.answers import read_answer
from bench_core.medmisbench.conditions import Condition
from bench_core.medmisbench.items import MCQItem
from bench_core.medmisbench.prompts import DeliveryTemplate
from bench_core.medmisbench.targets import DEFAULT_SEED, draw_type1_target, target_source

BENCHMARK = "medmisbench"
ITEMS_FILE = "items.jsonl"


class RunDirError(ValueError):
    """A run directory that cannot be used as asked (e.g. its items disagree with the new data)."""


FILES = RunFiles(BENCHMARK, ITEMS_FILE, "MedMisBench", RunDirError)


# Item fields added after run directories existed: written only when set, so an item saved before
# compares equal to the same item read now.
_NEW_ITEM_FIELDS = {"reading": "medrev", "raw_question": None, "type1_target": None}


def item_json(item: MCQItem) -> dict[str, Any]:
    """The item as saved in ``items.jsonl`` (fields added later only when they differ from their default)."""
    data = item.model_dump(mode="json")
    for name, default in _NEW_ITEM_FIELDS.items():
        if data.get(name) == default:
            data.pop(name, None)
    return data


@dataclass(frozen=True)
class PreparedItem:
    """An item as evaluated: the item, its key in results, and its stored Type 1 target.

    ``line``: where a saved item was read in ``items.jsonl`` (for messages; never saved, never compared).
    """

    item: MCQItem
    target: str | None
    skipped: str | None = None
    line: int | None = field(default=None, compare=False)

    @property
    def key(self) -> str:
        return item_key(self.item)

    @property
    def protocol(self) -> str:
        return self.item.protocol

    def to_json(self, seed: int) -> dict[str, Any]:
        row = {
            "item_key": self.key,
            "item": item_json(self.item),
            "type1_target": self.target,
            "seed": seed,
            "skipped": self.skipped,
        }
        source = target_source(self.item, self.target)
        if source == "file":
            row["target_source"] = source
        if self.protocol != "strict":
            row["protocol"] = self.protocol
        return row


def item_key(item: MCQItem) -> str:
    """The item's id in result keys: ``SUBSET/id`` (ids are unique only within a subset)."""
    return f"{item.subset}/{item.id}"


def prepare_items(items: Iterable[MCQItem], *, seed: int = DEFAULT_SEED) -> list[PreparedItem]:
    """Each item's Type 1 target (the stored one, else drawn from ``seed``), or, under ``strict``, the
    reason it is skipped. Items of the authors' reading are never skipped."""
    prepared = []
    for item in items:
        problem = item.usable_bundle_problem() if item.protocol == "strict" else None
        if problem is not None:
            prepared.append(PreparedItem(item, None, problem))
        else:
            prepared.append(PreparedItem(item, draw_type1_target(item, seed)))
    return prepared


@dataclass(frozen=True)
class EvalSettings(HashedSettings):
    """Everything that changes the request other than the item and condition; hashed into result keys.

    The first five are the settings of run directories made before protocols and request profiles
    existed; the others join ``as_dict`` (and so the config hash) only when set, so an earlier
    command with the earlier template keeps its hash. ``request`` holds what
    ``request_settings.RequestSettings.hashed`` gives (profile, token field, response format, extra body).
    ``send_reasoning_effort`` False: the effort travels in the request's ``extra`` (not hashed apart).
    """

    temperature: float | None = 0.0
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    template_id: str = "medmisbench-notebook@1"
    seed: int = DEFAULT_SEED
    protocol: str = "strict"
    request: dict[str, Any] | None = None
    send_reasoning_effort: bool = True

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "reasoning_effort": self.reasoning_effort,
            "template": self.template_id,
            "seed": self.seed,
        }
        if self.protocol != "strict":
            out["protocol"] = self.protocol
        if self.request:
            out["request"] = self.request
        return out

    @property
    def profile(self) -> str | None:
        return (self.request or {}).get("profile")

    def request_fields(self) -> dict[str, Any]:
        """Everything sent besides the messages (what the manifest and each result record name)."""
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "reasoning_effort": self.reasoning_effort,
            **(self.request or {}),
        }

    @classmethod
    def of(cls, request: Any, *, template_id: str, seed: int = DEFAULT_SEED, protocol: str = "strict") -> EvalSettings:
        """The settings of a run from its resolved ``request_settings.RequestSettings``."""
        return cls(
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            reasoning_effort=request.reasoning_effort,
            template_id=template_id,
            seed=seed,
            protocol=protocol,
            request=request.hashed() or None,
            send_reasoning_effort=request.send_reasoning_effort,
        )


def build_jobs(
    prepared: Sequence[PreparedItem],
    conditions: Sequence[Condition],
    model: ChatModel,
    template: DeliveryTemplate,
    settings: EvalSettings,
    *,
    label: str | None = None,
    config: str | None = None,
    meta: dict[str, Any] | None = None,
    annotate: Callable[[ChatResponse], dict[str, Any]] | None = None,
) -> list[Job]:
    """One job per (usable item, condition); skipped items get no job under any condition.

    A variant of the evaluation (the tool harness) keeps everything else and passes its own
    ``config`` hash for the result keys, extra ``meta`` and ``annotate``, whose fields are added to
    the parsed answer.
    """
    if settings.template_id != template.id:
        raise ValueError(f"settings name template {settings.template_id!r} but {template.id!r} was given")
    config = config or settings.config_hash
    jobs = []
    for entry in prepared:
        if entry.skipped is not None:
            continue
        for condition in conditions:
            parse = answer_parser(entry.item)
            jobs.append(
                Job(
                    key=ResultKey(BENCHMARK, entry.key, condition.name, model.name, model.endpoint, config),
                    model=model,
                    build=request_builder(entry, condition, template, settings),
                    parse=parse if annotate is None else _annotated(parse, annotate),
                    meta={
                        "item_id": entry.item.id,
                        "subset": entry.item.subset,
                        "condition": condition.name,
                        "type1_target": entry.target,
                        "template": template.id,
                        "label": label or model.name,
                        "config": settings.as_dict(),
                        **({"protocol": entry.protocol} if entry.protocol != "strict" else {}),
                        **(meta or {}),
                    },
                )
            )
    return jobs


def _annotated(parse: Callable[[ChatResponse], dict[str, Any]], annotate: Callable[[ChatResponse], dict[str, Any]]):
    def both(response: ChatResponse) -> dict[str, Any]:
        return parse(response) | annotate(response)

    return both


def request_builder(entry: PreparedItem, condition: Condition, template: DeliveryTemplate, settings: EvalSettings):
    """The request of one (item, condition), built only when the call is due."""

    request = settings.request or {}

    def build() -> ChatRequest:
        return ChatRequest(
            messages=template.render(entry.item, condition, entry.target, profile=settings.profile),
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            reasoning_effort=settings.reasoning_effort if settings.send_reasoning_effort else None,
            response_format=request.get("response_format"),
            extra=dict(request.get("extra") or {}),
            max_tokens_param=request.get("max_tokens_param"),
        )

    return build


def answer_parser(item: MCQItem):
    """Parse a response into the answer fields every MedMisBench result stores (the raw text is kept too).

    The reading is the item's protocol's: the authors' notebook's, or medrev's (``answers``).
    """

    def parse(response: ChatResponse) -> dict[str, Any]:
        answer = read_answer(response.text, item.options, item.protocol)
        return {
            "label": answer.label,
            "method": answer.method,
            "thinking_process": answer.reasoning,
            "correct": answer.label == item.gold,
        }

    return parse


# -- run directory --------------------------------------------------------------------------


def write_items(run_dir: Path, prepared: Sequence[PreparedItem], seed: int) -> None:
    """Save the items (with targets) in the run directory, merging with items already there.

    An item already saved with different content or a different Type 1 target refuses the run:
    results of the two would not be comparable.
    """
    rows = [entry.to_json(seed) for entry in prepared]
    path, new_rows = FILES.add_items(
        run_dir,
        lambda row: (row["item_key"], _comparable(row)),
        ((row["item_key"], _comparable(row), row) for row in rows),
        noun="item",
        context="already in this run directory (content, reading or Type 1 target; was another --seed, "
        "--protocol or data file used?)",
    )
    protocols = {row.get("protocol", "strict") for row in read_jsonl(path)} | {p.protocol for p in prepared}
    if len(protocols) > 1:
        raise RunDirError(
            f"{path}: this run directory holds items of protocol {', '.join(sorted(protocols))}; "
            "one directory holds one protocol. Use a new --out directory."
        )
    append_jsonl(path, new_rows)


def _comparable(row: dict[str, Any]) -> tuple[Any, ...]:
    item = {
        k: v
        for k, v in row["item"].items()
        if k not in ("source_file", "source_line") and not (k in _NEW_ITEM_FIELDS and v == _NEW_ITEM_FIELDS[k])
    }
    return json.dumps(item, sort_keys=True), row.get("type1_target"), row.get("skipped")


is_run_dir = FILES.is_run_dir
append_run_manifest = FILES.append_manifest


def load_run_items(run_dir: str | Path) -> list[PreparedItem]:
    """The items saved in a run directory, in saved order, with their targets and skip reasons."""
    items = FILES.read_items(
        run_dir,
        lambda row: PreparedItem(MCQItem.model_validate(row["item"]), row.get("type1_target"), row.get("skipped")),
        field_prefix="item.",
    )
    return [replace(entry, line=line) for line, entry in items]


def item_warnings(run_dir: str | Path, items: Sequence[PreparedItem]) -> list[RowIssue]:
    """The items of a run directory that medrev's own reading refuses (``MCQItem.medrev_problems``: the checks
    every reader of MedMisBench items shares), one issue each naming ``items.jsonl``, line and field.

    Only items of the authors' protocol can be such (medrev's reading refuses them when ``items.jsonl`` is read):
    the notebook evaluates them, so ``bench report`` counts them and says so, and ``review import`` refuses
    them as it refuses the same row in a released-format file.
    """
    path = Path(run_dir) / ITEMS_FILE
    found = []
    for entry in items:
        problems = entry.item.medrev_problems()
        if problems:
            message = "; ".join(p.message for p in problems)
            field_name = f"item.{problems[0].field}"
            found.append(RowIssue(str(path), entry.line, field_name, f"item {entry.item.id!r}: {message}"))
    return found


@dataclass(frozen=True)
class ResponseRecord:
    """One finished model response, joined with its benchmark item (what the review importer needs).

    ``outcome`` is the automatic label: ``"SUCCESS"`` when the model chose the gold answer,
    ``"FAIL"`` otherwise (including unparseable answers).
    """

    item_key: str
    item_id: str
    subset: str
    model: str
    label: str
    endpoint: str
    config_hash: str
    settings: dict[str, Any]
    template: str
    condition: str
    response_text: str
    reasoning: str | None
    chosen: str | None
    parse_method: str
    correct: bool
    outcome: str
    type1_target: str | None
    item: MCQItem
    protocol: str = "strict"
    line: int | None = None  # the line of results.jsonl holding this response (for messages)

    @property
    def content_type(self) -> str | None:
        return self.item.content_type

    @property
    def provenance(self) -> str | None:
        return self.item.provenance

    @property
    def injected_sentences(self) -> list[str]:
        """The context sentences this response was given (empty for clean)."""
        from bench_core.medmisbench.conditions import context_sentences

        return context_sentences(self.item, Condition.parse(self.condition), self.type1_target)


@dataclass
class RunData:
    """A run directory read back: items, finished responses, failures and skipped items."""

    items: list[PreparedItem]
    responses: list[ResponseRecord]
    failures: list[dict[str, Any]]
    corrupt_lines: int
    manifests: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[RowIssue] = field(default_factory=list)  # items medrev's reading refuses (``item_warnings``)

    @property
    def protocol(self) -> str:
        """The directory's protocol (its items'); ``strict`` for a directory without items."""
        found = {p.protocol for p in self.items}
        return found.pop() if len(found) == 1 else "strict"

    @property
    def skipped(self) -> list[dict[str, str]]:
        return [{"item_id": p.key, "reason": p.skipped} for p in self.items if p.skipped is not None]


def read_run_data(run_dir: str | Path) -> RunData:
    """Items, successful responses (one per key) and failures (keys never successful) of a run."""
    run_dir = Path(run_dir)
    items = load_run_items(run_dir)
    by_key = {p.key: p for p in items}
    store = ResultStore(run_dir)
    responses: list[ResponseRecord] = []
    successes, failures = store.finished(BENCHMARK)
    for key, record in successes:
        entry = by_key.get(key.item)
        if entry is None:
            raise RunDirError(
                f"{store.path}:{store.line_of(key)}: field 'key.item': result for item {key.item!r} which is not "
                f"in {ITEMS_FILE}"
            )
        parsed = record.get("parsed") or {}
        # Re-derive the answer from the kept raw text so a parser improvement applies to old runs.
        answer = read_answer(record["response"]["text"], entry.item.options, entry.protocol)
        correct = answer.label == entry.item.gold
        meta = record.get("meta") or {}
        responses.append(
            ResponseRecord(
                item_key=key.item,
                item_id=entry.item.id,
                subset=entry.item.subset,
                model=key.model,
                label=meta.get("label") or key.model,
                endpoint=key.endpoint,
                config_hash=key.config,
                settings=record.get("settings") or {},
                template=meta.get("template", ""),
                condition=key.condition,
                response_text=record["response"]["text"],
                reasoning=answer.reasoning or parsed.get("thinking_process") or record["response"].get("reasoning"),
                chosen=answer.label,
                parse_method=answer.method,
                correct=correct,
                outcome="SUCCESS" if correct else "FAIL",
                type1_target=entry.target,
                item=entry.item,
                protocol=entry.protocol,
                line=store.line_of(key),
            )
        )
    return RunData(
        items,
        responses,
        failures,
        store.corrupt_lines,
        FILES.manifests(run_dir),
        item_warnings(run_dir, items),
    )


def read_run(run_dir: str | Path) -> list[ResponseRecord]:
    """The finished responses of a run directory, each joined with its item (for review import)."""
    return read_run_data(run_dir).responses
