"""The run-directory helpers every design shares: config hash, side files, merge-or-refuse, design lookup."""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
from pathlib import Path

import pytest

from bench_core.kernel.rundir import (
    LOCK_FILE,
    RunDesign,
    RunDirBusy,
    RunLock,
    append_jsonl,
    append_manifest,
    config_hash,
    find_run_dirs,
    merge_or_refuse,
    read_jsonl,
    write_atomic,
)


def test_config_hash_is_the_12_digit_sha256_of_sorted_json():
    settings = {"temperature": 0.0, "template": "medmisbench-authors@1", "max_tokens": None, "seed": 20260101}
    expected = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    assert config_hash(settings) == expected
    assert config_hash(dict(reversed(list(settings.items())))) == expected


def test_merge_adds_new_rows_once_and_refuses_a_changed_one(tmp_path: Path):
    path = tmp_path / "items.jsonl"
    append_jsonl(path, [{"key": "a", "v": 1}, {"key": "b", "v": 2}])
    saved = {row["key"]: row["v"] for row in read_jsonl(path)}
    incoming = [("a", 1, "row a"), ("c", 3, "row c"), ("c", 3, "row c again")]
    assert merge_or_refuse(path, saved, incoming, error=ValueError, noun="item", context="here") == ["row c"]
    changed = [("a", 9, "x"), ("b", 8, "y"), ("d", 4, "z")]
    with pytest.raises(
        ValueError, match=r"items\.jsonl: 2 item\(s\) differ from the ones here: a, b\. Use a new --out"
    ):
        merge_or_refuse(path, saved, changed, error=ValueError, noun="item", context="here")


def test_side_files_skip_a_line_cut_short_and_atomic_writes_replace(tmp_path: Path):
    append_manifest(tmp_path, "medmisbench", {"model": "m"})
    with (tmp_path / "runs.jsonl").open("a") as handle:
        handle.write('{"benchmark": "medm')  # a kill mid-line
    assert [row["model"] for row in read_jsonl(tmp_path / "runs.jsonl")] == ["m"]
    write_atomic(tmp_path / "out.json", ["{}", "\n"])
    assert (tmp_path / "out.json").read_text() == "{}\n" and not (tmp_path / "out.json.tmp").exists()


def test_find_run_dirs_asks_each_design_in_order(tmp_path: Path):
    for name in ("b-run", "a-run", "not-a-run"):
        (tmp_path / name).mkdir()
    (tmp_path / "a-run" / "first").touch()
    (tmp_path / "b-run" / "second").touch()
    designs = [
        RunDesign("first", lambda d: (d / "first").exists(), lambda d: d.name, lambda run: {"run": run}, print),
        RunDesign("second", lambda d: (d / "second").exists(), lambda d: d.name, lambda run: {"run": run}, print),
    ]
    found = [(path.name, design.benchmark) for path, design in find_run_dirs(tmp_path, designs)]
    assert found == [("a-run", "first"), ("b-run", "second")]
    ((path, design),) = find_run_dirs(tmp_path / "b-run", designs)
    assert design.benchmark == "second" and design.build(path) == {"run": "b-run"}


def test_the_run_lock_is_exclusive_names_its_holder_and_is_removed_on_release(tmp_path: Path):
    first = RunLock(tmp_path).acquire()
    pid, host, started = (tmp_path / LOCK_FILE).read_text().split()
    assert pid == str(os.getpid()) and host == socket.gethostname()
    holder = f"another run (pid {pid} on {host}, started {started}) holds this folder"
    with pytest.raises(RunDirBusy, match=re.escape(holder)):
        RunLock(tmp_path).acquire()  # a second open file: flock refuses it even in the same process
    first.release()
    assert not (tmp_path / LOCK_FILE).exists()
    second = RunLock(tmp_path).acquire()
    assert second.held
    second.release()


def test_a_lock_file_nobody_holds_is_taken_at_once_whatever_pid_it_names(tmp_path: Path):
    (tmp_path / LOCK_FILE).write_text(f"{os.getpid()} elsewhere 2026-01-01T00:00:00+00:00\n")  # a live PID, no lock
    lock = RunLock(tmp_path).acquire()
    assert (tmp_path / LOCK_FILE).read_text().split()[:2] == [str(os.getpid()), socket.gethostname()]
    lock.release()
