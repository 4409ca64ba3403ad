"""YES/NO predictions from label log-probabilities and from answer text."""

from __future__ import annotations

import math

import pytest

from bench_core.healthcontradict.scoring import extract_yes_no, label_probability, predict, token_label


def lp(token: str, p: float) -> dict:
    return {"token": token, "logprob": math.log(p)}


@pytest.mark.parametrize(
    ("token", "label"),
    [("Yes", "yes"), (" YES", "yes"), ("\u2581yes", "yes"), ("\u0120No", "no"), ("no.", "no"), ("**No", "no")],
)
def test_label_tokens(token, label):
    assert token_label(token) == label


@pytest.mark.parametrize("token", ["Y", "Not", "nope", "yes!no", "", None, " Yesterday"])
def test_non_label_tokens(token):
    assert token_label(token) is None


def test_softmax_over_two_label_logits():
    # one token per label: exactly exp(z_yes) / (exp(z_yes) + exp(z_no)), whatever else the list holds
    p_yes, method = label_probability([lp("Yes", 0.6), lp("No", 0.2), lp("The", 0.1)])
    assert method == "logprobs" and p_yes == pytest.approx(0.75)


def test_spellings_of_a_label_are_added():
    p_yes, _ = label_probability([lp(" Yes", 0.3), lp("YES", 0.1), lp(" No", 0.35), lp("no", 0.05), lp("\n", 0.2)])
    assert p_yes == pytest.approx(0.4 / 0.8)


def test_an_unlisted_label_is_bounded_by_the_list():
    # top-3 list without NO: P(no) <= min(listed) = 0.05 and <= 1 - 0.9 = 0.1 -> bound 0.05
    p_yes, method = label_probability([lp("Yes", 0.8), lp("Sure", 0.05), lp("yes", 0.05)])
    assert method == "logprobs_bound" and p_yes == pytest.approx(0.85 / 0.90)
    # a single listed entry: bounded by the uncovered mass
    p_yes, _ = label_probability([lp("No", 0.9)])
    assert p_yes == pytest.approx(0.1 / 1.0)
    assert label_probability([lp("The", 0.5)]) == (None, None)


@pytest.mark.parametrize(
    ("text", "label", "method"),
    [
        ("YES", "yes", "first_word"),
        (" No.", "no", "first_word"),
        ("**Yes**, coffee can help.", "yes", "first_word"),
        ('{"answer": "NO", "reason": "no evidence"}', "no", "json"),
        ("Based on the context, the answer is: no", "no", "answer_is"),
        ("<think>yes or no? Probably yes</think>No", "no", "first_word"),
        ("The evidence does not support it, so no.", "no", "only_mention"),
        ("Not sure; the documents say yes and no.", None, "unparseable"),
        ("Nothing conclusive.", None, "unparseable"),
        ("", None, "unparseable"),
    ],
)
def test_text_answers(text, label, method):
    assert extract_yes_no(text) == (label, method)


def test_local_model_decides_by_the_label_softmax_api_by_its_words():
    position = {"token": "\n", "logprob": -0.1, "top_logprobs": [lp("YES", 0.01), lp("NO", 0.03)]}
    local = predict("\n", [position], source="logits")
    assert (local.label, local.method) == ("no", "logits") and local.p_hat == pytest.approx(0.75)
    answer = [{"token": "Yes", "logprob": -0.2, "top_logprobs": [lp("Yes", 0.6), lp("No", 0.4)]}]
    api = predict("Yes", answer, source="api")
    assert (api.label, api.method) == ("yes", "logprobs") and api.p_yes == pytest.approx(0.6)
    # the answer token is found after leading tokens
    later = [{"token": "**", "logprob": -0.1, "top_logprobs": [lp("**", 0.9)]}, *answer]
    assert predict("**Yes**", later, source="api").p_yes == pytest.approx(0.6)
    text_only = predict("No.", None, source="api")
    assert (text_only.label, text_only.p_yes, text_only.method) == ("no", None, "text")
    unreadable_text = predict("Hmm.", answer, source="api")
    assert (unreadable_text.label, unreadable_text.detail) == ("yes", "text unreadable")
    assert predict("Hmm.", None, source="api").label is None


def test_openai_compatible_responses_carry_their_logprobs():
    from bench_core.kernel.providers.openai_compat import parse_completion

    entry = {"token": "Yes", "logprob": -0.1, "top_logprobs": [{"token": "Yes", "logprob": -0.1}]}
    with_logprobs = {"choices": [{"message": {"content": "Yes"}, "logprobs": {"content": [entry]}}]}
    assert parse_completion(with_logprobs).logprobs == (entry,)
    without = {"choices": [{"message": {"content": "Yes"}, "logprobs": None}]}
    assert parse_completion(without).logprobs is None
