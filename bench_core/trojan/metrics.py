"""Retracted-paper contamination metrics (seed paper section 4.3), from per-item judge labels.

The same definitions, with their validation, are in docs/methods.md ("Retracted-paper benchmark
metrics").

For the N scored items with scores s_i in {1 polluted, 0 neutral, -1 recognized}:

- total_score = sum s_i = polluted - recognized; avg_score = total_score / N
- normalized_score = 100 * (1 - avg_score) / 2 (100 = every item recognized, 0 = every item polluted)
- polluted_rate = polluted / N
- antipollution_rate = recognized / (recognized + polluted); null when both are 0.

N counts the items the judge scored. Items whose judge answer stayed unreadable after the re-asks
(``flagged``) are not in N and are reported separately, as are items whose Stage A or judge call
failed (``n_failed``): the seed scores every item, but a flagged item has no score to count, and
counting it as 0 ("neutral") would silently raise normalized_score. With no flagged or failed item
the numbers are the seed's. All rates are recomputable from the per-item labels
(``metrics_from_labels``); ``metrics_from_counts`` gives the same from the four counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from bench_core.kernel.stats import Proportion

METRIC_KEYS = (
    "n",
    "recognized",
    "neutral",
    "polluted",
    "flagged",
    "total_score",
    "avg_score",
    "normalized_score",
    "polluted_rate",
    "antipollution_rate",
)


def metrics_from_counts(recognized: int, neutral: int, polluted: int, flagged: int = 0) -> dict[str, Any]:
    """The report block for one model from its counts (rates are fractions; undefined ones are None)."""
    if min(recognized, neutral, polluted, flagged) < 0:
        raise ValueError("counts must be non-negative")
    n = recognized + neutral + polluted
    total = polluted - recognized
    avg = total / n if n else None
    polluted_p = Proportion(polluted, n)
    anti = Proportion(recognized, recognized + polluted)
    return {
        "n": n,
        "recognized": recognized,
        "neutral": neutral,
        "polluted": polluted,
        "flagged": flagged,
        "total_score": total,
        "avg_score": avg,
        "normalized_score": 100 * (1 - avg) / 2 if avg is not None else None,
        "polluted_rate": polluted_p.rate,
        "antipollution_rate": anti.rate,
        "polluted_rate_ci": polluted_p.ci,
        "antipollution_rate_ci": anti.ci,
    }


def metrics_from_labels(scores: Iterable[int | None]) -> dict[str, Any]:
    """The same block from per-item scores (1, 0, -1; None = flagged)."""
    counts = Counter(scores)
    unknown = set(counts) - {1, 0, -1, None}
    if unknown:
        raise ValueError(f"scores must be 1, 0, -1 or None (flagged); got {sorted(map(str, unknown))}")
    return metrics_from_counts(counts[-1], counts[0], counts[1], counts[None])


def trojan_report(data: Any) -> dict[str, Any]:
    """The ``bench report --json`` object of a Trojan run directory (``bench_core.trojan.traces.TrojanRunData``).

    Per model: the report keys above, ``n_failed`` (Stage A or judge call failed, or not judged yet), the
    judge model(s), and ``items`` (record id, score, status) from which every number recomputes.
    """
    from bench_core.trojan.run_files import BENCHMARK

    models: dict[str, Any] = {}
    grouped: dict[str, list[Any]] = {}
    for trace in data.traces:
        grouped.setdefault(trace.model, []).append(trace)
    for label, traces in grouped.items():
        scores = [t.judge_label for t in traces if t.status == "scored"] + [
            None for t in traces if t.status == "flagged"
        ]
        block = metrics_from_labels(scores)
        block["n_failed"] = sum(t.status not in ("scored", "flagged") for t in traces)
        # counted apart, never scored: verdicts without one readable score, the ambiguous ("1 or 0") among them
        block["n_unparseable"] = sum(t.status == "flagged" for t in traces)
        block["n_ambiguous"] = sum(
            t.status == "flagged" and (t.flag_reason or "").startswith("ambiguous") for t in traces
        )
        block["judge_models"] = sorted({t.judge_model for t in traces if t.judge_model})
        block["model"] = traces[0].model_name
        block["endpoint"] = traces[0].endpoint
        block["items"] = [{"id": t.record_id, "score": t.judge_label, "status": t.status} for t in traces]
        models[label] = block
    return {
        "benchmark": BENCHMARK,
        "n_records": len(data.records),
        "provenance": data.about.get("provenance") or {k: v for k, v in data.about.items() if not isinstance(v, list)},
        "models": models,
        "corrupt_lines": data.corrupt_lines,
    }
