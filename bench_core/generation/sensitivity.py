"""Sensitivity of a benchmark's findings to its generator and to its provenance allocation (paper D.1, D.2).

Both tools start from an existing benchmark (released format, or a generation directory's
``benchmark/``), draw a stratified subset with a seed, and regenerate the bundles of that subset
with Stage 2 only, holding the item (so its Type 1 target, which evaluation draws from the seed
and the item's id), its content type and, for generator sensitivity, its provenance fixed:

- ``regenerate``: another generator writes the bundles (variant ``regenerated``).
- ``reassign``: two cyclic provenance reassignments, ``forward`` (neutral -> patient ->
  authority -> neutral) and ``reverse`` (the opposite cycle); the sentences are rewritten in the
  new frame, because the frame is carried by the sentence text, not by the label alone.

The output directory holds ``sensitivity.json`` (the selection and the variants),
``reference/benchmark/`` (the original bundles of the selected items) and one generation
directory per variant, each with its ``benchmark/`` folder: every one of them is a benchmark
that ``bench run medmisbench`` runs directly (evaluate with the same ``--seed`` so the Type 1
targets match). ``compare_bundles`` compares the variants' construction; ``compare_runs``
compares evaluation runs of the variants on the items evaluable in all of them.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_core.generation.directory import BENCHMARK_DIR, is_generation_dir, read_bundles, read_outcomes
from bench_core.generation.item_state import Plan
from bench_core.kernel.rundir import seeded_int
from bench_core.medmisbench import taxonomy
from bench_core.medmisbench.data import load_medmisbench
from bench_core.medmisbench.items import MCQItem
from bench_core.medmisbench.release import ReleaseRefused, release_problems, write_release
from bench_core.medmisbench.run import item_key

PLAN_FILE = "sensitivity.json"
REFERENCE = "reference"
REGENERATED = "regenerated"
CYCLES: dict[str, dict[str, str]] = {
    "forward": {"neutral": "patient", "patient": "authority", "authority": "neutral"},
    "reverse": {"neutral": "authority", "authority": "patient", "patient": "neutral"},
}


class SensitivityError(ValueError):
    """A sensitivity run that cannot go ahead as asked."""


def parse_quotas(text: str | None) -> dict[str, int]:
    """``"MEDMISQA=150,MedMisMCQA=180"`` -> {subset id: count}."""
    quotas: dict[str, int] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        name, _, value = part.partition("=")
        if not value.strip().isdigit():
            raise SensitivityError(f"quota {part.strip()!r}: expected SUBSET=COUNT, e.g. MEDMISQA=150")
        quotas[taxonomy.canonical_subset(name)] = int(value)
    return quotas


def allocate(total: int, sizes: dict[Any, int]) -> dict[Any, int]:
    """Split ``total`` over strata in proportion to their sizes (largest remainder; all of each if it fits)."""
    population = sum(sizes.values())
    if total >= population:
        return dict(sizes)
    shares = {key: total * size / population for key, size in sizes.items()}
    counts = {key: int(share) for key, share in shares.items()}
    left = total - sum(counts.values())
    for key in sorted(shares, key=lambda k: (-(shares[k] - counts[k]), str(k)))[:left]:
        counts[key] += 1
    return counts


def stratified_subset(
    items: Sequence[MCQItem],
    *,
    seed: int,
    per_subset: dict[str, int] | None = None,
    size: int | None = None,
) -> list[MCQItem]:
    """A seeded subset, stratified by subset x content type x provenance (items with usable bundles only).

    ``per_subset`` gives a count per subset (others are left out); ``size`` a total split over
    subsets in proportion to their sizes; with neither, every usable item. Within a subset the
    count is split over its content x provenance strata in proportion, and each stratum keeps
    its items with the lowest seeded hashes. The subset comes back in input order.
    """
    usable = [item for item in items if item.usable_bundle_problem() is None and item.injection is not None]
    by_subset: dict[str, list[MCQItem]] = defaultdict(list)
    for item in usable:
        by_subset[item.subset].append(item)
    if per_subset:
        unknown = sorted(set(per_subset) - set(by_subset))
        if unknown:
            raise SensitivityError(f"no usable item in subset(s) {', '.join(unknown)}; have {', '.join(by_subset)}")
        quotas = {name: per_subset[name] for name in by_subset if name in per_subset}
    elif size is not None:
        quotas = allocate(size, {name: len(group) for name, group in by_subset.items()})
    else:
        quotas = {name: len(group) for name, group in by_subset.items()}
    chosen: set[str] = set()
    for name, quota in quotas.items():
        strata: dict[tuple[str, str], list[MCQItem]] = defaultdict(list)
        for item in by_subset[name]:
            assert item.injection is not None
            strata[(item.injection.content_type, item.injection.provenance)].append(item)
        counts = allocate(quota, {key: len(group) for key, group in strata.items()})
        for key, group in strata.items():
            ranked = sorted(group, key=lambda i: (seeded_int(seed, "subset", item_key(i)), i.id))
            chosen.update(item_key(i) for i in ranked[: counts[key]])
    return [item for item in usable if item_key(item) in chosen]


def load_benchmark(path: str | Path) -> list[MCQItem]:
    """The items of a released-format benchmark, or of a generation directory's ``benchmark/``."""
    path = Path(path)
    if path.is_dir() and is_generation_dir(path):
        path = path / BENCHMARK_DIR
    return load_medmisbench(path).items


def plans_for(items: Sequence[MCQItem], variant: str) -> dict[str, Plan]:
    """The fixed content type and provenance of each item under a variant (``regenerated`` or a cycle)."""
    plans = {}
    for item in items:
        assert item.injection is not None
        frame = item.injection.provenance
        if variant != REGENERATED:
            if variant not in CYCLES:
                raise SensitivityError(f"unknown variant {variant!r}; expected {REGENERATED} or {', '.join(CYCLES)}")
            frame = CYCLES[variant][frame]
        plans[item_key(item)] = Plan(item.injection.content_type, frame)
    return plans


def prepare(
    out_dir: Path, items: Sequence[MCQItem], *, kind: str, source: str, seed: int, quotas: dict[str, Any]
) -> dict[str, Any]:
    """Write ``sensitivity.json`` and the reference benchmark; refuse a directory made for another selection."""
    variants = [REGENERATED] if kind == "regenerate" else list(CYCLES)
    plan = {
        "kind": kind,
        "source": source,
        "seed": seed,
        "quotas": quotas,
        "n_selected": len(items),
        "selected_by_subset": dict(Counter(i.subset for i in items)),
        "item_keys": [item_key(i) for i in items],
        "variants": {name: {"cycle": CYCLES.get(name)} for name in variants},
    }
    problems = release_problems(items)
    if problems:  # before anything is written: the reference benchmark must load under medrev's reading
        raise ReleaseRefused(problems)
    path = out_dir / PLAN_FILE
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        if (old["kind"], old["item_keys"]) != (kind, plan["item_keys"]):
            raise SensitivityError(
                f"{out_dir} holds a {old['kind']} run over {old['n_selected']} other item(s); use a new --out directory"
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plan, indent=2, ensure_ascii=False), encoding="utf-8")
    write_release(items, out_dir / REFERENCE / BENCHMARK_DIR, seed=seed)  # targets drawn as the variants'
    return plan


# -- construction comparison -------------------------------------------------------------------


def _words(text: str) -> set[str]:
    folded = text.casefold()
    cjk = re.findall(r"[\u3400-\u9fff]", folded)
    return set(re.findall(r"[0-9a-z]+", folded)) | {a + b for a, b in itertools.pairwise(cjk)}


def _jaccard(a: str, b: str) -> float:
    x, y = _words(a), _words(b)
    return len(x & y) / len(x | y) if x | y else 1.0


def compare_bundles(out_dir: str | Path) -> dict[str, Any]:
    """How each variant's bundles differ from the reference: yield, labels held or rotated, lengths, overlap."""
    out_dir = Path(out_dir)
    plan = json.loads((out_dir / PLAN_FILE).read_text(encoding="utf-8"))
    reference = {item_key(i): i for i in load_medmisbench(out_dir / REFERENCE / BENCHMARK_DIR).items}
    variants: dict[str, Any] = {
        REFERENCE: {
            "n_items": len(reference),
            "kept": len(reference),
            "provenance": dict(Counter(i.injection.provenance for i in reference.values() if i.injection)),
            "content": dict(Counter(i.injection.content_type for i in reference.values() if i.injection)),
            "mean_sentence_chars": _mean_chars(reference.values()),
        }
    }
    for name, spec in plan["variants"].items():
        directory = out_dir / name
        outcomes = read_outcomes(directory)
        kept = [MCQItem.model_validate(b["item"]) for b in read_bundles(directory)]
        expected = {key: plans_for([reference[key]], name)[key] for key in reference}
        held = sum(
            1
            for item in kept
            if item.injection is not None
            and (item.injection.content_type, item.injection.provenance)
            == (expected[item_key(item)].content_type, expected[item_key(item)].provenance)
        )
        overlaps = [
            _jaccard(item.injection.sentences[label], reference[item_key(item)].injection.sentences[label])
            for item in kept
            if item.injection is not None and reference[item_key(item)].injection is not None
            for label in item.wrong_labels
        ]
        scores = [item.injection.mislead_score for item in kept if item.injection and item.injection.mislead_score]
        variants[name] = {
            "cycle": spec.get("cycle"),
            "n_items": len(outcomes),
            "kept": len(kept),
            "failed_by_reason": dict(Counter(o["reason"] for o in outcomes if o["status"] == "failed")),
            "labels_as_planned": held,
            "provenance": dict(Counter(i.injection.provenance for i in kept if i.injection)),
            "content": dict(Counter(i.injection.content_type for i in kept if i.injection)),
            "mean_sentence_chars": _mean_chars(kept),
            "mean_mislead_score": statistics.fmean(scores) if scores else None,
            "mean_word_overlap_with_reference": statistics.fmean(overlaps) if overlaps else None,
            "generator": (read_bundles(directory) or [{}])[0].get("generation", {}).get("generator_model"),
        }
    return {"kind": plan["kind"], "out_dir": str(out_dir), "n_selected": plan["n_selected"], "variants": variants}


def _mean_chars(items) -> float | None:
    lengths = [len(s) for item in items if item.injection for s in item.injection.sentences.values()]
    return statistics.fmean(lengths) if lengths else None


# -- evaluation comparison ---------------------------------------------------------------------


def compare_runs(runs: dict[str, str | Path], pools: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Metrics of evaluation runs of the variants on the items evaluable in all of them (matched items).

    The first run is the reference: each other variant gets ``delta_vs_reference`` (rate minus
    the reference's) for Type 1 ASR, TASR and Type 2 ASR. ``pools`` pool variants into one (e.g.
    ``{"shuffled": ["forward", "reverse"]}``: counts summed over both shuffles, as the paper's
    1,200 prompts per model). Provenance strata use each variant's own provenance labels.
    """
    from bench_core.medmisbench.metrics import condition_block
    from bench_core.medmisbench.run import read_run_data

    if len(runs) < 2:
        raise SensitivityError("compare at least two runs (the first is the reference)")
    data = {name: read_run_data(path) for name, path in runs.items()}
    usable = [{p.key for p in d.items if p.skipped is None} for d in data.values()]
    matched = set.intersection(*usable)
    if not matched:
        raise SensitivityError("the runs have no evaluable item in common")
    groups: dict[str, list[str]] = {name: [name] for name in runs}
    for pool, members in (pools or {}).items():
        unknown = [m for m in members if m not in runs]
        if unknown:
            raise SensitivityError(f"pool {pool!r}: unknown run(s) {', '.join(unknown)}")
        groups[pool] = list(members)
    labels = set.intersection(*({r.label for r in d.responses} for d in data.values()))
    reference_name = next(iter(runs))
    variants: dict[str, Any] = {}
    for name, members in groups.items():
        models: dict[str, Any] = {}
        for label in sorted(labels):
            responses, failures, keys = [], [], set()
            by_frame: dict[str, set[str]] = defaultdict(set)
            for member in members:
                tag = f"{member}|" if len(members) > 1 else ""
                frames = {p.key: p.item.injection.provenance for p in data[member].items if p.item.injection}
                for record in data[member].responses:
                    if record.label == label and record.item_key in matched:
                        responses.append(dataclasses.replace(record, item_key=tag + record.item_key))
                for record in data[member].failures:
                    meta_label = (record.get("meta") or {}).get("label") or record["key"]["model"]
                    if meta_label == label and record["key"]["item"] in matched:
                        failures.append((record["key"]["condition"], tag + record["key"]["item"]))
                for key in matched:
                    keys.add(tag + key)
                    by_frame[frames[key]].add(tag + key)
            models[label] = {
                "conditions": condition_block(responses, failures, keys),
                "provenance": {
                    frame: condition_block(responses, failures, frame_keys)
                    for frame, frame_keys in sorted(by_frame.items())
                },
            }
        variants[name] = {"runs": {m: str(runs[m]) for m in members}, "models": models}
    for name, variant in variants.items():
        if name == reference_name:
            continue
        for label, model in variant["models"].items():
            base = variants[reference_name]["models"][label]["conditions"]
            model["delta_vs_reference"] = {
                f"{condition}_{rate}": _delta(model["conditions"], base, condition, rate)
                for condition, rate in (("type1", "asr"), ("type1", "tasr"), ("type2", "asr"))
            }
    return {"reference": reference_name, "n_matched_items": len(matched), "variants": variants}


def _delta(blocks: dict[str, Any], base: dict[str, Any], condition: str, rate: str) -> float | None:
    value = blocks.get(condition, {}).get(rate)
    reference = base.get(condition, {}).get(rate)
    return None if value is None or reference is None else value - reference
