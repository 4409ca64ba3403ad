"""Derive the fixtures of this folder by running the authors' own notebook code (not part of the test suite).

The fixtures describe what the authors' released notebook (``AI-in-Health/MedMisBench``,
``medmisbench_no_harness_eval.ipynb``; its blob last changed in commit 89383f5) does with the rows
of ``MEDMISQA.jsonl`` and the replies of ``replies.json``:

- ``prompts.json``: per row, what their ``reconstruct_dicts`` reads (options, injections, gold) and
  the prompt their ``build_prompt`` makes for baseline, Type 2 and Type 1 with every possible
  target (their ``random.choice`` is replaced by each choice in turn), with the candidate list;
- ``requests.json``: the HTTP body each provider of their Step 3 sends for those prompts, as it
  arrived at the loopback server of ``tests/fakes/openai_server.py`` through the real SDKs
  (openai, anthropic, google-genai), for the model configurations of the paper;
- ``answers.json``: for each reply, the label their Step 4 worker extracts and whether it scores
  it correct (``extracted_answer``, ``is_success``), the reply coming back through their SGLang
  path from the loopback server; and a failed call (HTTP 400).

Nothing of the notebook is copied here: the script loads the notebook from a git directory,
executes its definitions in a namespace where the SDK clients point at the loopback server, and
writes only the observed behaviour. Run it from the project root when the notebook changes::

    python tests/data/medmisbench_authors/derive_fixtures.py /work/.mirror/AI-in-Health+MedMisBench/repo 89383f5
"""

from __future__ import annotations

import ast
import functools
import json
import os
import random as real_random
import subprocess
import sys
import tempfile
import types as pytypes
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tests.fakes.openai_server import FakeOpenAIServer, Reply  # noqa: E402

ROWS = HERE / "MEDMISQA.jsonl"
REPLY_OK = '{"thinking_process": "fixture", "answer_letter": "A"}'

# Model configurations of the paper (section 4.1 / C.1) as the notebook's Step 2 would set them.
CONFIGS = [
    {"name": "openai-gpt-4o-mini", "PROVIDER": "openai", "MODEL_ID": "gpt-4o-mini"},
    {"name": "openai-gpt-5.4-medium", "PROVIDER": "openai", "MODEL_ID": "gpt-5.4", "OPENAI_REASONING_EFFORT": "medium"},
    {"name": "openai-gpt-5.4-none", "PROVIDER": "openai", "MODEL_ID": "gpt-5.4", "OPENAI_REASONING_EFFORT": "none"},
    {"name": "sglang-qwen3.6", "PROVIDER": "sglang", "MODEL_ID": "Qwen/Qwen3.6-35B-A3B"},
    {"name": "sglang-glm-5.1", "PROVIDER": "sglang", "MODEL_ID": "zai-org/GLM-5.1"},
    {"name": "sglang-medgemma", "PROVIDER": "sglang", "MODEL_ID": "google/medgemma-27b-text-it"},
    {
        "name": "anthropic-sonnet-4.6-medium",
        "PROVIDER": "anthropic",
        "MODEL_ID": "claude-sonnet-4-6",
        "CLAUDE_REASONING_EFFORT": "medium",
    },
    {
        "name": "anthropic-sonnet-4.6-low",
        "PROVIDER": "anthropic",
        "MODEL_ID": "claude-sonnet-4-6",
        "CLAUDE_REASONING_EFFORT": "low",
    },
    {
        "name": "anthropic-haiku-4.5",
        "PROVIDER": "anthropic",
        "MODEL_ID": "claude-haiku-4-5",
        "CLAUDE_REASONING_EFFORT": "low",
    },
    {
        "name": "gemini-3.1-pro-high",
        "PROVIDER": "gemini",
        "MODEL_ID": "gemini-3.1-pro-preview",
        "GEMINI_REASONING_EFFORT": "high",
    },
    {
        "name": "gemini-3.1-pro-minimal",
        "PROVIDER": "gemini",
        "MODEL_ID": "gemini-3.1-pro-preview",
        "GEMINI_REASONING_EFFORT": "minimal",
    },
    {
        "name": "gemini-3.1-flash-lite-minimal",
        "PROVIDER": "gemini",
        "MODEL_ID": "gemini-3.1-flash-lite-preview",
        "GEMINI_REASONING_EFFORT": "minimal",
    },
    {
        "name": "gemini-2.5-flash-medium",
        "PROVIDER": "gemini",
        "MODEL_ID": "gemini-2.5-flash",
        "GEMINI_REASONING_EFFORT": "medium",
    },
]
# Every prompt goes through this configuration; the others get the prompts of the first three rows.
FULL_CONFIG = "sglang-qwen3.6"
SKIPPED_CALLS = {"initialize_runtime", "atexit.register"}


def notebook_cells(git_dir: str, commit: str) -> list[str]:
    text = subprocess.run(
        ["git", "-C", git_dir, "show", f"{commit}:medmisbench_no_harness_eval.ipynb"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return ["".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "code"]


def _keep(statement: ast.stmt) -> bool:
    """Definitions only: imports, functions, classes and constant assignments (no calls with effects)."""
    if isinstance(statement, ast.ImportFrom):
        return statement.module != "datasets"  # only used to download the release
    if isinstance(statement, ast.Import | ast.FunctionDef | ast.ClassDef):
        return True
    if isinstance(statement, ast.Assign | ast.AnnAssign):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        if any(isinstance(t, ast.Subscript) for t in targets):  # os.environ[...] = ""
            return False
        source = ast.unparse(statement.value) if statement.value is not None else ""
        return not any(name in source for name in ("initialize_runtime", "Client(", "OpenAI(", "Anthropic(", ".mkdir"))
    return False


def load_namespace(cells: list[str], server_url: str) -> dict:
    from google import genai

    namespace: dict = {"__name__": "authors_notebook"}
    # Cells: 1 install, 2 configuration, 3 Step 3 (queries), 4 Step 4 (evaluation), 5 run, 6 summary.
    for index in (1, 2, 3):
        tree = ast.parse(cells[index])
        tree.body = [s for s in tree.body if _keep(s)]
        exec(compile(tree, f"<notebook cell {index}>", "exec"), namespace)
    shim = pytypes.SimpleNamespace(Client=functools.partial(genai.Client, http_options={"base_url": server_url[:-3]}))
    namespace["genai"] = shim
    namespace["Anthropic"] = _anthropic_client
    namespace["load_dataset"] = None
    namespace["OUTPUT_ROOT"] = Path(tempfile.mkdtemp(prefix="authors-notebook-"))
    namespace["SGLANG_BASE_URL"] = server_url
    namespace["SGLANG_AUTO_START"] = False
    namespace["BASE_DELAY_SECONDS"] = 0
    namespace["MAX_RETRIES"] = 1
    os.environ.update(
        OPENAI_API_KEY="sk-fixture",
        ANTHROPIC_API_KEY="sk-ant-fixture",
        GEMINI_API_KEY="gm-fixture",
        OPENAI_BASE_URL=server_url,
        ANTHROPIC_BASE_URL=server_url[:-3],
    )
    return namespace


def _anthropic_client(**kwargs):
    """``Anthropic(...)`` whose ``messages.create`` accepts ``temperature`` as the SDKs the notebook was
    written for did. Current SDKs dropped the keyword; older ones sent it as a top-level body field,
    which is what ``extra_body`` sends, so the wire body is the one the notebook produced."""
    import anthropic

    client = anthropic.Anthropic(**kwargs)
    create = client.messages.create

    def create_with_temperature(**call):
        if "temperature" in call:
            call["extra_body"] = {**call.get("extra_body", {}), "temperature": call.pop("temperature")}
        return create(**call)

    client.messages.create = create_with_temperature
    return client


class Chooser:
    """Stands in for ``random`` in the notebook: ``choice`` takes the element asked for and records the list."""

    def __init__(self) -> None:
        self.index = 0
        self.seen: list[list[str]] = []

    def choice(self, sequence):
        self.seen.append(list(sequence))
        return sequence[self.index]

    def uniform(self, a, b):
        return real_random.uniform(a, b)


def derive_prompts(ns: dict) -> dict:
    import pandas as pd

    rows = [json.loads(line) for line in ROWS.read_text(encoding="utf-8").splitlines() if line.strip()]
    frame = pd.DataFrame(rows)  # as the notebook's Hugging Face frame: a missing cell is NaN
    chooser = Chooser()
    ns["random"] = chooser
    out = {}
    for index, row in frame.iterrows():
        row_dict = ns["reconstruct_dicts"](row.to_dict())
        entry = {
            "index": int(index),
            "options": row_dict.get("options", {}),
            "injections": row_dict.get("injections", {}),
            "question": row_dict.get("question"),
            "ground_truth": str(row_dict.get("answer", "")).strip().upper(),
            "prompts": {},
        }
        entry["prompts"]["baseline"] = ns["build_prompt"](row_dict, "baseline", "MEDMISQA")[0]
        entry["prompts"]["type2"] = ns["build_prompt"](row_dict, "type2", "MEDMISQA")[0]
        chooser.seen.clear()
        chooser.index = 0
        first, _target = ns["build_prompt"](row_dict, "type1", "MEDMISQA")
        candidates = chooser.seen[0] if chooser.seen else []
        entry["type1_candidates"] = candidates
        entry["prompts"]["type1"] = {}
        if not candidates:
            entry["prompts"]["type1"][""] = first
        for position, key in enumerate(candidates):
            chooser.index = position
            prompt, sampled = ns["build_prompt"](row_dict, "type1", "MEDMISQA")
            assert sampled == key
            entry["prompts"]["type1"][key] = prompt
        out[row["id"]] = entry
    return out


def cases(prompts: dict, limit_rows: int | None = None):
    for number, (item_id, entry) in enumerate(prompts.items()):
        if limit_rows is not None and number >= limit_rows:
            return
        yield item_id, "clean", None, entry["prompts"]["baseline"]
        yield item_id, "type2", None, entry["prompts"]["type2"]
        for target, prompt in entry["prompts"]["type1"].items():
            yield item_id, "type1", target or None, prompt


def derive_requests(ns: dict, server: FakeOpenAIServer, prompts: dict) -> dict:
    defaults = {
        "OPENAI_REASONING_EFFORT": "medium",
        "GEMINI_REASONING_EFFORT": "high",
        "CLAUDE_REASONING_EFFORT": "medium",
    }
    out = {}
    for config in CONFIGS:
        ns.update(defaults)
        ns.update({k: v for k, v in config.items() if k != "name"})
        records = []
        for item_id, condition, target, prompt in cases(prompts, None if config["name"] == FULL_CONFIG else 3):
            server.reset()
            ns["generate_structured_response"](prompt)
            (received,) = [r for r in server.requests if not r.path.endswith("/models")]
            records.append(
                {
                    "item": item_id,
                    "condition": condition,
                    "target": target,
                    "path": received.path,
                    "body": received.body,
                }
            )
        out[config["name"]] = {"config": config, "requests": records}
    return out


def derive_answers(ns: dict, server: FakeOpenAIServer, replies: list[dict]) -> list[dict]:
    import pandas as pd

    rows = {json.loads(line)["id"]: json.loads(line) for line in ROWS.read_text(encoding="utf-8").splitlines()}
    ns.update(PROVIDER="sglang", MODEL_ID="google/medgemma-27b-text-it")
    out = []
    for number, case in enumerate(replies):
        row = pd.DataFrame([rows[case["item"]]]).iloc[0]
        if case.get("http_status"):
            server.policy = lambda received, status=case["http_status"]: Reply(status=status, error="bad request")
        else:
            server.policy = lambda received, text=case["reply"]: Reply(content=text)
        result = ns["evaluate_single_case_worker"]((number, row, "baseline", "MEDMISQA", ns["OUTPUT_ROOT"] / "answers"))
        out.append(
            {
                **case,
                "extracted_answer": result["extracted_answer"],
                "is_success": result["is_success"],
                "error": result["error"],
            }
        )
    server.policy = lambda received: Reply(content=REPLY_OK)
    return out


def main(argv: list[str]) -> None:
    git_dir, commit = argv[1], argv[2] if len(argv) > 2 else "HEAD"
    cells = notebook_cells(git_dir, commit)
    with FakeOpenAIServer(lambda received: Reply(content=REPLY_OK)) as server:
        ns = load_namespace(cells, server.url)
        prompts = derive_prompts(ns)
        requests = derive_requests(ns, server, prompts)
        replies = json.loads((HERE / "replies.json").read_text(encoding="utf-8"))
        answers = derive_answers(ns, server, replies)
    source = {
        "repository": "AI-in-Health/MedMisBench",
        "notebook": "medmisbench_no_harness_eval.ipynb",
        "commit": commit,
    }
    for name, payload in (("prompts", prompts), ("requests", requests), ("answers", answers)):
        (HERE / f"{name}.json").write_text(
            json.dumps({"source": source, name: payload}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
        )
    print(
        f"prompts for {len(prompts)} rows, {sum(len(v['requests']) for v in requests.values())} requests, "
        f"{len(answers)} answers"
    )


if __name__ == "__main__":
    main(sys.argv)
