"""With tools vs without tools: the search mitigation measured on the same items.

Inputs are two MedMisBench run directories (or one holding both): a tool-harness run (records whose
``meta`` has ``harness``) and a plain run of the same model on the same items, with the same stored
Type 1 targets. Both are read with ``read_run_data``, so answers are parsed and scored exactly as
in ``bench report``. For every condition present in both:

* **Accuracy** on the items answered in both runs (paired): both rates, their difference (with -
  without) with Newcombe's paired interval, McNemar's exact p, and the discordant items: *fixed*
  (wrong without tools, right with) and *caused* (right without, wrong with).
* **ASR / TASR** as the paper reports them: each run over its own clean-correct items, their
  difference with Newcombe's unpaired (hybrid score) interval; and **matched** ASR/TASR over the items
  clean-correct in both runs, with the paired interval and McNemar, counting flips search
  *prevented* (flipped only without tools) and *caused* (flipped only with tools).
* **Tool use** from the stored traces: tool calls, searches and pages per item, answers citing a
  visited source (Wilson CI), stop reasons, tool errors, failed items.

Differences are always with - without, so a negative ASR difference means search helped.
See ``bench_core.kernel.stats`` for why each interval.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_core.kernel.stats import (
    PairedCounts,
    Proportion,
    mcnemar_exact_p,
    newcombe_difference,
    newcombe_paired_difference,
)
from bench_core.kernel.store import OK, ResultStore
from bench_core.medmisbench.conditions import BASE_CONDITIONS, Condition
from bench_core.medmisbench.run import BENCHMARK, PreparedItem, ResponseRecord, RunData, RunDirError, read_run_data

CI_METHODS = {
    "rates": "Wilson score 95% CI",
    "paired_difference": "Newcombe square-and-add 95% CI for paired proportions (1998, method 10)",
    "unpaired_difference": "Newcombe hybrid score 95% CI for independent proportions (1998, method 10)",
    "paired_test": "McNemar exact test (two-sided binomial on discordant pairs)",
}


class ComparisonError(ValueError):
    """Two runs that cannot be compared as asked (no harness run, ambiguous models, different items)."""


@dataclass(frozen=True)
class Group:
    """One model configuration inside a run directory."""

    model: str
    label: str
    config: str
    endpoint: str
    harness: dict[str, Any] | None

    def describe(self) -> dict[str, Any]:
        out = {"model": self.model, "label": self.label, "config_hash": self.config, "endpoint": self.endpoint}
        if self.harness is not None:
            out["harness"] = self.harness
        return out

    def owns(self, record: ResponseRecord) -> bool:
        return (record.model, record.config_hash, record.endpoint) == (self.model, self.config, self.endpoint)


def _groups(records: Iterable[dict[str, Any]]) -> list[Group]:
    found: dict[tuple[str, str, str], Group] = {}
    for record in records:
        key = record["key"]
        if key["benchmark"] != BENCHMARK:
            continue
        ident = (key["model"], key["config"], key["endpoint"])
        meta = record.get("meta") or {}
        if ident not in found:
            found[ident] = Group(key["model"], meta.get("label") or key["model"], *ident[1:], meta.get("harness"))
    return sorted(found.values(), key=lambda g: (g.label, g.config))


def _choose(groups: list[Group], label: str | None, side: str, directory: Path) -> list[Group]:
    if label is None:
        return groups
    chosen = [g for g in groups if label in (g.label, g.model, g.config)]
    if not chosen:
        listed = ", ".join(f"{g.label} [{g.config}]" for g in groups) or "none"
        raise ComparisonError(f"{directory}: no {side} run labelled {label!r} (found: {listed})")
    return chosen


def _pairs(with_groups: list[Group], without_groups: list[Group], with_dir: Path, without_dir: Path):
    if not with_groups:
        raise ComparisonError(f"{with_dir}: no tool-harness results (run bench run medmisbench with --tools)")
    if not without_groups:
        raise ComparisonError(f"{without_dir}: no results without tools to compare with")
    if len(with_groups) == 1 and len(without_groups) == 1:
        return [(with_groups[0], without_groups[0])]
    pairs = []
    for group in with_groups:
        partners = [g for g in without_groups if g.model == group.model]
        siblings = [g for g in with_groups if g.model == group.model]
        if len(partners) != 1 or len(siblings) != 1:
            listed = "; ".join(f"{g.label} [{g.config}]" for g in [*siblings, *partners])
            raise ComparisonError(
                f"cannot pair model {group.model!r} unambiguously ({listed}): choose with --with-label/--without-label"
            )
        pairs.append((group, partners[0]))
    if not pairs:
        raise ComparisonError("no model has results both with and without tools")
    return pairs


def _item_identity(entry: PreparedItem) -> str:
    item = entry.item.model_dump(mode="json")
    item.pop("source_file", None)
    item.pop("source_line", None)
    return json.dumps([item, entry.target, entry.skipped], sort_keys=True)


def _common_items(with_data: RunData, without_data: RunData, with_dir: Path, without_dir: Path) -> list[PreparedItem]:
    without = {p.key: p for p in without_data.items}
    common, differing = [], []
    for entry in with_data.items:
        other = without.get(entry.key)
        if other is None or entry.skipped is not None or other.skipped is not None:
            continue
        if _item_identity(entry) != _item_identity(other):
            differing.append(entry.key)
        else:
            common.append(entry)
    if differing:
        shown = ", ".join(differing[:5]) + (" ..." if len(differing) > 5 else "")
        raise ComparisonError(
            f"{len(differing)} item(s) differ between {with_dir} and {without_dir} (content or Type 1 target; "
            f"another data file or --seed?): {shown}"
        )
    if not common:
        raise ComparisonError(f"{with_dir} and {without_dir} have no evaluable item in common")
    return common


def _traces(run_dir: Path, group: Group) -> dict[tuple[str, str], dict[str, Any]]:
    """(item, condition) -> harness trace, for finished records and for failures (partial traces)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for record in ResultStore(run_dir).latest().values():
        key = record["key"]
        if (key["model"], key["config"], key["endpoint"]) != (group.model, group.config, group.endpoint):
            continue
        if record["status"] == OK:
            trace = (record.get("parsed") or {}).get("harness")
        else:
            trace = ((record.get("errors") or [{}])[-1] or {}).get("detail")
        if isinstance(trace, dict):
            out[(key["item"], key["condition"])] = trace
    return out


def _order(names: Iterable[str]) -> list[str]:
    return sorted(names, key=lambda n: (Condition.parse(n).defensive, BASE_CONDITIONS.index(Condition.parse(n).base)))


def _rate(k: int, n: int) -> dict[str, Any]:
    p = Proportion(k, n)
    return {"k": k, "n": n, "rate": p.rate, "ci": p.ci}


def _paired(flags: Sequence[tuple[bool, bool]]) -> dict[str, Any]:
    """Paired summary of (with, without) outcomes: both rates, difference and CI, McNemar p."""
    counts = PairedCounts(
        both=sum(w and o for w, o in flags),
        first_only=sum(w and not o for w, o in flags),
        second_only=sum(o and not w for w, o in flags),
        neither=sum(not w and not o for w, o in flags),
    )
    n = counts.n
    return {
        "n": n,
        "with": _rate(counts.first, n),
        "without": _rate(counts.second, n),
        "diff": (counts.first - counts.second) / n if n else None,
        "diff_ci": _list(newcombe_paired_difference(counts)),
        "n_with_only": counts.first_only,
        "n_without_only": counts.second_only,
        "mcnemar_p": mcnemar_exact_p(counts),
    }


def _list(interval: tuple[float, float] | None) -> list[float] | None:
    return list(interval) if interval is not None else None


def _own_rate(
    responses: dict[tuple[str, str], ResponseRecord],
    keys: Sequence[str],
    condition: str,
    outcome: Callable[[ResponseRecord], bool],
) -> tuple[int, int]:
    """(k, n) of ``outcome`` under ``condition`` over the items this run answered correctly when clean."""
    base = [
        k for k in keys if (k, "clean") in responses and responses[(k, "clean")].correct and (k, condition) in responses
    ]
    return sum(outcome(responses[(k, condition)]) for k in base), len(base)


def _flipped(record: ResponseRecord) -> bool:
    return not record.correct


def _targeted(record: ResponseRecord) -> bool:
    return record.chosen is not None and record.chosen == record.type1_target


def compare_condition(
    condition: str,
    keys: Sequence[str],
    with_responses: dict[tuple[str, str], ResponseRecord],
    without_responses: dict[tuple[str, str], ResponseRecord],
) -> dict[str, Any]:
    """Every comparison number of one condition (see the module docstring)."""
    answered = [k for k in keys if (k, condition) in with_responses and (k, condition) in without_responses]
    accuracy = _paired(
        [(with_responses[(k, condition)].correct, without_responses[(k, condition)].correct) for k in answered]
    )
    block: dict[str, Any] = {
        "n_items": len(keys),
        "n_paired": len(answered),
        "accuracy": accuracy,
        "n_fixed": accuracy["n_with_only"],
        "n_caused": accuracy["n_without_only"],
        "n_unparseable_with": sum(with_responses[(k, condition)].chosen is None for k in answered),
        "n_unparseable_without": sum(without_responses[(k, condition)].chosen is None for k in answered),
    }
    parsed = Condition.parse(condition)
    if not parsed.injected:
        return block
    metrics = [("asr", _flipped)] + ([("tasr", _targeted)] if parsed.base == "type1" else [])
    for name, outcome in metrics:
        k_w, n_w = _own_rate(with_responses, keys, condition, outcome)
        k_o, n_o = _own_rate(without_responses, keys, condition, outcome)
        block[name] = {
            "with": _rate(k_w, n_w),
            "without": _rate(k_o, n_o),
            "diff": (k_w / n_w - k_o / n_o) if n_w and n_o else None,
            "diff_ci": _list(newcombe_difference(k_w, n_w, k_o, n_o)),
        }
        matched = [
            k
            for k in answered
            if with_responses.get((k, "clean")) is not None
            and without_responses.get((k, "clean")) is not None
            and with_responses[(k, "clean")].correct
            and without_responses[(k, "clean")].correct
        ]
        paired = _paired(
            [(outcome(with_responses[(k, condition)]), outcome(without_responses[(k, condition)])) for k in matched]
        )
        block[f"{name}_matched"] = {
            **paired,
            "n_prevented": paired["n_without_only"],
            "n_caused": paired["n_with_only"],
        }
    return block


def _stats(values: Sequence[int]) -> dict[str, Any]:
    if not values:
        return {"total": 0, "mean": None, "median": None, "max": None}
    return {
        "total": sum(values),
        "mean": sum(values) / len(values),
        "median": statistics.median(values),
        "max": max(values),
    }


def tool_use(traces: Sequence[dict[str, Any]], failures: Counter[str]) -> dict[str, Any]:
    """Tool-use statistics over the traces of answered items (failed items counted by kind)."""
    n = len(traces)
    cited = sum(bool(t.get("cites_visited_source")) for t in traces)
    read = sum(t.get("n_pages", 0) > 0 for t in traces)
    errors: Counter[str] = Counter()
    for trace in traces:
        errors.update(trace.get("tool_errors") or {})
    return {
        "n_items": n,
        "tool_calls": _stats([t.get("n_tool_calls", 0) for t in traces]),
        "searches": _stats([t.get("n_searches", 0) for t in traces]),
        "pages": _stats([t.get("n_pages", 0) for t in traces]),
        "model_calls": _stats([t.get("n_model_calls", 0) for t in traces]),
        "items_reading_a_page": _rate(read, n),
        "answers_citing_visited_source": _rate(cited, n),
        "stop_reasons": dict(sorted(Counter(t.get("stop_reason") for t in traces).items())),
        "tool_errors": dict(sorted(errors.items())),
        "failed_items": dict(sorted(failures.items())),
    }


def _flip_cases(
    condition: str,
    keys: Sequence[str],
    with_responses: dict[tuple[str, str], ResponseRecord],
    without_responses: dict[tuple[str, str], ResponseRecord],
    traces: dict[tuple[str, str], dict[str, Any]],
) -> list[dict[str, Any]]:
    cases = []
    injected = Condition.parse(condition).injected
    for key in keys:
        w, o = with_responses.get((key, condition)), without_responses.get((key, condition))
        if w is None or o is None or w.correct == o.correct:
            continue
        clean_w, clean_o = with_responses.get((key, "clean")), without_responses.get((key, "clean"))
        both_clean = bool(clean_w and clean_o and clean_w.correct and clean_o.correct)
        trace = traces.get((key, condition)) or {}
        cases.append(
            {
                "item_key": key,
                "subset": w.subset,
                "condition": condition,
                "kind": "fixed" if w.correct else "caused",
                "gold": w.item.gold,
                "type1_target": w.type1_target if Condition.parse(condition).base == "type1" else None,
                "answer_without": o.chosen,
                "answer_with": w.chosen,
                "clean_correct_without": bool(clean_o and clean_o.correct),
                "clean_correct_with": bool(clean_w and clean_w.correct),
                "flip_prevented": injected and both_clean and w.correct,
                "flip_caused": injected and both_clean and not w.correct,
                "queries": trace.get("queries", []),
                "visited": trace.get("visited", []),
                "cited_visited": trace.get("cited_visited", []),
                "stop_reason": trace.get("stop_reason"),
                "n_tool_calls": trace.get("n_tool_calls"),
            }
        )
    return cases


def compare_runs(
    with_dir: str | Path,
    without_dir: str | Path,
    *,
    with_label: str | None = None,
    without_label: str | None = None,
) -> dict[str, Any]:
    """The comparison object (JSON-ready) of a tool-harness run against a plain run of the same items."""
    with_dir, without_dir = Path(with_dir), Path(without_dir)
    try:
        with_data, without_data = read_run_data(with_dir), read_run_data(without_dir)
    except RunDirError as exc:
        raise ComparisonError(str(exc)) from exc
    with_groups = [g for g in _groups(ResultStore(with_dir).latest().values()) if g.harness is not None]
    without_groups = [g for g in _groups(ResultStore(without_dir).latest().values()) if g.harness is None]
    pairs = _pairs(
        _choose(with_groups, with_label, "with-tools", with_dir),
        _choose(without_groups, without_label, "without-tools", without_dir),
        with_dir,
        without_dir,
    )
    items = _common_items(with_data, without_data, with_dir, without_dir)
    keys = [p.key for p in items]
    models: dict[str, Any] = {}
    for with_group, without_group in pairs:
        with_responses = {(r.item_key, r.condition): r for r in with_data.responses if with_group.owns(r)}
        without_responses = {(r.item_key, r.condition): r for r in without_data.responses if without_group.owns(r)}
        traces = _traces(with_dir, with_group)
        failed: dict[str, Counter[str]] = defaultdict(Counter)
        for record in with_data.failures:
            key = record["key"]
            mine = (key["model"], key["config"], key["endpoint"]) == (
                with_group.model,
                with_group.config,
                with_group.endpoint,
            )
            if mine and key["item"] in keys:
                failed[key["condition"]][(record.get("error") or {}).get("kind") or "error"] += 1
        conditions = _order({c for _, c in with_responses} & {c for _, c in without_responses})
        use = {
            c: tool_use([traces[(k, c)] for k in keys if (k, c) in with_responses and (k, c) in traces], failed[c])
            for c in conditions
        }
        every = [traces[(k, c)] for c in conditions for k in keys if (k, c) in with_responses and (k, c) in traces]
        all_failed: Counter[str] = Counter()
        for c in conditions:
            all_failed.update(failed[c])
        use["all"] = tool_use(every, all_failed)
        name = with_group.label if with_group.label not in models else f"{with_group.label} [{with_group.config}]"
        models[name] = {
            "with": with_group.describe(),
            "without": without_group.describe(),
            "n_items": len(keys),
            "conditions": {c: compare_condition(c, keys, with_responses, without_responses) for c in conditions},
            "tool_use": use,
            "flips": [
                case for c in conditions for case in _flip_cases(c, keys, with_responses, without_responses, traces)
            ],
        }
    return {
        "benchmark": BENCHMARK,
        "comparison": "with_tools_vs_without_tools",
        "with_dir": str(with_dir),
        "without_dir": str(without_dir),
        "n_items_with_run": sum(p.skipped is None for p in with_data.items),
        "n_items_without_run": sum(p.skipped is None for p in without_data.items),
        "n_items_common": len(keys),
        "ci_methods": CI_METHODS,
        "models": models,
    }
