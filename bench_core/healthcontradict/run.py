"""A HealthContradict evaluation run: instances -> jobs -> run directory, and reading a run back.

A run directory holds ``instances.jsonl`` (every instance as evaluated, documents included, so the
directory is self-contained), ``runs.jsonl`` (one line per invocation: model, endpoint or model
folder, settings, label tokens, template set; never an API key) and ``results.jsonl`` (the runner's
store). Result keys are ``("healthcontradict", item, template, model, endpoint, config hash)``.

Calls: the four context templates are asked once per instance. NC does not depend on the documents,
so it is asked once per topic (item ``topic-<id>``; the paper's 81 NC prompts) and its prediction
is shared by the topic's instances, so NC metrics, OR, VM and McNemar are over the same instances as
the other templates (as the released ``prompts_1.jsonl`` repeats the NC prompt per instance).

Truncation: when a context window is known (a local model's, or ``max_context_tokens`` for an API
model with an approximate word count), documents that do not fit are cut, keeping each document's
beginning; two documents share the room equally (a shorter one leaves the rest to the other). What
was cut is recorded per prompt in the result's ``meta["truncation"]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bench_core.healthcontradict.items import HCInstance
from bench_core.healthcontradict.prompts import TEMPLATE_ORDER, HCTemplate, HCTemplateSet
from bench_core.healthcontradict.scoring import YesNo, predict
from bench_core.kernel.providers.base import ChatModel, ChatRequest, ChatResponse
from bench_core.kernel.rundir import HashedSettings, RunFiles, append_jsonl
from bench_core.kernel.runner import Job
from bench_core.kernel.store import ResultKey, ResultStore

BENCHMARK = "healthcontradict"
INSTANCES_FILE = "instances.jsonl"


class RunDirError(ValueError):
    """A run directory that cannot be used as asked (its instances disagree with the new data)."""


FILES = RunFiles(BENCHMARK, INSTANCES_FILE, "HealthContradict", RunDirError)


class TokenCounter(Protocol):
    """What truncation needs: a name, a text cut into pieces (tokens or words) and back, a prompt's length."""

    name: str

    def pieces(self, text: str) -> list[Any]: ...

    def join(self, pieces: Sequence[Any]) -> str: ...

    def prompt_tokens(self, prompt: str) -> int: ...


class WordCounter:
    """An approximate counter for API models: whitespace-separated words (a word is usually 1-2 tokens)."""

    name = "words"

    def pieces(self, text: str) -> list[str]:
        return text.split()

    def join(self, pieces: Sequence[str]) -> str:
        return " ".join(pieces)

    def prompt_tokens(self, prompt: str) -> int:
        return len(prompt.split())


class TokenizerCounter:
    """Exact counts from a local model's tokenizer (``HFLogitModel``: encode, decode, prompt_tokens)."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.name = model.token_counter_name

    def pieces(self, text: str) -> list[int]:
        return self._model.encode(text)

    def join(self, pieces: Sequence[int]) -> str:
        return self._model.decode(pieces)

    def prompt_tokens(self, prompt: str) -> int:
        return self._model.prompt_tokens(prompt)


def context_words(instance: HCInstance, template: HCTemplate) -> int:
    """Words of the documents the template shows, before any truncation (the quartile variable)."""
    docs = {"correct": instance.correct_doc, "incorrect": instance.incorrect_doc}
    return sum(len(docs[role].split()) for role in template.documents)


def _share(budget: int, lengths: list[int]) -> list[int]:
    """Split ``budget`` tokens among documents equally; a document shorter than its share gives the rest away."""
    kept = [0] * len(lengths)
    remaining = budget
    for position, index in enumerate(sorted(range(len(lengths)), key=lambda i: lengths[i])):
        share = remaining // (len(lengths) - position)
        kept[index] = min(lengths[index], max(0, share))
        remaining -= kept[index]
    return kept


@dataclass(frozen=True)
class FittedPrompt:
    """The prompt as sent, and what truncation did to its documents."""

    text: str
    truncation: dict[str, Any]


def fit_prompt(
    template: HCTemplate, instance: HCInstance, counter: TokenCounter | None, window: int | None
) -> FittedPrompt:
    """Render ``template`` for ``instance``, cutting documents so the prompt fits ``window`` tokens."""
    docs = {"correct": instance.correct_doc, "incorrect": instance.incorrect_doc}
    full = template.render(instance.query, **docs)
    if counter is None or window is None:
        return FittedPrompt(full, {"window": None, "counter": None, "truncated": False, "prompt_tokens": None})
    total = counter.prompt_tokens(full)
    record: dict[str, Any] = {"window": window, "counter": counter.name, "truncated": False}
    if total <= window or not template.documents:
        return FittedPrompt(full, {**record, "prompt_tokens": total})
    pieces = {role: counter.pieces(docs[role]) for role in template.documents}
    skeleton = counter.prompt_tokens(template.render(instance.query, "", ""))
    budget = window - skeleton
    if budget <= 0:
        raise ValueError(
            f"instance {instance.instance_id}: the {template.name} prompt without documents exceeds {window}"
        )
    lengths = [len(pieces[role]) for role in template.documents]
    for _ in range(50):
        kept = _share(budget, lengths)
        cut = {role: counter.join(pieces[role][:k]) for role, k in zip(template.documents, kept, strict=True)}
        text = template.render(instance.query, **{**docs, **cut})
        tokens = counter.prompt_tokens(text)
        if tokens <= window:
            documents = [
                {"role": role, "tokens": n, "kept": k}
                for role, n, k in zip(template.documents, lengths, kept, strict=True)
            ]
            return FittedPrompt(
                text,
                {
                    **record,
                    "truncated": True,
                    "prompt_tokens": tokens,
                    "prompt_tokens_full": total,
                    "documents": documents,
                },
            )
        budget -= max(1, tokens - window)  # a cut can re-tokenise longer at the seam: shrink and retry
    raise ValueError(f"instance {instance.instance_id}: cannot fit the {template.name} prompt into {window} tokens")


@dataclass(frozen=True)
class HCSettings(HashedSettings):
    """Everything that changes a call other than the instance and template; hashed into result keys."""

    template_set: str
    scorer: str = "api"  # "api" or "hf"
    temperature: float | None = 0.0
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    logprobs: bool = True
    top_logprobs: int = 20
    label_mode: str | None = None
    max_context_tokens: int | None = None
    chat_template: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "template_set": self.template_set,
            "scorer": self.scorer,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "reasoning_effort": self.reasoning_effort,
            "logprobs": self.logprobs,
            "top_logprobs": self.top_logprobs if self.logprobs else None,
            "label_mode": self.label_mode,
            "max_context_tokens": self.max_context_tokens,
            "chat_template": self.chat_template,
        }


def nc_item(topic_id: int) -> str:
    """The result-key item of a topic's NC call."""
    return f"topic-{topic_id}"


def build_jobs(
    instances: Sequence[HCInstance],
    templates: Sequence[str],
    model: ChatModel,
    template_set: HCTemplateSet,
    settings: HCSettings,
    *,
    counter: TokenCounter | None = None,
    label: str | None = None,
) -> list[Job]:
    """One job per (instance, context template), and one NC job per topic."""
    if settings.template_set != template_set.id:
        raise ValueError(f"settings name template set {settings.template_set!r} but {template_set.id!r} was given")
    window = settings.max_context_tokens
    source = "logits" if settings.scorer == "hf" else "api"
    jobs: list[Job] = []
    seen_topics: set[int] = set()
    for instance in instances:
        for name in templates:
            template = template_set[name]
            if name == "NC":
                if instance.topic_id in seen_topics:
                    continue
                seen_topics.add(instance.topic_id)
                item = nc_item(instance.topic_id)
            else:
                item = instance.instance_id
            meta: dict[str, Any] = {
                "instance_id": None if name == "NC" else instance.instance_id,
                "topic_id": instance.topic_id,
                "template": name,
                "template_set": template_set.id,
                "gold": instance.query_stance,
                "context_words": context_words(instance, template),
                "label": label or model.name,
                "config": settings.as_dict(),
            }
            jobs.append(
                Job(
                    key=ResultKey(BENCHMARK, item, name, model.name, model.endpoint, settings.config_hash),
                    model=model,
                    build=_builder(template, instance, settings, counter, window, meta),
                    parse=_parser(instance.query_stance, source),
                    meta=meta,
                )
            )
    return jobs


def _builder(
    template: HCTemplate,
    instance: HCInstance,
    settings: HCSettings,
    counter: TokenCounter | None,
    window: int | None,
    meta: dict[str, Any],
):
    def build() -> ChatRequest:
        fitted = fit_prompt(template, instance, counter, window)
        # The runner writes ``job.meta`` after the call, so the truncation found here is recorded with it.
        meta["truncation"] = fitted.truncation
        extra: dict[str, Any] = {}
        if settings.scorer == "api" and settings.logprobs:
            extra = {"logprobs": True, "top_logprobs": settings.top_logprobs}
        return ChatRequest(
            messages=({"role": "user", "content": fitted.text},),
            temperature=settings.temperature if settings.scorer == "api" else None,
            max_tokens=settings.max_tokens if settings.scorer == "api" else None,
            reasoning_effort=settings.reasoning_effort,
            extra=extra,
        )

    return build


def _parser(gold: str, source: str):
    def parse(response: ChatResponse) -> dict[str, Any]:
        prediction = predict(response.text, response.logprobs, source=source)
        return _parsed(prediction, gold, response)

    return parse


def _parsed(prediction: YesNo, gold: str, response: ChatResponse) -> dict[str, Any]:
    entries = list(response.logprobs or [])
    position = next((i for i, e in enumerate(entries) if e.get("top_logprobs")), None)
    return {
        "label": prediction.label,
        "p_yes": prediction.p_yes,
        "p_hat": prediction.p_hat,
        "method": prediction.method,
        "detail": prediction.detail,
        "correct": prediction.label == gold,
        # the log-probabilities the probability came from, kept so it can be recomputed
        "answer_logprobs": entries[: (position or 0) + 1] if entries else None,
    }


# -- run directory --------------------------------------------------------------------------


def write_instances(run_dir: Path, instances: Sequence[HCInstance]) -> None:
    """Save the instances in the run directory, merging with those already there.

    An instance already saved with different content refuses the run: results would not be comparable.
    """
    rows = [instance.model_dump(mode="json") for instance in instances]
    path, new_rows = FILES.add_items(
        run_dir,
        lambda row: (row["instance"]["instance_id"], row["instance"]),
        ((row["instance_id"], row, {"instance": row}) for row in rows),
        noun="instance",
        context="already in this run directory (was another data file or pairing seed used?)",
    )
    append_jsonl(path, new_rows)


is_run_dir = FILES.is_run_dir
append_run_manifest = FILES.append_manifest


def load_run_instances(run_dir: str | Path) -> list[HCInstance]:
    read = FILES.read_items(run_dir, lambda row: HCInstance.model_validate(row["instance"]), field_prefix="instance.")
    return [instance for _line, instance in read]


@dataclass(frozen=True)
class HCPrediction:
    """One model's prediction for one instance under one template (NC predictions are the topic's)."""

    instance_id: str
    topic_id: int
    template: str
    model: str
    model_name: str
    endpoint: str
    config_hash: str
    gold: str
    label: str | None
    p_yes: float | None
    p_hat: float | None
    method: str
    correct: bool
    context_words: int
    truncated: bool
    prompt_tokens: int | None
    response_text: str


@dataclass
class HCRunData:
    """A run directory read back."""

    instances: list[HCInstance]
    predictions: list[HCPrediction]
    failures: list[dict[str, Any]]
    corrupt_lines: int
    manifests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def templates(self) -> list[str]:
        found = {p.template for p in self.predictions} | {f["key"]["condition"] for f in self.failures}
        return [name for name in TEMPLATE_ORDER if name in found]


def read_run_data(run_dir: str | Path) -> HCRunData:
    """Instances, predictions (one per instance x template x model; NC expanded to the topic's instances), failures."""
    run_dir = Path(run_dir)
    instances = load_run_instances(run_dir)
    by_id = {i.instance_id: i for i in instances}
    by_topic: dict[int, list[HCInstance]] = {}
    for instance in instances:
        by_topic.setdefault(instance.topic_id, []).append(instance)
    store = ResultStore(run_dir)
    predictions: list[HCPrediction] = []
    successes, failures = store.finished(BENCHMARK)
    for key, record in successes:
        meta = record.get("meta") or {}
        parsed = record.get("parsed") or {}
        if key.condition == "NC":
            topic = int(key.item.removeprefix("topic-"))
            targets = by_topic.get(topic)
            if not targets:
                raise RunDirError(
                    f"{store.path}:{store.line_of(key)}: field 'key.item': NC result for topic {topic} which has "
                    f"no instance in {INSTANCES_FILE}"
                )
        else:
            if key.item not in by_id:
                raise RunDirError(
                    f"{store.path}:{store.line_of(key)}: field 'key.item': result for instance {key.item!r} which "
                    f"is not in {INSTANCES_FILE}"
                )
            targets = [by_id[key.item]]
        truncation = meta.get("truncation") or {}
        for instance in targets:
            label = parsed.get("label")
            predictions.append(
                HCPrediction(
                    instance_id=instance.instance_id,
                    topic_id=instance.topic_id,
                    template=key.condition,
                    model=meta.get("label") or key.model,
                    model_name=key.model,
                    endpoint=key.endpoint,
                    config_hash=key.config,
                    gold=instance.query_stance,
                    label=label,
                    p_yes=parsed.get("p_yes"),
                    p_hat=parsed.get("p_hat"),
                    method=parsed.get("method", "unparseable"),
                    correct=label == instance.query_stance,
                    context_words=int(meta.get("context_words", 0)),
                    truncated=bool(truncation.get("truncated")),
                    prompt_tokens=truncation.get("prompt_tokens"),
                    response_text=(record.get("response") or {}).get("text", ""),
                )
            )
    return HCRunData(instances, predictions, failures, store.corrupt_lines, FILES.manifests(run_dir))
