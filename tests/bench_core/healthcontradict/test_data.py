"""HealthContradict loaders: the public files, the authors' seeded pairing, prepared instances, refusals."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from bench_core.healthcontradict.data import (
    build_instances,
    load_documents,
    load_healthcontradict,
    load_instances,
    load_pairs,
    load_queries,
    pair_documents,
)
from bench_core.healthcontradict.items import HCDocument
from bench_core.kernel.errors import DatasetError

DATA = Path(__file__).resolve().parents[2] / "data" / "healthcontradict"


def _write_docs(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["topic_id", "doc_id", "stance", "text"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_public_query_list_and_pair_list():
    queries = load_queries(DATA / "query-all.jsonl")
    assert len(queries) == 116
    assert all(isinstance(t, int) for t in queries)  # the release mixes 101 and "101"
    assert queries[101].query_stance == "no" and queries[101].query.startswith("Will wearing an ankle brace")
    pairs = load_pairs(DATA / "doc-contradict.csv")
    assert len(pairs) == 920
    assert pairs[0] == (2, pairs[0][1]) and pairs[0][1].topic_id == 6  # CSV line 2 is the first pair
    assert len({p.topic_id for _, p in pairs}) == 81


def test_instances_from_the_real_pair_list_match_the_released_numbering():
    """With a document table holding the real pair ids, instance ids, topics, questions and answers are the
    released prompts_1.jsonl ones, line for line (the authors' a2 numbering)."""
    queries = load_queries(DATA / "query-all.jsonl")
    pairs = load_pairs(DATA / "doc-contradict.csv")
    docs = []
    for index, (_, pair) in enumerate(pairs):
        # alternate which column holds the yes document: a2 maps by stance, not by column
        first, second = ("yes", "no") if index % 2 == 0 else ("no", "yes")
        docs.append(HCDocument(topic_id=pair.topic_id, doc_id=pair.doc1_id, stance=first, text=f"text {pair.doc1_id}"))
        docs.append(HCDocument(topic_id=pair.topic_id, doc_id=pair.doc2_id, stance=second, text=f"text {pair.doc2_id}"))
    instances = build_instances(queries, docs, pairs)
    released = [json.loads(line) for line in (DATA / "prompts_1.jsonl").read_text().splitlines()]
    assert len(instances) == len(released) == 920
    for instance, row in zip(instances, released, strict=True):
        assert (instance.instance_id, instance.topic_id, instance.query, instance.query_stance) == (
            str(row["instance_id"]),
            row["topic_id"],
            row["query"],
            row["query_stance"],
        )
    second = instances[1]  # doc1 was the "no" document: doc_a must still be the yes one
    assert second.doc_a == f"text {pairs[1][1].doc2_id}" and second.doc_a_id == pairs[1][1].doc2_id
    assert sum(i.query_stance == "yes" for i in instances) == 244  # the paper's 26.5% yes


def _shuffled(ids: list[str], seed: int) -> list[str]:
    """What pandas' sample(frac=1, random_state=seed) does: a legacy RandomState permutation."""
    return [ids[i] for i in np.random.RandomState(seed).permutation(len(ids))]


def test_pairing_follows_the_authors_seeding_and_uses_each_document_once():
    docs = [
        # topic 1: 4 yes, 3 no documents with text, one no-document without text
        *[HCDocument(topic_id=1, doc_id=f"y1-{k}", stance="yes", text=f"yes {k}") for k in range(4)],
        *[HCDocument(topic_id=1, doc_id=f"n1-{k}", stance="no", text=f"no {k}") for k in range(3)],
        HCDocument(topic_id=1, doc_id="n1-empty", stance="no", text=None),
        # topic 7 shares two documents with topic 1 (TREC judged some documents for two topics)
        HCDocument(topic_id=7, doc_id="y1-0", stance="yes", text="shared, unused by topic 1"),
        HCDocument(topic_id=7, doc_id="y1-2", stance="yes", text="shared, used by topic 1"),
        HCDocument(topic_id=7, doc_id="y7-1", stance="yes", text="y7"),
        *[HCDocument(topic_id=7, doc_id=f"n7-{k}", stance="no", text=f"no {k}") for k in range(3)],
        # topic 9 is not in the query list
        HCDocument(topic_id=9, doc_id="y9", stance="yes", text="x"),
        HCDocument(topic_id=9, doc_id="n9", stance="no", text="x"),
    ]
    pairs = pair_documents(docs, {1, 7})
    # seed 43 orders topic 1's yes documents 2, 1, 3, 0 and seed 44 its no documents 2, 1, 0; topic 7
    # keeps y1-0 and y7-1 (y1-2 is used), seed 49 orders them 1, 0 and seed 50 its no documents 1, 2, 0
    assert _shuffled(["y1-0", "y1-1", "y1-2", "y1-3"], 43) == ["y1-2", "y1-1", "y1-3", "y1-0"]
    assert [(p.topic_id, p.doc1_id, p.doc2_id) for p in pairs] == [
        (1, "y1-2", "n1-2"),
        (1, "y1-1", "n1-1"),
        (1, "y1-3", "n1-0"),
        (7, "y7-1", "n7-1"),
        (7, "y1-0", "n7-2"),
    ]
    assert _shuffled(["y1-0", "y7-1"], 49) == ["y7-1", "y1-0"]
    assert _shuffled(["n7-0", "n7-1", "n7-2"], 50) == ["n7-1", "n7-2", "n7-0"]
    all_ids = [d for p in pairs for d in (p.doc1_id, p.doc2_id)]
    assert len(all_ids) == len(set(all_ids))
    assert pair_documents(docs, {1, 7}, seed=7) != pairs  # the seed matters


def test_folder_like_the_repo_pairs_with_the_seed_or_uses_the_pair_list(tmp_path):
    folder = tmp_path / "repo"
    (folder / "query").mkdir(parents=True)
    (folder / "doc").mkdir()
    (folder / "query" / "query-all.jsonl").write_text(
        '{"topic_id": "1", "description": "Can cranberries prevent UTIs?", "query_stance": "no"}\n'
        '{"topic_id": 5, "description": "Can acupuncture prevent migraines?", "query_stance": "yes"}\n'
    )
    rows = [
        {"topic_id": 1, "doc_id": "a", "stance": "yes", "text": "cranberries work"},
        {"topic_id": 1, "doc_id": "b", "stance": "no", "text": "cranberries do not work"},
        {"topic_id": 5, "doc_id": "c", "stance": "effective", "text": "acupuncture helps"},  # TREC 2019 label
        {"topic_id": 5, "doc_id": "d", "stance": "ineffective", "text": "acupuncture does not help"},
    ]
    _write_docs(folder / "doc" / "doc-all-stance.csv", rows)
    seeded = load_healthcontradict(folder)
    assert seeded.pairing == "paired with seed 42 + topic_id"
    assert [(i.instance_id, i.topic_id, i.correct_doc) for i in seeded.instances] == [
        ("0", 1, "cranberries do not work"),
        ("1", 5, "acupuncture helps"),
    ]
    (folder / "doc" / "doc-contradict.csv").write_text("topic_id,doc1_id,doc2_id,pair_type\n5,d,c,contradiction\n")
    listed = load_healthcontradict(folder)
    assert listed.pairing == "pair list doc-contradict.csv"
    assert [(i.instance_id, i.doc_a_id, i.doc_b_id) for i in listed.instances] == [("0", "c", "d")]
    # files named explicitly: only a named pair list is used
    query_file, doc_file = folder / "query" / "query-all.jsonl", folder / "doc" / "doc-all-stance.csv"
    assert len(load_healthcontradict(query_file, documents=doc_file).instances) == 2
    named = load_healthcontradict(query_file, documents=doc_file, pairs=folder / "doc" / "doc-contradict.csv")
    assert len(named.instances) == 1


def test_a_pair_that_does_not_resolve_refuses_the_build(tmp_path):
    folder = tmp_path / "repo"
    folder.mkdir()
    shutil.copy(DATA / "query-all.jsonl", folder)
    _write_docs(
        folder / "doc-all-stance.csv",
        [
            {"topic_id": 6, "doc_id": "x", "stance": "yes", "text": "t"},
            {"topic_id": 6, "doc_id": "y", "stance": "yes", "text": "t"},
        ],
    )
    (folder / "doc-contradict.csv").write_text("topic_id,doc1_id,doc2_id,pair_type\n6,x,y,contradiction\n6,x,zz,c\n")
    with pytest.raises(DatasetError) as caught:
        load_healthcontradict(folder)
    text = str(caught.value)
    assert "doc-contradict.csv:2: field 'doc2_id': stances yes/yes" in text
    assert "doc-contradict.csv:3: field 'doc2_id': document zz of topic 6 is not in the document table" in text


def test_bad_rows_are_named_and_nothing_is_loaded(tmp_path):
    docs = _write_docs(
        tmp_path / "docs.csv",
        [
            {"topic_id": "6", "doc_id": "a", "stance": "yes", "text": "ok"},
            {"topic_id": "six", "doc_id": "b", "stance": "maybe", "text": "bad"},
        ],
    )
    with pytest.raises(DatasetError) as caught:
        load_documents(docs)
    assert "docs.csv:3: field 'topic_id': expected an integer, got 'six'" in str(caught.value)
    assert "docs.csv:3: field 'stance': expected yes or no, got 'maybe'" in str(caught.value)
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"topic_id": 1, "description": "Q?", "query_stance": "unsure"}\n')
    with pytest.raises(DatasetError, match=r"q.jsonl:1: field 'query_stance'"):
        load_queries(queries)


def test_prepared_instances_with_long_documents_and_refusals(tmp_path):
    long_doc = "word " * 40_000  # 200,000 characters: more than the csv module's default field limit
    path = tmp_path / "instances.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(
            handle, fieldnames=["instance_id", "topic_id", "query", "query_stance", "doc_a", "doc_b"]
        )
        writer.writeheader()
        writer.writerow(
            {"instance_id": 0, "topic_id": 6, "query": "Q?", "query_stance": "no", "doc_a": long_doc, "doc_b": "b"}
        )
    (loaded,) = load_instances(path)
    assert loaded.doc_a == long_doc and loaded.correct_doc == "b"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"instance_id": 1, "topic_id": 6, "query": "Q?", "query_stance": "no", "doc_a": "a", "doc_b": "b"})
        + "\n"
        + json.dumps({"instance_id": 2, "topic_id": 6, "query": "Q?", "query_stance": "YES", "doc_a": "", "doc_b": "b"})
        + "\n"
        + json.dumps({"instance_id": 1, "topic_id": 6, "query": "Q?", "query_stance": "no", "doc_a": "a", "doc_b": "b"})
        + "\n"
    )
    with pytest.raises(DatasetError) as caught:
        load_instances(bad)
    text = str(caught.value)
    assert "bad.jsonl:2: field 'doc_a': missing or empty" in text
    assert "bad.jsonl:3: field 'instance_id': '1' appears twice" in text
    assert "2 problems found, nothing was loaded" in text


def test_run_files_name_the_line_and_field_of_a_row_they_cannot_use(tmp_path):
    """A result for an instance not in instances.jsonl names its line of results.jsonl; an instance row that is
    not one medrev wrote names its line of instances.jsonl and the field."""
    from bench_core.healthcontradict.items import HCInstance
    from bench_core.healthcontradict.run import BENCHMARK, RunDirError, read_run_data, write_instances
    from bench_core.kernel.rundir import DamagedFile
    from bench_core.kernel.store import ResultStore

    instance = HCInstance(instance_id="1", topic_id=1, query="Q?", query_stance="yes", doc_a="A", doc_b="B")
    run = tmp_path / "run"
    write_instances(run, [instance])
    store = ResultStore(run)
    for item in ("1", "ghost"):
        key = {"benchmark": BENCHMARK, "item": item, "condition": "CC", "model": "m", "endpoint": "e", "config": "c"}
        store.append({"key": key, "status": "ok", "response": {"text": "Yes"}, "parsed": {"label": "yes"}})
    store.close()
    with pytest.raises(RunDirError) as caught:
        read_run_data(run)
    assert str(caught.value).startswith(
        f"{run / 'results.jsonl'}:2: field 'key.item': result for instance 'ghost' which is not in instances.jsonl"
    )
    path = run / "instances.jsonl"
    row = json.loads(path.read_text().splitlines()[0])
    row["instance"]["query_stance"] = "perhaps"
    path.write_text("\n" + json.dumps(row) + "\n")  # the row now on line 2
    with pytest.raises(DamagedFile, match=r"instances.jsonl:2: field 'instance.query_stance': record 1 is not one"):
        read_run_data(run)
