"""Data, policies and arguments shared by the batch tests (one small run of each command that calls models),
and the synthetic data files the kill-and-resume tests run on."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tests.bench_core.medmisbench.scenario import run_args
from tests.fakes.openai_server import Received, Reply

N_ITEMS = 6
CONDITIONS = ("clean", "type1", "type2")
N_CALLS = N_ITEMS * len(CONDITIONS)  # the calls of one MedMisBench run
TIMING = ("started_at", "finished_at", "latency_s")
ROOT = Path(__file__).resolve().parents[3]
QUIET = ("--no-progress", "--backoff", "0.01")  # no progress bar, fast retries
TROJAN_SAMPLE = ROOT / "tests" / "data" / "trojan" / "standardized_analysis_sample.json"


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def digest(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16)


def medmisbench_policy(received: Received) -> Reply:
    """A deterministic 'model': its answer letter depends only on the prompt."""
    letter = "ABCD"[digest(received.last_user_text) % 4]
    return Reply(content=json.dumps({"thinking_process": "hash", "answer_letter": letter}))


def write_medmisbench(path: Path, n: int = N_ITEMS) -> Path:
    rows = []
    for index in range(n):
        rows.append(
            {
                "id": f"syn-{index:03d}",
                "question": f"Synthetic question number {index}?",
                "answer": "ABCD"[index % 4],
                **{f"op{c}": f"option {c} of {index}" for c in "abcd"},
                **{f"inject{c}": f"claim supporting {c} for {index}" for c in "abcd"},
                "injection_content": ["Cue Remapping", "Exception Poisoning"][index % 2],
                "injection_provenance": ["Neutral", "Patient", "Authority"][index % 3],
            }
        )
    return write_jsonl(path, rows)


def medmisbench_args(server: Any, data: Path, out: Path, provider: str = "openai") -> list[str]:
    base = server.url if provider == "openai" else server.url.removesuffix("/v1")
    model = {"openai": "m-openai", "anthropic": "claude-fake", "google": "gemini-2.5-flash"}[provider]
    return run_args(data, base, out, "--provider", provider, "--api-key-env", "MEDREV_TEST_KEY", *QUIET, model=model)


def healthcontradict_policy(received: Received) -> Reply:
    return Reply(content=["Yes", "No"][digest(received.last_user_text) % 2])


def write_healthcontradict(path: Path) -> Path:
    rows = []
    for k in range(4):
        topic = 1 + k // 2
        rows.append(
            {
                "instance_id": str(k),
                "topic_id": topic,
                "query": f"Does treatment {topic} work?",
                "query_stance": ["yes", "no"][k % 2],
                "doc_a": f"Treatment {topic} works, says document {k}a.",
                "doc_b": f"Treatment {topic} does not work, says document {k}b.",
            }
        )
    return write_jsonl(path, rows)


def healthcontradict_args(server: Any, data: Path, out: Path, *extra: str, model: str = "hc-model") -> list[str]:
    return run_args(data, server.url, out, *QUIET, *extra, model=model, design="healthcontradict")


def trojan_policy(received: Received) -> Reply:
    if received.body.get("model") == "judge-x":
        return Reply(content=json.dumps({"score": digest(received.last_user_text) % 3 - 1, "analysis": "scored"}))
    return Reply(content=f"answer {digest(received.last_user_text) % 97}: the trial supports it.")


def trojan_args(server: Any, out: Path) -> list[str]:
    return [
        "run",
        "trojan",
        "--data",
        str(TROJAN_SAMPLE),
        "--model",
        "target-a",
        "--base-url",
        server.url,
        "--judge-model",
        "judge-x",
        "--retrieved-at",  # else the time of the run: the two reports would differ by it
        "2024-01-01T00:00:00Z",
        "--out",
        str(out),
        *QUIET,
    ]


def write_medqa(path: Path, n: int = 4) -> Path:
    rows = []
    for index in range(n):
        options = {letter: f"Treatment {letter.lower()}{index} regimen" for letter in "ABCD"}
        rows.append(
            {
                "question": f"Synthetic vignette {index}: which regimen is indicated?",
                "options": options,
                "answer": options["ABCD"[index % 4]],
                "answer_idx": "ABCD"[index % 4],
            }
        )
    return write_jsonl(path, rows)


def generate_args(server: Any, source: Path, out: Path) -> list[str]:
    return [
        "generate",
        "--source",
        str(source),
        "--format",
        "medqa",
        "--model",
        "gen",
        "--base-url",
        server.url,
        "--out",
        str(out),
        *QUIET,
    ]


def records(run_dir: Path) -> list[dict[str, Any]]:
    """The records of ``results.jsonl`` in key order, without the fields that say when a call was made."""
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]
    for row in rows:
        for name in TIMING:
            row.pop(name, None)
    return sorted(rows, key=lambda row: json.dumps(row["key"], sort_keys=True))


def batch_flags(*extra: str) -> list[str]:
    return ["--batch", "--poll-interval", "0.01", *extra]


def medmisbench_batch_args(server: Any, data: Path, out: Path, *extra: str, provider: str = "openai") -> list[str]:
    """``medmisbench_args`` of a ``--batch`` run, with ``extra`` options."""
    return [*medmisbench_args(server, data, out, provider), *batch_flags(*extra)]
