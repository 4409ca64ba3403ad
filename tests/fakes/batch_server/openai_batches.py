"""OpenAI's Files and Batches APIs, faked: upload, create, retrieve, list, cancel, output and error files.

A batch's input is an uploaded JSONL file of ``{custom_id, body}`` rows; when the batch ends its
answers become an output file (200 answers) and an error file (HTTP errors, expired and cancelled
requests), which the client downloads by id.
"""

from __future__ import annotations

import json
import time
from typing import Any

from tests.fakes.batch_server.core import Answer, BatchServerBase, FakeBatch, Handler, page
from tests.fakes.openai_server import _error_body


class OpenAIBatches(BatchServerBase):
    """The ``/v1/files`` and ``/v1/batches`` routes (holds: ``openai.upload``, ``.upload.after``, ``.create``,
    ``.create.after``, ``.poll``, ``.download``)."""

    def _route(self, method: str, route: str, query: dict[str, list[str]]) -> Handler | None:
        if route == "/v1/files" and method == "POST":
            return self._openai_upload
        if route == "/v1/files" and method == "GET":
            return self._openai_files
        if route.startswith("/v1/files/") and route.endswith("/content") and method == "GET":
            return self._openai_content
        if route == "/v1/batches":
            return self._openai_create if method == "POST" else self._openai_list
        if route.startswith("/v1/batches/"):
            return self._openai_cancel if route.endswith("/cancel") else self._openai_get
        return super()._route(method, route, query)

    async def _openai_upload(self, route: str, query: Any, raw: bytes) -> Answer:
        await self._hold("openai.upload")
        fields = _multipart(raw)
        data, filename = fields.get("file", (b"", None))
        file_id = self._new_id("file-")
        self.files[file_id] = {
            "data": data,
            "filename": filename,
            "purpose": fields.get("purpose", (b"", None))[0].decode(),
            "created_at": int(time.time()),
        }
        await self._hold("openai.upload.after")
        return 200, self._file_object(file_id), {}

    def _file_object(self, file_id: str) -> dict[str, Any]:
        f = self.files[file_id]
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(f["data"]),
            "created_at": f["created_at"],
            "filename": f["filename"],
            "purpose": f["purpose"],
            "status": "processed",
        }

    async def _openai_files(self, route: str, query: Any, raw: bytes) -> Answer:
        purpose = (query.get("purpose") or [None])[0]
        data = [self._file_object(i) for i in reversed(self.files) if purpose in (None, self.files[i]["purpose"])]
        return 200, {"object": "list", "data": data, "has_more": False}, {}

    async def _openai_content(self, route: str, query: Any, raw: bytes) -> Answer:
        await self._hold("openai.download")
        file_id = route.split("/")[3]
        if file_id not in self.files:
            return self._error(404, f"no file {file_id}")
        return 200, self.files[file_id]["data"], {}

    async def _openai_create(self, route: str, query: Any, raw: bytes) -> Answer:
        await self._hold("openai.create")
        body = json.loads(raw)
        source = self.files.get(body.get("input_file_id"))
        if source is None:
            return self._error(404, "no such input file")
        rows = [json.loads(line) for line in source["data"].splitlines() if line.strip()]
        refused = self._refuse_over_limit("openai", len(rows), len(source["data"]))
        if refused:
            return refused
        lines = [self._answer(row["custom_id"], row["body"], "openai") for row in rows]
        batch = FakeBatch(
            self._new_id("batch_"),
            "openai",
            time.time(),
            lines,
            tag=(body.get("metadata") or {}).get("medrev_entry"),
            input_file_id=body["input_file_id"],
            metadata=body.get("metadata") or {},
        )
        self._register(batch)
        await self._hold("openai.create.after")
        return self._lost("openai") or (200, self._openai_object(batch), {})

    def _openai_object(self, batch: FakeBatch) -> dict[str, Any]:
        ended = batch.ended(self.steps)
        if batch.cancelled:
            status = "cancelled" if ended else "cancelling"
        elif ended:
            status = "expired" if batch.expired else "completed"
        else:
            status = "validating" if batch.polls == 0 else "in_progress"
        done = len(batch.lines) if ended else len(batch.lines) * batch.polls // max(self.steps, 1)
        failed = sum(line.outcome != "succeeded" for line in batch.lines) if ended else 0
        if ended and batch.output_file_id is None:
            self._openai_outputs(batch)
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": int(batch.created),
            "metadata": batch.metadata,
            "request_counts": {"total": len(batch.lines), "completed": done - failed, "failed": failed},
        }

    def _openai_outputs(self, batch: FakeBatch) -> None:
        output, errors = [], []
        for index, line in enumerate(batch.lines):
            row: dict[str, Any] = {"id": f"batch_req_{index}", "custom_id": line.custom_id}
            if batch.cancelled:
                row |= {"response": None, "error": {"code": "batch_cancelled", "message": "Batch was cancelled."}}
                errors.append(row)
            elif line.outcome == "succeeded":
                row |= {"response": {"status_code": 200, "request_id": "r", "body": line.body}, "error": None}
                output.append(row)
            elif line.outcome == "expired":
                message = "This request could not be executed before the completion window expired."
                row |= {"response": None, "error": {"code": "batch_expired", "message": message}}
                errors.append(row)
            else:
                body = json.loads(_error_body(line.error, line.status))
                row |= {"response": {"status_code": line.status, "request_id": "r", "body": body}, "error": None}
                errors.append(row)
        for rows, name in ((output, "output_file_id"), (errors, "error_file_id")):
            if rows:
                file_id = self._new_id("file-")
                data = "".join(json.dumps(r) + "\n" for r in rows).encode()
                self.files[file_id] = {
                    "data": data,
                    "filename": f"{batch.id}_{name}.jsonl",
                    "purpose": "batch_output",
                    "created_at": int(time.time()),
                }
                setattr(batch, name, file_id)

    async def _openai_get(self, route: str, query: Any, raw: bytes) -> Answer:
        batch = self.batches.get(route.split("/")[3])
        if batch is None:
            return self._error(404, "no such batch")
        await self._poll(batch, "openai.poll")
        return 200, self._openai_object(batch), {}

    async def _openai_list(self, route: str, query: Any, raw: bytes) -> Answer:
        batches, has_more = self._cursor_page("openai", query, "after")
        return 200, page([self._openai_object(b) for b in batches], has_more, object="list"), {}

    async def _openai_cancel(self, route: str, query: Any, raw: bytes) -> Answer:
        batch = self.batches[route.split("/")[3]]
        self._cancel(batch)
        return 200, self._openai_object(batch), {}


def _multipart(raw: bytes) -> dict[str, tuple[bytes, str | None]]:
    """The fields of a multipart/form-data body: name -> (content, filename). The boundary is its first line."""
    first, _, _ = raw.partition(b"\r\n")
    boundary = first.strip()
    fields: dict[str, tuple[bytes, str | None]] = {}
    for part in raw.split(boundary)[1:]:
        if part.startswith(b"--"):
            break
        head, _, content = part.removeprefix(b"\r\n").removesuffix(b"\r\n").partition(b"\r\n\r\n")
        header = head.decode("latin-1")
        name = _param(header, "name")
        if name:
            fields[name] = (content, _param(header, "filename"))
    return fields


def _param(header: str, name: str) -> str | None:
    marker = f'{name}="'
    for piece in header.split(";"):
        piece = piece.strip()
        if piece.startswith(marker):
            return piece[len(marker) : -1]
    return None
