"""A loopback fake of the three batch APIs (OpenAI Files + Batches, Anthropic Message Batches, Gemini batch mode).

Why a fake on a real socket: what matters in a batch run (the write-ahead journal, finding a batch after
a kill, never submitting a key twice) only shows when a real SDK talks to a server that keeps state across
processes. ``FakeBatchServer`` extends ``FakeOpenAIServer`` (so the same server also answers synchronous
calls, for the synchronous fallback and for comparing the two paths): every request line of a batch is
answered by the same *policy* as a synchronous call, when the batch is created.

What it models:

- uploads (multipart ``POST /v1/files``), file listing and content; batch create, retrieve, list (newest
  first) and cancel for each wire; ``results_url`` for Anthropic and inline responses for Gemini;
- status transitions on each status request (``steps`` polls until the batch ends);
- per-request outcomes: the policy's reply (a 200 answer, or an HTTP error that becomes an errored line),
  and ``expire(received)`` for requests the batch does not reach before its window closes;
- limits: a batch over ``limits[wire]`` (requests, bytes) is refused with HTTP 400;
- ``hold``: one stage at which the server stops answering (``<wire>.upload``, ``.upload.after``,
  ``.create``, ``.create.after``, ``.poll``, ``.download``), setting ``held`` so a test can kill the
  client right there; ``.after`` stages have done their work before holding, the others have not;
- ``fail_after_create``: wires whose next create is performed and then answered with HTTP 500 (a
  response lost on the way back), so the client cannot know the batch exists unless it looks;
- ``submitted``: how many times each request (by content, ``request_key``) was put in a created batch,
  the count the "never paid twice" tests assert on.

One module a wire (``openai_batches``, ``anthropic_batches``, ``gemini_batches``) over what they share
(``core``); ``FakeBatchServer`` is all three on one server, as tests import it from here.
"""

from __future__ import annotations

from tests.fakes.batch_server.anthropic_batches import ANTHROPIC_ERRORS, AnthropicBatches
from tests.fakes.batch_server.core import LIMITS, BatchServerBase, FakeBatch, Line
from tests.fakes.batch_server.gemini_batches import GEMINI_STATES, GeminiBatches
from tests.fakes.batch_server.openai_batches import OpenAIBatches

__all__ = [
    "ANTHROPIC_ERRORS",
    "GEMINI_STATES",
    "LIMITS",
    "BatchServerBase",
    "FakeBatch",
    "FakeBatchServer",
    "Line",
]


class FakeBatchServer(GeminiBatches, OpenAIBatches, AnthropicBatches):
    """``FakeOpenAIServer`` plus the batch endpoints of OpenAI, Anthropic and Gemini (see the module docstring).

    Gemini's routes are looked at first: its batches live under ``/v1/batches`` too.
    """
