"""HealthContradict data: the public repo's query list, document table and pair list, or prepared instances.

The authors' pipeline (github.com/tinaboya/HealthContradict, ``scripts/a1`` and ``a2``) is reproduced:

1. ``query/query-all.jsonl``: topic_id (int or digit string in the release), description (the
   question), query_stance (the factual answer, yes/no).
2. ``doc/doc-all-stance.csv``: topic_id, doc_id, stance (yes/no), text. Not public in this copy
   of the data (118 MB of ClueWeb12/C4 text); any table with these columns works.
3. Pairing (``pair_documents``): for each topic of the query list, in ascending topic order, drop
   documents without text and documents already used by an earlier pair, shuffle the yes documents
   with ``DataFrame.sample(frac=1, random_state=42 + topic_id)`` and the no documents with
   ``random_state=42 + topic_id + 1``, and pair them in order; every document is used at most once.
   pandas' ``sample`` draws from numpy's legacy ``RandomState``, whose streams are frozen, so the
   pairs are the authors' for the same document table. The released ``doc/doc-contradict.csv``
   (topic_id, doc1_id, doc2_id, pair_type) is the result of this step and can be given instead.
4. Instances (``build_instances``): one per pair, numbered from 0 in pair order, with the query,
   its stance, ``doc_a`` = the yes-stance text and ``doc_b`` = the no-stance text.

A prepared instances file (the authors' ``dataset_ready.jsonl`` shape: instance_id, topic_id,
query, query_stance, doc_a, doc_b) is read directly. Any problem refuses the load and every problem
is listed with file, line and field; nothing is half-loaded.

The no-context template (NC) needs no document. A run of NC alone (``documents=False``) loads from
what is public: the query list with the pair list (one instance per pair, numbered as above, the
documents left empty: the authors' 920 NC prompts), the query list alone (one instance per
question), a prepared instances file without documents, or the released NC prompt file
``prompts_1.jsonl`` (instance_id, topic_id, query, query_stance).

The records these loaders return (``HCQuery``, ``HCDocument``, ``HCPair``, ``HCInstance``) are
``bench_core.healthcontradict.items``.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench_core.healthcontradict.items import HCDataset, HCDocument, HCInstance, HCPair, HCQuery
from bench_core.kernel.errors import DatasetError, RowIssue
from bench_core.kernel.tabular import Row, cell, check_regular_file, iter_rows

PAIRING_SEED = 42

# TREC labels before the authors unified them (2019: effective/ineffective, 2021: supportive/dissuades).
_STANCE_ALIASES = {
    "yes": "yes",
    "no": "no",
    "effective": "yes",
    "ineffective": "no",
    "supportive": "yes",
    "dissuades": "no",
}

QUERY_FILES = ("query-all.jsonl", "query/query-all.jsonl")
DOCUMENT_FILES = ("doc-all-stance.csv", "doc/doc-all-stance.csv")
PAIR_FILES = ("doc-contradict.csv", "doc/doc-contradict.csv")
INSTANCE_FILES = ("dataset_ready.jsonl", "dataset/dataset_ready.jsonl")


def _topic_id(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    text = str(value).strip() if value is not None else ""
    if text.endswith(".0"):
        text = text[:-2]
    return int(text) if text.isdigit() else None


def _verbatim(row: dict, *names: str) -> str | None:
    """The first non-blank text among ``names``, unstripped: prompts must carry the question exactly
    as released (three released questions end in a space, and the released prompts keep it)."""
    for name in names:
        value = row.get(name)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _stance(value: str | None) -> str | None:
    return _STANCE_ALIASES.get(value.strip().lower()) if value else None


def _readable_rows(rows: Iterable[tuple[int, Row | RowIssue]], issues: list[RowIssue]) -> Iterator[tuple[int, Row]]:
    """The rows that could be read, with their line; each one that could not goes to ``issues``, so a load
    lists every problem of the file before it refuses it."""
    for line, row in rows:
        if isinstance(row, RowIssue):
            issues.append(row)
        else:
            yield line, row


@contextmanager
def _large_csv_fields() -> Iterator[None]:
    """Documents run to 30,000 words; the csv module refuses fields over 128 KiB by default."""
    previous = csv.field_size_limit()
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    try:
        yield
    finally:
        csv.field_size_limit(previous)


def load_queries(path: str | Path) -> dict[int, HCQuery]:
    """The query list: topic_id -> question and factual answer. Refused whole on any bad row."""
    path = Path(path)
    queries: dict[int, HCQuery] = {}
    issues: list[RowIssue] = []
    for line, row in _readable_rows(iter_rows(path), issues):
        topic = _topic_id(row.get("topic_id"))
        question = _verbatim(row, "description", "query")
        stance = _stance(cell(row, "query_stance"))
        if topic is None:
            issues.append(RowIssue(str(path), line, "topic_id", f"expected an integer, got {row.get('topic_id')!r}"))
        if question is None:
            issues.append(RowIssue(str(path), line, "description", "missing question text"))
        if stance is None:
            issues.append(
                RowIssue(str(path), line, "query_stance", f"expected yes or no, got {row.get('query_stance')!r}")
            )
        if topic is None or question is None or stance is None:
            continue
        if topic in queries:
            issues.append(RowIssue(str(path), line, "topic_id", f"topic {topic} appears twice"))
            continue
        queries[topic] = HCQuery(topic_id=topic, query=question, query_stance=stance)
    if issues:
        raise DatasetError(issues)
    if not queries:
        raise DatasetError([RowIssue(str(path), None, None, "no query found")])
    return queries


def load_documents(path: str | Path) -> list[HCDocument]:
    """The document table (topic_id, doc_id, stance, text) in file order; empty texts are kept as None."""
    path = Path(path)
    documents: list[HCDocument] = []
    issues: list[RowIssue] = []
    with _large_csv_fields():
        for line, row in _readable_rows(iter_rows(path), issues):
            topic = _topic_id(row.get("topic_id"))
            doc_id = cell(row, "doc_id")
            stance = _stance(cell(row, "stance"))
            if topic is None:
                issues.append(
                    RowIssue(str(path), line, "topic_id", f"expected an integer, got {row.get('topic_id')!r}")
                )
            if doc_id is None:
                issues.append(RowIssue(str(path), line, "doc_id", "missing"))
            if stance is None:
                issues.append(RowIssue(str(path), line, "stance", f"expected yes or no, got {row.get('stance')!r}"))
            if topic is None or doc_id is None or stance is None:
                continue
            text = row.get("text")
            text = text if isinstance(text, str) and text.strip() else None
            documents.append(HCDocument(topic_id=topic, doc_id=doc_id, stance=stance, text=text))
    if issues:
        raise DatasetError(issues)
    return documents


def load_pairs(path: str | Path) -> list[tuple[int, HCPair]]:
    """The pair list as (line, pair), in file order (the order that numbers the instances)."""
    path = Path(path)
    pairs: list[tuple[int, HCPair]] = []
    issues: list[RowIssue] = []
    for line, row in _readable_rows(iter_rows(path), issues):
        topic = _topic_id(row.get("topic_id"))
        first, second = cell(row, "doc1_id"), cell(row, "doc2_id")
        for name, value in (("topic_id", topic), ("doc1_id", first), ("doc2_id", second)):
            if value is None:
                issues.append(RowIssue(str(path), line, name, "missing or not valid"))
        if topic is None or first is None or second is None:
            continue
        pairs.append((line, HCPair(topic, first, second, cell(row, "pair_type") or "contradiction")))
    if issues:
        raise DatasetError(issues)
    return pairs


def pair_documents(
    documents: Iterable[HCDocument], topic_ids: Iterable[int], *, seed: int = PAIRING_SEED
) -> list[HCPair]:
    """Contradiction pairs with unique documents, seeded per topic exactly as the authors' ``a1`` script.

    Topics are visited in ascending order (pandas ``groupby``); only topics in ``topic_ids`` pair.
    """
    import pandas as pd

    frame = pd.DataFrame(
        [{"topic_id": d.topic_id, "doc_id": d.doc_id, "stance": d.stance, "text": d.text} for d in documents],
        columns=["topic_id", "doc_id", "stance", "text"],
    )
    valid = set(topic_ids)
    used: set[str] = set()
    pairs: list[HCPair] = []
    for topic_id, topic_frame in frame.groupby("topic_id"):
        topic_id = int(topic_id)
        if topic_id not in valid:
            continue
        topic_seed = seed + topic_id
        usable = topic_frame[topic_frame["text"].apply(lambda x: isinstance(x, str) and x.strip() != "")]
        usable = usable[~usable["doc_id"].isin(used)]
        yes_docs = usable[usable["stance"] == "yes"].sample(frac=1, random_state=topic_seed).reset_index(drop=True)
        no_docs = usable[usable["stance"] == "no"].sample(frac=1, random_state=topic_seed + 1).reset_index(drop=True)
        for index in range(min(len(yes_docs), len(no_docs))):
            yes_id, no_id = str(yes_docs.loc[index, "doc_id"]), str(no_docs.loc[index, "doc_id"])
            pairs.append(HCPair(topic_id, yes_id, no_id))
            used.update((yes_id, no_id))
    return pairs


def build_instances(
    queries: dict[int, HCQuery],
    documents: Iterable[HCDocument],
    pairs: Iterable[tuple[int | None, HCPair] | HCPair],
    *,
    pairs_file: str = "pairs",
) -> list[HCInstance]:
    """One instance per pair (the authors' ``a2``): doc_a is the yes document, doc_b the no document.

    A pair whose topic has no query, whose document is missing or empty, or whose two stances are
    not one yes and one no refuses the whole build (the authors' script skipped such pairs with a
    warning, which silently renumbers the instances after it).
    """
    by_key = {(d.topic_id, d.doc_id): d for d in documents}
    instances: list[HCInstance] = []
    issues: list[RowIssue] = []
    for entry in pairs:
        line, pair = entry if isinstance(entry, tuple) else (None, entry)
        query = queries.get(pair.topic_id)
        first = by_key.get((pair.topic_id, pair.doc1_id))
        second = by_key.get((pair.topic_id, pair.doc2_id))
        problems = []
        if query is None:
            problems.append(("topic_id", f"topic {pair.topic_id} is not in the query list"))
        for name, doc_id, doc in (("doc1_id", pair.doc1_id, first), ("doc2_id", pair.doc2_id, second)):
            if doc is None:
                problems.append((name, f"document {doc_id} of topic {pair.topic_id} is not in the document table"))
            elif doc.text is None:
                problems.append((name, f"document {doc_id} has no text"))
        if not problems and first is not None and second is not None and {first.stance, second.stance} != {"yes", "no"}:
            problems.append(("doc2_id", f"stances {first.stance}/{second.stance}: a pair needs one yes and one no"))
        if problems:
            issues += [RowIssue(pairs_file, line, name, message) for name, message in problems]
            continue
        assert query is not None and first is not None and second is not None
        yes_doc, no_doc = (first, second) if first.stance == "yes" else (second, first)
        instances.append(
            _instance(
                str(len(instances)),
                pair.topic_id,
                query,
                doc_a=yes_doc.text or "",
                doc_b=no_doc.text or "",
                doc_a_id=yes_doc.doc_id,
                doc_b_id=no_doc.doc_id,
            )
        )
    if issues:
        raise DatasetError(issues)
    return instances


def load_instances(path: str | Path, *, documents: bool = True) -> list[HCInstance]:
    """A prepared instances file (JSONL, JSON, CSV or Parquet); refused whole on any bad row.

    ``documents=False`` (a run of NC alone): doc_a and doc_b may be missing (left empty).
    """
    path = Path(path)
    instances: list[HCInstance] = []
    issues: list[RowIssue] = []
    seen: set[str] = set()
    with _large_csv_fields():
        rows = list(iter_rows(path))
    for line, row in _readable_rows(rows, issues):
        values = {
            "instance_id": cell(row, "instance_id"),
            "topic_id": _topic_id(row.get("topic_id")),
            "query": _verbatim(row, "query", "description"),
            "query_stance": _stance(cell(row, "query_stance")),
            "doc_a": row.get("doc_a") if isinstance(row.get("doc_a"), str) and row["doc_a"].strip() else None,
            "doc_b": row.get("doc_b") if isinstance(row.get("doc_b"), str) and row["doc_b"].strip() else None,
        }
        if not documents:
            values["doc_a"] = values["doc_a"] or ""
            values["doc_b"] = values["doc_b"] or ""
        missing = [name for name, value in values.items() if value is None]
        for name in missing:
            detail = "expected yes or no" if name == "query_stance" else "missing or empty"
            if name == "topic_id" and row.get("topic_id") is not None:
                detail = f"expected an integer, got {row.get('topic_id')!r}"
            issues.append(RowIssue(str(path), line, name, detail))
        if missing:
            continue
        if values["instance_id"] in seen:
            issues.append(RowIssue(str(path), line, "instance_id", f"{values['instance_id']!r} appears twice"))
            continue
        seen.add(values["instance_id"])
        instances.append(
            HCInstance(**values, doc_a_id=cell(row, "doc_a_id"), doc_b_id=cell(row, "doc_b_id"))  # type: ignore[arg-type]
        )
    if issues:
        raise DatasetError(issues)
    if not instances:
        raise DatasetError([RowIssue(str(path), None, None, "no instance found")])
    return instances


def _instance(instance_id: str, topic_id: int, query: HCQuery, **documents: str | None) -> HCInstance:
    """An instance asking ``query``; ``documents`` are doc_a, doc_b and their ids (the texts empty when not given:
    a run of the no-context template alone shows none)."""
    return HCInstance(
        instance_id=instance_id,
        topic_id=topic_id,
        query=query.query,
        query_stance=query.query_stance,
        **{"doc_a": "", "doc_b": "", **documents},  # type: ignore[arg-type]
    )


def _find(folder: Path, names: tuple[str, ...]) -> Path | None:
    return next((folder / name for name in names if (folder / name).is_file()), None)


def nc_instances(queries: dict[int, HCQuery], pairs: list[tuple[int, HCPair]] | None) -> list[HCInstance]:
    """Instances for a run of the no-context template alone: one per pair (numbered in pair order, as
    ``build_instances``) or, without a pair list, one per question; the documents are left empty."""
    if pairs is None:
        return [_instance(f"topic-{topic}", topic, q) for topic, q in sorted(queries.items())]
    instances: list[HCInstance] = []
    issues = []
    for line, pair in pairs:
        query = queries.get(pair.topic_id)
        if query is None:
            issues.append(RowIssue("pairs", line, "topic_id", f"topic {pair.topic_id} is not in the query list"))
            continue
        instances.append(
            _instance(str(len(instances)), pair.topic_id, query, doc_a_id=pair.doc1_id, doc_b_id=pair.doc2_id)
        )
    if issues:
        raise DatasetError(issues)
    return instances


def load_healthcontradict(
    path: str | Path,
    *,
    queries: str | Path | None = None,
    documents: str | Path | None = None,
    pairs: str | Path | None = None,
    seed: int = PAIRING_SEED,
    need_documents: bool = True,
) -> HCDataset:
    """Instances from a prepared instances file, or from a folder laid out like the public repo.

    In a folder: ``dataset_ready.jsonl`` if present; otherwise the query list, the document table
    and, when present, the pair list (else the documents are paired with ``seed`` + topic_id).
    ``queries``/``documents``/``pairs`` name the files explicitly. ``need_documents=False`` (a run of
    NC alone): without a document table, instances come from the query list and the pair list (see
    the module docstring).
    """
    path = Path(path)
    if not path.exists():
        raise DatasetError([RowIssue(str(path), None, None, "no such file or folder")])
    if not path.is_dir():
        check_regular_file(path)  # a FIFO or a device: refused with its own message
    for given in (queries, documents, pairs):
        if given is not None:
            check_regular_file(Path(given))
    if path.is_file() and queries is None and documents is None:
        loaded = load_instances(path, documents=need_documents)
        return HCDataset(loaded, source=str(path), pairing="prepared instances", files=[str(path)])
    folder = path if path.is_dir() else path.parent
    if path.is_file() and queries is None:
        queries = path  # --data names the query list, --documents the document table
    if queries is None and documents is None and pairs is None:
        ready = _find(folder, INSTANCE_FILES)
        if ready is not None:
            loaded = load_instances(ready, documents=need_documents)
            return HCDataset(loaded, source=str(ready), pairing="prepared instances", files=[str(ready)])
    query_path = Path(queries) if queries is not None else _find(folder, QUERY_FILES)
    doc_path = Path(documents) if documents is not None else _find(folder, DOCUMENT_FILES)
    if not need_documents and doc_path is None and query_path is not None:
        query_map = load_queries(query_path)
        pair_path = Path(pairs) if pairs is not None else _find(folder, PAIR_FILES)
        pair_rows = load_pairs(pair_path) if pair_path is not None else None
        instances = nc_instances(query_map, pair_rows)
        files = [str(query_path)] + ([str(pair_path)] if pair_path is not None else [])
        pairing = f"pair list {pair_path.name} (no documents: NC only)" if pair_path else "one per question (NC only)"
        return HCDataset(instances, source=str(folder), pairing=pairing, files=files)
    missing = []
    if query_path is None:
        missing.append(RowIssue(str(folder), None, None, f"no query list ({' or '.join(QUERY_FILES)})"))
    if doc_path is None:
        missing.append(
            RowIssue(
                str(folder),
                None,
                None,
                f"no document table ({' or '.join(DOCUMENT_FILES)}; columns topic_id, doc_id, stance, text). "
                "The public repo keeps it in Git LFS; give it with --documents, or run --templates NC alone",
            )
        )
    if missing:
        raise DatasetError(missing)
    assert query_path is not None and doc_path is not None
    query_map = load_queries(query_path)
    docs = load_documents(doc_path)
    pair_path = Path(pairs) if pairs is not None else _find(folder, PAIR_FILES)
    files = [str(query_path), str(doc_path)]
    if pair_path is not None:
        pair_rows = load_pairs(pair_path)
        instances = build_instances(query_map, docs, pair_rows, pairs_file=str(pair_path))
        files.append(str(pair_path))
        pairing = f"pair list {pair_path.name}"
    else:
        found = pair_documents(docs, query_map, seed=seed)
        instances = build_instances(query_map, docs, found)
        pairing = f"paired with seed {seed} + topic_id"
    if not instances:
        raise DatasetError([RowIssue(str(folder), None, None, "no contradiction pair could be formed")])
    return HCDataset(instances, source=str(folder), pairing=pairing, files=files)
