"""The local backend finds the right document for realistic medical queries (tests/data/medical_corpus)."""

from __future__ import annotations

import asyncio
import itertools
import shutil
import sqlite3

import pytest

from bench_core.mitigation.search import SearchError, make_backend
from bench_core.mitigation.search.documents import DocumentError
from bench_core.mitigation.search.local import LocalSearch, scan_folder
from tests.bench_core.mitigation.harness_agent import CORPUS_DIR

QUERIES = [
    ("first-line drug for type 2 diabetes", "endocrine/metformin-type-2-diabetes.md"),
    ("when to stop metformin with low eGFR", "endocrine/metformin-type-2-diabetes.md"),
    ("reversal of warfarin bleeding with vitamin K", "pharmacology/warfarin-inr-and-reversal.md"),
    ("antibiotics that raise the INR", "pharmacology/warfarin-inr-and-reversal.md"),
    ("adrenaline dose for anaphylaxis", "emergency/anaphylaxis-adrenaline.html"),
    ("epinephrine intramuscular thigh", "emergency/anaphylaxis-adrenaline.html"),
    ("seizure prophylaxis in pre-eclampsia", "obstetrics/pre-eclampsia-magnesium.html"),
    ("thrombolysis time window for ischaemic stroke", "neurology/ischaemic-stroke-thrombolysis.txt"),
    ("alteplase within 4.5 hours", "neurology/ischaemic-stroke-thrombolysis.txt"),
    ("treatment of an acute gout flare", "rheumatology/acute-gout.md"),
    ("negatively birefringent crystals", "rheumatology/acute-gout.md"),
    ("antidote for acetaminophen overdose", "toxicology/paracetamol-overdose.pdf"),
    ("fluid resuscitation and lactate in septic shock", "infectious/sepsis-first-hour.pdf"),
    ("lithium toxicity therapeutic range", "psychiatry/lithium-monitoring.md"),
    ("Kawasaki disease IVIG coronary aneurysm", "paediatrics/kawasaki-disease.txt"),
    ("H. pylori eradication triple therapy", "gastroenterology/helicobacter-pylori.md"),
    ("emergency treatment of hyperkalemia with ECG changes", "renal/hyperkalaemia-emergency.md"),
    ("ACE inhibitors contraindicated in pregnancy", "cardiology/hypertension-first-line.md"),
    ("door-to-balloon time in STEMI", "cardiology/stemi-reperfusion.html"),
    ("CURB-65 pneumonia severity", "infectious/community-acquired-pneumonia.txt"),
    ("low ferritin microcytic anaemia", "haematology/iron-deficiency-anaemia.txt"),
    ("levothyroxine dose and TSH monitoring", "endocrine/hypothyroidism-levothyroxine.md"),
    ("melanoma ABCDE checklist", "dermatology/melanoma-abcde.html"),
    ("never use LABA without inhaled corticosteroid", "respiratory/asthma-stepwise.md"),
    ("高血压的一线治疗药物", "zh/gaoxueya-yixian-yaowu.md"),
    ("妊娠期禁用血管紧张素转换酶抑制剂", "zh/gaoxueya-yixian-yaowu.md"),
    ("二甲双胍 肾功能 乳酸酸中毒", "zh/tangniaobing-erjiashuanggua.txt"),
]


@pytest.fixture(scope="module")
def corpus():
    backend = LocalSearch.build(CORPUS_DIR)
    yield backend
    asyncio.run(backend.aclose())


def test_indexes_every_supported_document_and_lists_the_rest(corpus):
    assert corpus.n_documents == 21
    assert corpus.skipped == [{"doc_id": "misc/empty.txt", "reason": f"{CORPUS_DIR}/misc/empty.txt: no text"}]
    scanned = scan_folder(CORPUS_DIR)
    assert scanned.ignored == ["misc/notes.csv"]  # unsupported type; the hidden draft is not even listed
    assert all(not doc_id.startswith("misc/.") for doc_id, _ in scanned.files)


@pytest.mark.parametrize(("query", "expected"), QUERIES)
def test_realistic_queries_rank_the_right_document_first(corpus, query, expected):
    hits = corpus.search_sync(query, 5)
    assert hits and hits[0].url == expected, [h.url for h in hits]
    assert hits[0].score > 0 and all(a.score >= b.score for a, b in itertools.pairwise(hits))


def test_snippets_show_the_matching_passage(corpus):
    hit = corpus.search_sync("magnesium sulfate loading dose", 1)[0]
    assert hit.title == "Pre-eclampsia and eclampsia"
    assert "Magnesium sulfate" in hit.snippet and "4 g" in hit.snippet
    assert corpus.search_sync("二甲双胍", 1)[0].snippet.count("二甲双胍") >= 1


def test_visit_returns_clean_text_by_id(corpus):
    page = corpus.visit_sync("cardiology/stemi-reperfusion.html")
    assert page.title == "ST-elevation myocardial infarction: reperfusion"
    assert "door-to-balloon" in page.text
    assert "analytics" not in page.text and "font-family" not in page.text and "Contact" not in page.text
    pdf = corpus.visit_sync("toxicology/paracetamol-overdose.pdf")
    assert pdf.title == "Paracetamol (acetaminophen) overdose" and "acetylcysteine" in pdf.text
    assert corpus.visit_sync("./rheumatology/acute-gout.md").url == "rheumatology/acute-gout.md"
    with pytest.raises(SearchError, match=r"no document with id 'https://example\.org/gout'") as error:
        corpus.visit_sync("https://example.org/gout")
    assert error.value.kind == "not_found"


def test_queries_cannot_break_out_of_fts5_syntax(corpus):
    assert corpus.search_sync('warfarin" OR NEAR(a b) AND * -- ); DROP TABLE documents;', 3)[0].url == (
        "pharmacology/warfarin-inr-and-reversal.md"
    )
    assert corpus.search_sync("...  ", 3) == []
    assert corpus.search_sync("analytics", 3) == []  # script content was not indexed
    assert corpus.search_sync("hidden draft", 3) == []


def test_index_file_is_reused_until_the_folder_changes(tmp_path):
    folder = tmp_path / "docs"
    shutil.copytree(CORPUS_DIR / "rheumatology", folder / "rheumatology")
    index = tmp_path / "run" / "index.sqlite"
    first = LocalSearch.build(folder, index_path=index)
    fingerprint = first.fingerprint
    asyncio.run(first.aclose())
    sqlite3.connect(index).execute("UPDATE documents SET title = 'marker'").connection.commit()
    again = LocalSearch.build(folder, index_path=index)
    assert again.fingerprint == fingerprint and again.visit_sync("rheumatology/acute-gout.md").title == "marker"
    asyncio.run(again.aclose())
    (folder / "new.md").write_text("# Allopurinol hypersensitivity\nHLA-B*5801 screening before allopurinol.\n")
    rebuilt = LocalSearch.build(folder, index_path=index)
    assert rebuilt.fingerprint != fingerprint and rebuilt.n_documents == 2
    assert rebuilt.visit_sync("rheumatology/acute-gout.md").title.startswith("Gout")
    assert rebuilt.search_sync("HLA-B*5801 allopurinol screening", 1)[0].url == "new.md"
    assert rebuilt.describe() == {"backend": "local", "fingerprint": rebuilt.fingerprint, "documents": 2}
    asyncio.run(rebuilt.aclose())
    assert not list(index.parent.glob(".index-*"))  # no temporary file left behind


def test_unusable_folders_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a folder"):
        LocalSearch.build(tmp_path / "missing")
    (tmp_path / "a.txt").write_text("   \n")
    (tmp_path / "b.md").write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(DocumentError, match="no readable document to index"):
        LocalSearch.build(tmp_path)
    with pytest.raises(ValueError, match="local:DIR"):
        make_backend("local:")
    with pytest.raises(ValueError, match="unknown search backend"):
        make_backend("bing")
