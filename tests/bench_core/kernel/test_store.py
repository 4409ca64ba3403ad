import json

from bench_core.kernel.store import FAILED, OK, ResultKey, ResultStore


def _record(item, status):
    return {"key": ResultKey("b", item, "clean", "m", "e", "c").as_dict(), "status": status}


def test_a_line_cut_short_by_a_kill_is_ignored_and_isolated(tmp_path):
    store = ResultStore(tmp_path)
    store.append(_record("1", OK))
    store.close()
    with store.path.open("a") as handle:  # what a kill in the middle of a write would leave
        handle.write('{"key": {"benchmark": "b", "item": "2"')
    reopened = ResultStore(tmp_path)
    assert reopened.corrupt_lines == 1 and reopened.status(ResultKey("b", "1", "clean", "m", "e", "c")) == OK
    reopened.append(_record("3", OK))
    reopened.close()
    lines = store.path.read_text().splitlines()
    assert json.loads(lines[-1])["key"]["item"] == "3"
    assert [r["key"]["item"] for r in ResultStore(tmp_path).iter_records()] == ["1", "3"]


def test_success_supersedes_earlier_failures(tmp_path):
    store = ResultStore(tmp_path)
    store.append(_record("1", FAILED))
    key = ResultKey("b", "1", "clean", "m", "e", "c")
    assert store.status(key) == FAILED
    store.append(_record("1", OK))
    store.append(_record("1", FAILED))
    assert store.status(key) == OK
    assert ResultStore(tmp_path).latest()[key.id]["status"] == OK
