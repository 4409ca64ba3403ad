"""Local evidence search at corpus scale: index build and query latency, and retrieval of the right document.

Why: ``--tools local:DIR`` may index a large evidence collection (guidelines, textbooks), and every
tool call of every item runs a query. This script builds a synthetic corpus of N documents (the
21 originals of tests/data/medical_corpus plus N-21 distractors assembled from their sentences, so
the vocabulary is realistic), then reports:

* index build time (documents/s) in memory and on disk, and the time to reopen an unchanged index;
* median and 95th-percentile query latency of the FTS5/BM25 backend over the test queries;
* the same queries answered by a brute-force Python scorer (term counts over every document), the
  baseline a hand-written search would start from, as a latency ratio;
* how often the original document is still ranked first among the distractors.

    python bench/local_search.py [--documents 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_core.mitigation.search.local import LocalSearch  # noqa: E402
from tests.bench_core.mitigation.search.test_local import QUERIES  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "medical_corpus"
WORD = re.compile(r"[^\W_]+")


def build_corpus(folder: Path, n: int, seed: int = 0) -> None:
    """The originals plus distractors made of 6-12 random sentences of other documents each."""
    import shutil

    shutil.copytree(CORPUS, folder)
    sentences = []
    for path in CORPUS.rglob("*.md"):
        sentences += [s.strip() for s in re.split(r"(?<=[.!?])\s+", path.read_text()) if len(s.split()) > 4]
    rng = random.Random(seed)
    distractors = folder / "distractors"
    distractors.mkdir()
    for index in range(n - 21):
        text = " ".join(rng.sample(sentences, rng.randint(6, 12)))
        (distractors / f"d{index:06d}.txt").write_text(f"Note {index}\n{text}\n")


def brute_force(documents: list[tuple[str, str]], query: str) -> str:
    """Rank by the number of query-term occurrences (the naive baseline); the best document's id."""
    terms = {t.lower() for t in WORD.findall(query)}
    best, best_score = "", -1
    for doc_id, text in documents:
        words = [w.lower() for w in WORD.findall(text)]
        score = sum(w in terms for w in words)
        if score > best_score:
            best, best_score = doc_id, score
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    english = [(q, d) for q, d in QUERIES if q.isascii()]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "corpus"
        build_corpus(folder, args.documents)
        started = time.perf_counter()
        memory = LocalSearch.build(folder)
        build_memory = time.perf_counter() - started
        index = Path(tmp) / "index.sqlite"
        started = time.perf_counter()
        LocalSearch.build(folder, index_path=index)
        build_disk = time.perf_counter() - started
        started = time.perf_counter()
        reopened = LocalSearch.build(folder, index_path=index)
        reopen = time.perf_counter() - started
        assert reopened.fingerprint == memory.fingerprint
        n = memory.n_documents
        print(f"corpus: {n} documents ({sum(p.stat().st_size for p in folder.rglob('*') if p.is_file()) / 1e6:.1f} MB)")
        print(f"index build in memory: {build_memory:.2f} s ({n / build_memory:,.0f} documents/s)")
        print(
            f"index build on disk:   {build_disk:.2f} s; reopening unchanged index: {reopen:.2f} s (fingerprint check)"
        )

        latencies = []
        first = 0
        for _ in range(args.repeat):
            for query, expected in QUERIES:
                started = time.perf_counter()
                hits = memory.search_sync(query, 5)
                latencies.append(time.perf_counter() - started)
                first += bool(hits) and hits[0].url == expected
        latencies.sort()
        median = statistics.median(latencies)
        p95 = latencies[int(0.95 * (len(latencies) - 1))]
        print(f"FTS5/BM25 query: median {median * 1000:.2f} ms, p95 {p95 * 1000:.2f} ms")
        print(f"right document first among {n}: {first // args.repeat}/{len(QUERIES)} queries")

        documents = [(p.relative_to(folder).as_posix(), p.read_text(errors="ignore")) for p in folder.rglob("*")
                     if p.is_file() and p.suffix in (".md", ".txt", ".html")]  # fmt: skip
        started = time.perf_counter()
        naive_first = sum(brute_force(documents, q) == d for q, d in english)
        naive = (time.perf_counter() - started) / len(english)
        print(
            f"brute-force baseline (term counts, text already in memory): {naive * 1000:.1f} ms per query, "
            f"right document first {naive_first}/{len(english)} (English queries); "
            f"BM25 index is {naive / median:,.0f}x faster"
        )


if __name__ == "__main__":
    main()
