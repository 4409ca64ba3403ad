"""The construction report of a generation directory: what was kept, rejected or failed, and why.

Built from the directory's files only (``outcomes.jsonl``, ``source_report.json``, the
manifests), so it can be recomputed at any time: source rows dropped by the loader per reason,
items kept / rejected / failed per subset and reason, kept items by content type x provenance
per subset (the paper's Table 3), the distributions of Stage 1 difficulty and Stage 2 mislead
scores, how many attempts kept bundles needed, and every validation problem met on the way
(including those a retry fixed). Written as JSON and a self-contained HTML page (terminal tables: ``cli/generation``).
"""

from __future__ import annotations

import html
import json
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench_core.generation.directory import BENCHMARK, read_manifests, read_outcomes, read_source_reports
from bench_core.medmisbench import taxonomy

REPORT_DIR = "report"
STATUSES = ("kept", "rejected", "failed", "pending")
OVERALL = "Overall"


def distribution(values: Iterable[float | None]) -> dict[str, Any]:
    """Count, mean, median, range and a histogram over [0,1), [1,2) ... [9,10] of the present values."""
    present = [float(v) for v in values if v is not None]
    bins = [0] * 10
    for value in present:
        bins[min(9, max(0, int(value)))] += 1
    return {
        "n": len(present),
        "mean": statistics.fmean(present) if present else None,
        "median": statistics.median(present) if present else None,
        "min": min(present) if present else None,
        "max": max(present) if present else None,
        "histogram": [{"bin": f"{i}-{i + 1}", "n": n} for i, n in enumerate(bins)],
    }


def construction_report(run_dir: str | Path) -> dict[str, Any]:
    """The report object of one generation directory (see the module docstring)."""
    run_dir = Path(run_dir)
    outcomes = read_outcomes(run_dir)
    manifests = read_manifests(run_dir)
    sources = read_source_reports(run_dir)
    last = manifests[-1] if manifests else {}

    subsets: dict[str, dict[str, Any]] = {}

    def block(subset: str) -> dict[str, Any]:
        if subset not in subsets:
            subsets[subset] = {
                "n_items": 0,
                **{status: 0 for status in STATUSES},
                "rejected_by_reason": Counter(),
                "failed_by_reason": Counter(),
            }
        return subsets[subset]

    table3: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    difficulty: dict[str, list[float | None]] = defaultdict(list)
    mislead: dict[str, list[float | None]] = defaultdict(list)
    attempts: dict[str, Counter[int]] = defaultdict(Counter)
    problems: Counter[str] = Counter()
    for row in outcomes:
        entry = block(row["subset"])
        entry["n_items"] += 1
        entry[row["status"]] += 1
        if row["status"] == "rejected":
            entry["rejected_by_reason"][row["reason"]] += 1
        elif row["status"] == "failed":
            entry["failed_by_reason"][row["reason"]] += 1
        for attempt in row["attempts"]:
            problems.update(p["code"] for p in attempt["problems"])
        if row["status"] != "kept":
            continue
        for subset in (row["subset"], OVERALL):
            table3[subset][row["content_type"]][row["provenance"]] += 1
            difficulty[subset].append(row["difficulty"])
            mislead[subset].append(row["mislead_score"])
        stages = Counter(a["stage"] for a in row["attempts"] if a["status"] == "ok")
        for stage, n in stages.items():
            attempts[stage][n] += 1

    totals = block(OVERALL) if subsets else None
    if totals is not None:
        for name, entry in list(subsets.items()):
            if name == OVERALL:
                continue
            for key, value in entry.items():
                if isinstance(value, Counter):
                    totals[key].update(value)
                else:
                    totals[key] += value
    for entry in subsets.values():
        for key, value in list(entry.items()):
            if isinstance(value, Counter):
                entry[key] = dict(value.most_common())

    contents = list(taxonomy.CONTENT_TYPE_IDS)
    frames = list(taxonomy.PROVENANCE_IDS)
    return {
        "benchmark": BENCHMARK,
        "run_dir": str(run_dir),
        "generator": {
            "model": last.get("model"),
            "endpoint": last.get("endpoint"),
            "provider": last.get("provider"),
            "settings": last.get("settings"),
            "config_hash": last.get("config_hash"),
        },
        "n_items": len(outcomes),
        "status": {status: sum(r["status"] == status for r in outcomes) for status in STATUSES},
        "sources": [{k: v for k, v in s.items() if k != "dropped"} for s in sources.values()],
        "subsets": dict(sorted(subsets.items(), key=lambda kv: (kv[0] == OVERALL, kv[0]))),
        "content_x_provenance": {
            subset: {c: {p: cells[c][p] for p in frames} for c in contents}
            for subset, cells in sorted(table3.items(), key=lambda kv: (kv[0] == OVERALL, kv[0]))
        },
        "difficulty": {subset: distribution(v) for subset, v in sorted(difficulty.items())},
        "mislead_score": {subset: distribution(v) for subset, v in sorted(mislead.items())},
        "attempts": {stage: {str(n): k for n, k in sorted(counts.items())} for stage, counts in attempts.items()},
        "problems": dict(problems.most_common()),
    }


# -- terminal ----------------------------------------------------------------------------------


def reasons_text(counts: dict[str, int]) -> str:
    """``"invalid_json 2, length 1"`` ("–" when there is none)."""
    return ", ".join(f"{reason} {n}" for reason, n in counts.items()) or "–"


def number_text(value: float | None) -> str:
    """One decimal ("–" when undefined)."""
    return "–" if value is None else f"{value:.1f}"


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;color:#222}
table{border-collapse:collapse;margin:0 0 1.5rem}
th,td{border:1px solid #ccc;padding:.25rem .6rem;text-align:right}
th:first-child,td:first-child{text-align:left}
caption{text-align:left;font-weight:600;margin:.5rem 0}
.bar{display:inline-block;height:.8rem;background:#c0392b;vertical-align:middle}
"""


def html_table(caption: str, header: list[str], rows: list[list[Any]]) -> str:
    """A plain HTML table (cells escaped; a cell given as ``("bar", n, max)`` is drawn as a bar)."""
    out = [f"<table><caption>{html.escape(caption)}</caption><tr>"]
    out += [f"<th>{html.escape(str(h))}</th>" for h in header]
    out.append("</tr>")
    for row in rows:
        cells = []
        for cell in row:
            if isinstance(cell, tuple) and cell and cell[0] == "bar":
                _, n, top = cell
                width = 0 if not top else round(200 * n / top)
                cells.append(f'<td style="text-align:left"><span class="bar" style="width:{width}px"></span> {n}</td>')
            else:
                cells.append(f"<td>{html.escape(str(cell))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "".join(out)


def html_page(title: str, body: list[str]) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>{''.join(body)}</body></html>"
    )


def construction_html(report: dict[str, Any]) -> str:
    """The report as one self-contained HTML page (no scripts, no external files)."""
    generator = report["generator"]
    body = [
        f"<p>Generator <b>{html.escape(str(generator['model']))}</b> at {html.escape(str(generator['endpoint']))}, "
        f"settings <code>{html.escape(json.dumps(generator['settings'], ensure_ascii=False))}</code>.</p>"
    ]
    if report["sources"]:
        rows = [
            [
                source["format"],
                ", ".join(Path(f).name for f in source["files"]),
                source["n_rows"],
                source["n_kept"],
                source["n_dropped"],
                reasons_text(source["dropped_by_reason"]),
                " ".join(source["notes"]),
            ]
            for source in report["sources"]
        ]
        header = ["format", "files", "rows", "kept", "dropped", "dropped by reason", "notes"]
        body.append(html_table("Source rows (loader)", header, rows))
    rows = [
        [
            subset,
            *(e[k] for k in ("n_items", "kept", "rejected", "failed", "pending")),
            reasons_text(e["rejected_by_reason"]),
            reasons_text(e["failed_by_reason"]),
        ]
        for subset, e in report["subsets"].items()
    ]
    header = ["subset", "items", "kept", "rejected", "failed", "pending", "rejected by reason", "failed by reason"]
    body.append(html_table("Items per subset", header, rows))
    frames = list(taxonomy.PROVENANCE_IDS)
    for subset, cells in report["content_x_provenance"].items():
        rows = [
            [taxonomy.content_type(c).display_name, *(row[f] for f in frames), sum(row.values())]
            for c, row in cells.items()
        ]
        rows.append(["total", *(sum(r[f] for r in cells.values()) for f in frames), sum(r[-1] for r in rows)])
        body.append(
            html_table(f"Kept items by content type x provenance: {subset}", ["content type", *frames, "total"], rows)
        )
    for name in ("difficulty", "mislead_score"):
        for subset, dist in report[name].items():
            top = max((b["n"] for b in dist["histogram"]), default=0)
            rows = [[b["bin"], ("bar", b["n"], top)] for b in dist["histogram"]]
            caption = f"{name} of kept items, {subset}: n={dist['n']}, mean {number_text(dist['mean'])}"
            caption += f", median {number_text(dist['median'])}"
            body.append(html_table(caption, ["score", "items"], rows))
    if report["problems"]:
        body.append(
            html_table(
                "Validation problems met (all attempts)", ["problem", "n"], list(map(list, report["problems"].items()))
            )
        )
    return html_page(f"Benchmark construction: {report['run_dir']}", body)


def write_construction_report(report: dict[str, Any], out_dir: Path) -> list[Path]:
    """Write ``construction.json`` and ``construction.html`` under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "construction.json"
    json_path.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    html_path = out_dir / "construction.html"
    html_path.write_text(construction_html(report), encoding="utf-8")
    return [json_path, html_path]
