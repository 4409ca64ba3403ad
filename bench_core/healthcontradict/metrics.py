"""HealthContradict metrics (paper Methods, Eq. 4-9), per model.

The formulas and their validation are in docs/methods.md ("HealthContradict metrics").

- accuracy and macro-F1 per template. Macro-F1 averages the F1 of the YES and NO classes (Eq. 9),
  over the classes that occur among the answers or predictions, as the authors' ``b2_eval_acc.py``
  (scikit-learn ``f1_score(average="macro")``) does; F1 = 2TP / (2TP + FP + FN), 0 when TP = 0.
  An unreadable answer (API text only) counts as incorrect: a false negative of its true class and
  a false positive of neither; it is counted in ``n_unparseable``. Calls that failed are not in ``n``
  (``n_failed``).
- OR, over-reliance on parametric knowledge (Eq. 5) = P(incorrect under CC | incorrect under NC);
  VM, vulnerability to misleading context (Eq. 6) = P(incorrect under IC | correct under NC); both
  over instances answered under both templates, null when the condition set is empty.
- McNemar for every template pair: the 2x2 table of per-instance correctness, continuity-corrected
  chi-square (|b - c| - 1)^2 / (b + c) with 1 degree of freedom and its two-sided p; b = correct
  under the first template only, c = under the second only; null when b + c = 0 (no discordant pair).
- pairwise prediction agreement (Fig. 4b): the share of instances with the same predicted label;
  context-induced switches (Fig. 4a): relative to NC, the shares of instances that become correct
  and that become incorrect under each context template.
- density of the predicted label's probability p-hat in [0.5, 1] (Eq. 4): normalised histogram,
  bins of width 0.05, f = n_j / (N * width), so the densities integrate to 1.
- accuracy and macro-F1 by context-length quartile (Fig. 7): per context template, instances sorted
  by the words of the documents shown (before truncation; the same for every model) and cut into
  four groups of equal size (sizes differ by at most one).
- between models (``model_mcnemar``, with two or more models): per template, McNemar between every
  two models on the instances both answered (b = correct for the first model only), as the paper
  compares e.g. Meditron3-8B with Llama-3.1-8B-Instruct under the same prompt.
Every rate has a Wilson 95% CI where it is a proportion.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from itertools import combinations
from typing import Any

from bench_core.healthcontradict.prompts import TEMPLATE_ORDER
from bench_core.healthcontradict.run import BENCHMARK, HCPrediction, HCRunData
from bench_core.kernel.stats import Proportion

DENSITY_BIN_WIDTH = 0.05
CONTEXT_TEMPLATES = ("CC", "IC", "CIC", "ICC")


def f1_score(golds: Sequence[str], preds: Sequence[str | None], positive: str) -> float:
    """F1 of one class: 2TP / (2TP + FP + FN); 0 when the class is never right."""
    tp = sum(g == positive and p == positive for g, p in zip(golds, preds, strict=True))
    fp = sum(g != positive and p == positive for g, p in zip(golds, preds, strict=True))
    fn = sum(g == positive and p != positive for g, p in zip(golds, preds, strict=True))
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def macro_f1(golds: Sequence[str], preds: Sequence[str | None]) -> float | None:
    """Mean F1 over the classes yes/no that occur among answers or predictions; None with no instance."""
    classes = [c for c in ("yes", "no") if c in golds or c in preds]
    if not classes:
        return None
    return sum(f1_score(golds, preds, c) for c in classes) / len(classes)


def mcnemar(first_correct: Sequence[bool], second_correct: Sequence[bool]) -> dict[str, Any]:
    """Continuity-corrected McNemar chi-square and two-sided p for paired correctness."""
    b = sum(x and not y for x, y in zip(first_correct, second_correct, strict=True))
    c = sum(y and not x for x, y in zip(first_correct, second_correct, strict=True))
    if b + c == 0:
        return {"chi2": None, "p_value": None, "b": 0, "c": 0, "n": len(first_correct)}
    statistic = (abs(b - c) - 1) ** 2 / (b + c)
    from scipy.stats import chi2 as chi2_distribution  # here: a report without pairs never loads scipy

    return {
        "chi2": statistic,
        "p_value": float(chi2_distribution.sf(statistic, 1)),
        "b": b,
        "c": c,
        "n": len(first_correct),
    }


def template_block(predictions: Sequence[HCPrediction], n_failed: int = 0) -> dict[str, Any]:
    """n, accuracy (with CI), macro-F1, per-class F1 and counts for one model and template."""
    golds = [p.gold for p in predictions]
    labels = [p.label for p in predictions]
    accuracy = Proportion(sum(p.correct for p in predictions), len(predictions))
    probabilities = [p.p_hat for p in predictions if p.p_hat is not None]
    return {
        "n": len(predictions),
        "n_correct": accuracy.k,
        "accuracy": accuracy.rate,
        "accuracy_ci": accuracy.ci,
        "macro_f1": macro_f1(golds, labels),
        "f1_yes": f1_score(golds, labels, "yes") if predictions else None,
        "f1_no": f1_score(golds, labels, "no") if predictions else None,
        "n_unparseable": sum(p.label is None for p in predictions),
        "n_failed": n_failed,
        "n_truncated": sum(p.truncated for p in predictions),
        "n_with_probability": len(probabilities),
        "mean_p_hat": sum(probabilities) / len(probabilities) if probabilities else None,
    }


def _conditional(
    by_template: dict[str, dict[str, HCPrediction]], given: str, given_correct: bool, then: str
) -> Proportion:
    """Among instances with ``given`` correct (or not), how many are incorrect under ``then``."""
    both = [i for i in by_template.get(given, {}) if i in by_template.get(then, {})]
    condition = [i for i in both if by_template[given][i].correct == given_correct]
    return Proportion(sum(not by_template[then][i].correct for i in condition), len(condition))


def density(probabilities: Sequence[float], width: float = DENSITY_BIN_WIDTH) -> dict[str, Any]:
    """Normalised histogram of p-hat over [0.5, 1] (the last bin includes 1.0)."""
    bins = round(0.5 / width)
    edges = [0.5 + k * width for k in range(bins + 1)]
    counts = [0] * bins
    for value in probabilities:
        index = min(bins - 1, max(0, math.floor((value - 0.5) / width + 1e-12)))
        counts[index] += 1
    total = len(probabilities)
    values = [c / (total * width) if total else None for c in counts]
    return {"bin_edges": edges, "counts": counts, "density": values, "n": total}


def context_quartiles(predictions: Sequence[HCPrediction]) -> list[dict[str, Any]]:
    """Accuracy and macro-F1 in four equal-size groups of increasing context length."""
    ordered = sorted(predictions, key=lambda p: (p.context_words, p.instance_id))
    n = len(ordered)
    groups, start = [], 0
    for quartile in range(4):
        size = n // 4 + (1 if quartile < n % 4 else 0)
        groups.append(ordered[start : start + size])
        start += size
    out = []
    for quartile, group in enumerate(groups, start=1):
        accuracy = Proportion(sum(p.correct for p in group), len(group))
        out.append(
            {
                "quartile": quartile,
                "n": len(group),
                "min_words": group[0].context_words if group else None,
                "max_words": group[-1].context_words if group else None,
                "accuracy": accuracy.rate,
                "accuracy_ci": accuracy.ci,
                "macro_f1": macro_f1([p.gold for p in group], [p.label for p in group]) if group else None,
            }
        )
    return out


def model_metrics(predictions: Sequence[HCPrediction], failures: dict[str, int] | None = None) -> dict[str, Any]:
    """Every HealthContradict metric for one model's predictions."""
    failures = failures or {}
    by_template: dict[str, dict[str, HCPrediction]] = defaultdict(dict)
    for prediction in predictions:
        by_template[prediction.template][prediction.instance_id] = prediction
    templates = [t for t in TEMPLATE_ORDER if t in by_template or failures.get(t)]
    out: dict[str, Any] = {
        "templates": {t: template_block(list(by_template.get(t, {}).values()), failures.get(t, 0)) for t in templates}
    }
    over = _conditional(by_template, "NC", False, "CC")
    vulnerable = _conditional(by_template, "NC", True, "IC")
    out.update(
        {
            "or_rate": over.rate,
            "or_k": over.k,
            "or_n": over.n,
            "or_ci": over.ci,
            "vm_rate": vulnerable.rate,
            "vm_k": vulnerable.k,
            "vm_n": vulnerable.n,
            "vm_ci": vulnerable.ci,
        }
    )
    tests: dict[str, Any] = {}
    agreement: dict[str, Any] = {}
    for first, second in combinations(templates, 2):
        shared = sorted(set(by_template[first]) & set(by_template[second]))
        a = [by_template[first][i] for i in shared]
        b = [by_template[second][i] for i in shared]
        tests[f"{first}-{second}"] = mcnemar([p.correct for p in a], [p.correct for p in b])
        same = Proportion(sum(x.label == y.label for x, y in zip(a, b, strict=True)), len(shared))
        agreement[f"{first}-{second}"] = {"rate": same.rate, "k": same.k, "n": same.n}
    out["mcnemar"] = tests
    out["agreement"] = agreement
    switches = {}
    for template in CONTEXT_TEMPLATES:
        if template not in by_template or "NC" not in by_template:
            continue
        shared = [i for i in by_template[template] if i in by_template["NC"]]
        to_correct = sum(by_template[template][i].correct and not by_template["NC"][i].correct for i in shared)
        to_incorrect = sum(not by_template[template][i].correct and by_template["NC"][i].correct for i in shared)
        switches[template] = {
            "n": len(shared),
            "to_correct": to_correct / len(shared) if shared else None,
            "to_incorrect": to_incorrect / len(shared) if shared else None,
        }
    out["switches"] = switches
    out["density"] = {
        t: density([p.p_hat for p in by_template[t].values() if p.p_hat is not None])
        for t in templates
        if t in by_template
    }
    out["by_context_quartile"] = {
        t: context_quartiles(list(by_template[t].values())) for t in CONTEXT_TEMPLATES if t in by_template
    }
    return out


def model_comparisons(predictions: Sequence[HCPrediction]) -> dict[str, dict[str, Any]]:
    """Per template, McNemar between every two models on the instances both answered, with both accuracies."""
    table: dict[str, dict[str, dict[str, HCPrediction]]] = defaultdict(lambda: defaultdict(dict))
    for prediction in predictions:
        table[prediction.template][prediction.model][prediction.instance_id] = prediction
    out: dict[str, dict[str, Any]] = {}
    for template in TEMPLATE_ORDER:
        models = sorted(table.get(template, {}))
        for first, second in combinations(models, 2):
            a, b = table[template][first], table[template][second]
            shared = sorted(set(a) & set(b))
            test = mcnemar([a[i].correct for i in shared], [b[i].correct for i in shared])
            test["first"], test["second"] = first, second
            test["accuracy_first"] = Proportion(sum(a[i].correct for i in shared), len(shared)).rate
            test["accuracy_second"] = Proportion(sum(b[i].correct for i in shared), len(shared)).rate
            out.setdefault(template, {})[f"{first} vs {second}"] = test
    return out


def healthcontradict_report(data: HCRunData) -> dict[str, Any]:
    """The ``bench report --json`` object of a HealthContradict run directory.

    Its keys are held stable by ``tests/test_cli_contract.py`` (add, never rename).
    """
    grouped: dict[str, list[HCPrediction]] = defaultdict(list)
    about: dict[str, dict[str, Any]] = {}
    for prediction in data.predictions:
        grouped[prediction.model].append(prediction)
        about.setdefault(
            prediction.model,
            {"model": prediction.model_name, "endpoint": prediction.endpoint, "config_hash": prediction.config_hash},
        )
    failed: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    topics: dict[int, int] = defaultdict(int)
    for instance in data.instances:
        topics[instance.topic_id] += 1
    for record in data.failures:
        label = (record.get("meta") or {}).get("label") or record["key"]["model"]
        condition = record["key"]["condition"]
        weight = topics.get(int(record["key"]["item"].removeprefix("topic-")), 1) if condition == "NC" else 1
        failed[label][condition] += weight
        about.setdefault(label, {"model": record["key"]["model"], "endpoint": record["key"]["endpoint"]})
    models = {}
    for label in sorted(set(grouped) | set(failed)):
        models[label] = {**model_metrics(grouped.get(label, []), dict(failed.get(label, {}))), **about[label]}
    out = {
        "benchmark": BENCHMARK,
        "n_instances": len(data.instances),
        "n_topics": len(topics),
        "templates": data.templates,
        "models": models,
        "corrupt_lines": data.corrupt_lines,
    }
    if len(models) > 1:
        out["model_mcnemar"] = model_comparisons(data.predictions)
    return out
