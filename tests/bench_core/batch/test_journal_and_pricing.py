"""The batch journal (durable events, a torn last line, folding) and the price file / usage arithmetic."""

from __future__ import annotations

import datetime as dt

import pytest

from bench_core.kernel.batch_journal import BatchJournal
from bench_core.kernel.pricing import (
    PriceFileError,
    estimate_input_tokens,
    load_prices,
    usage_summary,
)
from bench_core.kernel.providers.base import ChatRequest
from bench_core.kernel.store import ResultKey

EXAMPLE = "bench_core/kernel/providers/prices.example.toml"


def _key(item: str, model: str = "gpt-4.1") -> ResultKey:
    return ResultKey("b", item, "clean", model, "http://h/v1", "cfg")


def test_events_fold_into_entries_and_a_torn_last_line_is_cut_before_the_next_event(tmp_path):
    journal = BatchJournal(tmp_path)
    keys = [_key("a").id, _key("b").id, _key("c").id]
    journal.append("planned", "medrev000000000001", provider="openai", model="gpt-4.1", endpoint="http://h/v1",
                   keys=keys, bytes=10)  # fmt: skip
    journal.append("uploaded", "medrev000000000001", file_id="file-1")
    with journal.path.open("ab") as handle:  # a kill in the middle of writing the next event
        handle.write(b'{"event": "created", "entry": "medrev0000000')
    entry = journal.state().entries["medrev000000000001"]
    assert (entry.phase, entry.file_id, entry.batch_id) == ("uploaded", "file-1", None)
    journal.append("created", "medrev000000000001", batch_id="batch_1")
    journal.append("collected", "medrev000000000001", ok=[0], failed=[], skipped=[],
                   retry=[{"i": 2, "kind": "batch_expired", "status": None, "message": "expired"}])  # fmt: skip
    state = journal.state()  # the cut line is gone: no damaged line before the last
    entry = state.entries["medrev000000000001"]
    assert (entry.batch_id, entry.phase, entry.unhandled()) == ("batch_1", "submitted", [1])
    assert state.attempts() == dict.fromkeys(keys, 1)
    assert state.errors() == {keys[2]: [{"kind": "batch_expired", "status": None, "message": "expired"}]}
    assert state.batch_ok() == {keys[0]}
    journal.append("cancel_requested", None)
    assert journal.state().entries["medrev000000000001"].cancel_requested
    assert journal.path.read_bytes().count(b"\n") == 5


def test_price_file_matching_and_refusals(tmp_path):
    prices = load_prices(EXAMPLE)
    assert prices.as_of == "2025-08"
    assert prices.price("gpt-4.1").batch_input == pytest.approx(1.0)
    assert prices.price("claude-sonnet-4-5-20250929").input == 3.0  # by pattern
    assert prices.price("models/gemini-2.5-flash").output == 2.5  # the bare name
    assert prices.price("gemini-2.5-flash-lite-preview").input == 0.10  # the longest pattern wins
    assert prices.price("unknown-model") is None
    bad = tmp_path / "bad.toml"
    for text, message in [
        ("[models.x]\ninput = 1\n", "field 'models.x.output': missing"),
        ('[models.x]\ninput = "cheap"\noutput = 1\n', "field 'models.x.input': expected a number"),
        ("batch_discount = 2\n[models.x]\ninput = 1\noutput = 1\n", "batch_discount"),
        ("not toml [", "not a TOML price file"),
        ("as_of = 1\n", "no [models"),
    ]:
        bad.write_text(text)
        with pytest.raises(PriceFileError, match=message.replace("[", r"\[")):
            load_prices(bad)


def _record(item: str, usage: dict, provider: str = "openai", model: str = "gpt-4.1") -> dict:
    return {"key": _key(item, model).as_dict(), "status": "ok", "provider": provider, "response": {"usage": usage}}


def test_usage_sync_and_batch_side_by_side():
    prices = load_prices(EXAMPLE)
    records = [
        _record("a", {"prompt_tokens": 1_000_000, "completion_tokens": 100_000}),
        _record("b", {"prompt_tokens": 1_000_000, "completion_tokens": 100_000, "reasoning_tokens": 40_000}),
        _record(
            "c",
            {"prompt_tokens": 500_000, "completion_tokens": 0, "reasoning_tokens": 200_000},
            provider="google",
            model="gemini-2.5-flash",
        ),
        _record("d", {"prompt_tokens": 10, "completion_tokens": 10}, model="no-price"),
        {"key": _key("e").as_dict(), "status": "failed"},
    ]
    usage = usage_summary(records, {_key("b").id, _key("c", "gemini-2.5-flash").id}, prices)
    # a: 1M in at $2 + 0.1M out at $8 = $2.80 sync; b: the same at half price = $1.40 (reasoning is in the output)
    assert usage["sync"]["requests"] == 2 and usage["sync"]["cost_usd"] == pytest.approx(2.80)
    assert usage["sync"]["cost_usd_other_way"] == pytest.approx(1.40)
    # c: Gemini's thinking tokens are billed as output: 0.5M x $0.15 + 0.2M x $1.25 = $0.325
    assert usage["batch"]["cost_usd"] == pytest.approx(1.40 + 0.325)
    assert usage["batch"]["reasoning_tokens"] == 240_000 and usage["batch"]["output_tokens"] == 100_000
    assert usage["total"]["requests"] == 4 and usage["unpriced"] == ["no-price"]
    assert usage["models"]["no-price"]["sync"]["cost_usd"] is None
    assert usage_summary(records, set())["total"]["cost_usd"] is None  # no price file, no cost


def test_input_token_estimate_counts_messages_tools_and_format():
    request = ChatRequest(
        messages=({"role": "system", "content": "x" * 400}, {"role": "user", "content": "y" * 40}),
        response_format={"type": "json_object"},
    )
    assert estimate_input_tokens(request) == 100 + 4 + 10 + 4 + 6  # 22 characters of format: 6 tokens
    assert dt.UTC  # the journal's times are timezone-aware (compared across processes)
