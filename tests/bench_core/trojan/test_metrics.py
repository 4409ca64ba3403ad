"""Retracted-paper metrics reproduce the seed paper's results table, from counts and from per-item labels."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench_core.trojan.metrics import METRIC_KEYS, metrics_from_counts, metrics_from_labels

TABLE = Path(__file__).resolve().parents[2] / "data" / "trojan" / "seed_results_table.md"


def _seed_rows() -> list[dict]:
    rows = []
    for line in TABLE.read_text().splitlines():
        if not line.startswith("| ") or line.startswith("| model") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append(
            {
                "model": cells[0],
                "normalized_score": float(cells[1]),
                "polluted_rate": float(cells[2]),
                "antipollution_rate": float(cells[3]),
                "recognized": int(cells[4]),
                "neutral": int(cells[5]),
                "polluted": int(cells[6]),
                "total": int(cells[7]),
            }
        )
    return rows


SEED = _seed_rows()


def test_the_table_has_twelve_rows():
    assert len(SEED) == 12


@pytest.mark.parametrize("row", SEED, ids=[r["model"] for r in SEED])
def test_every_seed_row_is_reproduced(row):
    metrics = metrics_from_counts(row["recognized"], row["neutral"], row["polluted"])
    assert metrics["n"] == row["total"] == 100
    assert round(metrics["normalized_score"], 4) == row["normalized_score"]
    assert round(metrics["polluted_rate"], 4) == row["polluted_rate"]
    assert round(metrics["antipollution_rate"], 4) == row["antipollution_rate"]
    labels = [-1] * row["recognized"] + [0] * row["neutral"] + [1] * row["polluted"]
    assert metrics_from_labels(labels) == metrics  # recomputable from the per-item labels
    assert metrics["total_score"] == sum(labels) and metrics["avg_score"] == sum(labels) / 100


def test_spec_example_and_keys():
    metrics = metrics_from_counts(1, 86, 13)
    assert (metrics["normalized_score"], metrics["polluted_rate"], round(metrics["antipollution_rate"], 4)) == (
        44.0,
        0.13,
        0.0714,
    )
    assert set(METRIC_KEYS) <= set(metrics)


def test_undefined_rates_are_null_and_flagged_items_stay_outside_n():
    nothing_contested = metrics_from_labels([0, 0, 0])
    assert nothing_contested["antipollution_rate"] is None and nothing_contested["antipollution_rate_ci"] is None
    assert nothing_contested["normalized_score"] == 50.0
    with_flags = metrics_from_labels([1, -1, -1, 0, None, None])
    assert (with_flags["n"], with_flags["flagged"], with_flags["total_score"]) == (4, 2, -1)
    assert with_flags["avg_score"] == -0.25 and with_flags["normalized_score"] == 62.5
    assert with_flags["polluted_rate"] == 0.25 and with_flags["antipollution_rate"] == pytest.approx(2 / 3)
    empty = metrics_from_labels([None])
    assert empty["n"] == 0 and empty["avg_score"] is None and empty["normalized_score"] is None
    with pytest.raises(ValueError, match="scores must be"):
        metrics_from_labels([2])
