"""What calls cost: a small TOML price file, an estimate before submitting, and the usage providers returned.

Why here and not in a design: every design's calls are the runner's records, with the provider's usage
(``prompt_tokens``, ``completion_tokens`` and, where the provider tells them apart, ``reasoning_tokens``),
so one reading serves them all. A price file names USD per million tokens per model (an exact id, or a
shell-style pattern such as ``claude-sonnet-4*``)::

    as_of = "2025-08-01"              # when the prices were read; printed with every cost
    batch_discount = 0.5              # batch price = discount x price, unless batch_input/batch_output are given

    [models."gpt-4.1"]
    input = 2.00
    output = 8.00

Output tokens are billed with the reasoning tokens they include; Gemini counts its thinking tokens apart
from the answer's (``thoughts_token_count``), so for Google records they are added to the output billed.
The estimate before submitting counts about four characters per token: enough to see the order of
magnitude of a run, not an invoice.
"""

from __future__ import annotations

import fnmatch
import json
import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_core.kernel.providers.base import ChatRequest

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4  # role and separators of each message


class PriceFileError(ValueError):
    """A price file that cannot be read, naming the file and the field at fault."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens, synchronous and through a batch API."""

    input: float
    output: float
    batch_input: float
    batch_output: float

    def cost(self, input_tokens: int, output_tokens: int, *, batch: bool) -> float:
        rate_in, rate_out = (self.batch_input, self.batch_output) if batch else (self.input, self.output)
        return (input_tokens * rate_in + output_tokens * rate_out) / 1_000_000


@dataclass(frozen=True)
class PriceTable:
    """The models of a price file; ``price`` finds a model by exact id, else by the longest matching pattern."""

    models: dict[str, Price]
    source: str
    as_of: str | None = None
    note: str | None = None

    def price(self, model: str) -> Price | None:
        if model in self.models:
            return self.models[model]
        bare = model.rsplit("/", 1)[-1]  # "models/gemini-..." and "org/model" match their bare name too
        if bare in self.models:
            return self.models[bare]
        patterns = sorted((p for p in self.models if any(c in p for c in "*?[")), key=len, reverse=True)
        for pattern in patterns:
            if fnmatch.fnmatchcase(model, pattern) or fnmatch.fnmatchcase(bare, pattern):
                return self.models[pattern]
        return None


def load_prices(path: str | Path) -> PriceTable:
    """Read a price file; ``PriceFileError`` naming the file and field when it is not one."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PriceFileError(f"{path}: no such price file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PriceFileError(f"{path}: not a TOML price file ({exc})") from None
    discount = _number(data.get("batch_discount", 0.5), path, "batch_discount")
    if not 0 < discount <= 1:
        raise PriceFileError(f"{path}: field 'batch_discount': expected a number in (0, 1], found {discount}")
    models = data.get("models")
    if not isinstance(models, dict) or not models:
        raise PriceFileError(f'{path}: no [models."NAME"] table (USD per million input and output tokens)')
    table: dict[str, Price] = {}
    for name, entry in models.items():
        where = f"models.{name}"
        if not isinstance(entry, dict):
            raise PriceFileError(f"{path}: field {where!r}: expected a table with input and output")
        for needed in ("input", "output"):
            if needed not in entry:
                raise PriceFileError(f"{path}: field '{where}.{needed}': missing (USD per million tokens)")
        rate_in = _number(entry["input"], path, f"{where}.input")
        rate_out = _number(entry["output"], path, f"{where}.output")
        table[name] = Price(
            rate_in,
            rate_out,
            _number(entry.get("batch_input", rate_in * discount), path, f"{where}.batch_input"),
            _number(entry.get("batch_output", rate_out * discount), path, f"{where}.batch_output"),
        )
    as_of = data.get("as_of")
    note = data.get("note")
    return PriceTable(table, str(path), str(as_of) if as_of is not None else None, str(note) if note else None)


def _number(value: Any, path: Path, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise PriceFileError(f"{path}: field {field!r}: expected a number >= 0, found {value!r}")
    return float(value)


# -- estimates before submitting --------------------------------------------------------------


def estimate_tokens(text: str) -> int:
    """About how many tokens ``text`` is (four characters a token)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimate_input_tokens(request: ChatRequest) -> int:
    """About how many input tokens a request is: its messages, tool definitions and response format."""
    total = 0
    for message in request.messages:
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content or "", ensure_ascii=False)
        total += estimate_tokens(text) + MESSAGE_OVERHEAD_TOKENS
        if message.get("tool_calls"):
            total += estimate_tokens(json.dumps(message["tool_calls"], ensure_ascii=False))
    if request.tools:
        total += estimate_tokens(json.dumps(request.tools, ensure_ascii=False))
    if request.response_format:
        total += estimate_tokens(json.dumps(request.response_format, ensure_ascii=False))
    return total


# -- usage the providers returned --------------------------------------------------------------

VIAS = ("sync", "batch")


def billed_output(provider: str | None, usage: Mapping[str, Any]) -> int:
    """Output tokens billed: the answer's, plus Gemini's thinking tokens (which it counts apart)."""
    output = int(usage.get("completion_tokens") or 0)
    if provider == "google":
        output += int(usage.get("reasoning_tokens") or 0)
    return output


def usage_summary(
    records: Iterable[Mapping[str, Any]], batch_keys: set[str], prices: PriceTable | None = None
) -> dict[str, Any]:
    """Usage and cost of the successful calls of a run, synchronous and batch side by side.

    ``records`` are the stored results (one per key: ``ResultStore.latest``), ``batch_keys`` the key ids
    whose result came from a batch (``JournalState.batch_ok``). Each side has requests, input, output and
    reasoning tokens, the cost at the rate paid and the cost the same calls would have had the other way
    (None where a model has no price); ``unpriced`` names models the price file does not list.
    """
    from bench_core.kernel.store import OK, ResultKey

    blocks = {via: _block() for via in VIAS}
    unpriced: set[str] = set()
    by_model: dict[str, dict[str, dict[str, Any]]] = {}
    for record in records:
        if record.get("status") != OK:
            continue
        usage = (record.get("response") or {}).get("usage") or {}
        key = ResultKey.from_dict(record["key"])
        via = "batch" if key.id in batch_keys else "sync"
        input_tokens = int(usage.get("prompt_tokens") or 0)
        output_tokens = billed_output(record.get("provider"), usage)
        model = key.model
        for block in (blocks[via], by_model.setdefault(model, {v: _block() for v in VIAS})[via]):
            block["requests"] += 1
            block["input_tokens"] += input_tokens
            block["output_tokens"] += int(usage.get("completion_tokens") or 0)
            block["reasoning_tokens"] += int(usage.get("reasoning_tokens") or 0)
            if not usage:
                block["without_usage"] += 1
        if prices is None:
            continue
        price = prices.price(model)
        if price is None:
            unpriced.add(model)
            continue
        paid = price.cost(input_tokens, output_tokens, batch=via == "batch")
        other = price.cost(input_tokens, output_tokens, batch=via != "batch")
        for block in (blocks[via], by_model[model][via]):
            block["cost_usd"] += paid
            block["cost_usd_other_way"] += other
    total = _block()
    for block in blocks.values():
        for name in total:
            total[name] += block[name]
    out = {
        **blocks,
        "total": total,
        "models": by_model,
        "prices": None if prices is None else {"file": prices.source, "as_of": prices.as_of},
        "unpriced": sorted(unpriced),
    }
    for model, block in _blocks(out):
        if prices is None or model in unpriced:
            block["cost_usd"] = block["cost_usd_other_way"] = None
        else:  # totals leave out the models without a price (named under ``unpriced``)
            block["cost_usd"] = round(block["cost_usd"], 6)
            block["cost_usd_other_way"] = round(block["cost_usd_other_way"], 6)
    return out


def _block() -> dict[str, Any]:
    return {
        "requests": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "reasoning_tokens": 0,
        "without_usage": 0,
        "cost_usd": 0.0,
        "cost_usd_other_way": 0.0,
    }


def _blocks(summary: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    found: list[tuple[str | None, dict[str, Any]]] = [(None, summary[via]) for via in VIAS]
    found.append((None, summary["total"]))
    for model, sides in summary["models"].items():
        found += [(model, sides[via]) for via in VIAS]
    return found


def run_usage(run_dir: str | Path, prices: PriceTable | None = None) -> dict[str, Any]:
    """``usage_summary`` of a run directory: its stored results, and its batch journal for which came by batch."""
    from bench_core.kernel.batch_journal import BatchJournal
    from bench_core.kernel.store import ResultStore

    store = ResultStore(run_dir)
    journal = BatchJournal(run_dir)
    batch_keys = journal.state().batch_ok() if journal.exists() else set()
    return usage_summary(store.latest().values(), batch_keys, prices)
