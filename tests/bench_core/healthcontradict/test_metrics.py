"""HealthContradict metrics against values worked out by hand (and McNemar against statsmodels).

Eight instances, four topics (two instances each, so NC answers come in pairs). Factual answers:
topic 1 yes, topics 2-4 no. Predictions (c = correct, w = wrong, ? = unreadable):

| inst | gold | NC    | CC    | IC    | CIC   | ICC   | words |
|------|------|-------|-------|-------|-------|-------|-------|
| i0   | yes  | yes c | yes c | no  w | yes c | no  w | 50    |
| i1   | yes  | yes c | no  w | no  w | yes c | no  w | 10    |
| i2   | no   | yes w | no  c | yes w | no  c | no  c | 80    |
| i3   | no   | yes w | yes w | yes w | no  c | no  c | 30    |
| i4   | no   | no  c | no  c | yes w | no  c | no  c | 70    |
| i5   | no   | no  c | no  c | no  c | yes w | no  c | 20    |
| i6   | no   | yes w | no  c | yes w | no  c | no  c | 60    |
| i7   | no   | yes w | yes w | no  c | ?   w | no  c | 40    |

Accuracy: NC 4/8, CC 5/8, IC 2/8, CIC 6/8, ICC 6/8.
Macro-F1 (F1 = 2TP / (2TP + FP + FN)):
  NC  yes 4/8, no 4/8 -> 0.5;  CC yes 2/5, no 8/11 -> 0.563636;  IC yes 0, no 4/10 -> 0.2;
  CIC yes 4/5, no 8/10 -> 0.8 (the unreadable answer is a false negative of "no");  ICC yes 0, no 12/14 -> 3/7.
OR = wrong under CC among wrong under NC {i2, i3, i6, i7}: i3, i7 -> 2/4.
VM = wrong under IC among right under NC {i0, i1, i4, i5}: i0, i1, i4 -> 3/4.
McNemar NC-CC: b = 1 (i1), c = 2 (i2, i6): chi2 = (|1-2|-1)^2/3 = 0, p = 1.
           NC-IC: b = 3, c = 1: chi2 = 1/4;  IC-ICC: b = 0, c = 4: chi2 = 9/4;  CIC-ICC: b = 2, c = 2: chi2 = 1/4.
Agreement NC-CC: same label for i0, i3, i4, i5, i7 -> 5/8.
Switches under CC: to correct i2, i6 (2/8), to incorrect i1 (1/8).
"""

from __future__ import annotations

import pytest
from scipy.stats import chi2
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

from bench_core.healthcontradict.items import HCInstance
from bench_core.healthcontradict.metrics import density, healthcontradict_report, macro_f1, mcnemar, model_metrics
from bench_core.healthcontradict.run import HCPrediction, HCRunData

GOLD = ["yes", "yes", "no", "no", "no", "no", "no", "no"]
TOPIC = [1, 1, 2, 2, 3, 3, 4, 4]
WORDS = [50, 10, 80, 30, 70, 20, 60, 40]
Y, N = "yes", "no"
PREDICTIONS = {
    "NC": [Y, Y, Y, Y, N, N, Y, Y],
    "CC": [Y, N, N, Y, N, N, N, Y],
    "IC": [N, N, Y, Y, Y, N, Y, N],
    "CIC": [Y, Y, N, N, N, Y, N, None],
    "ICC": [N, N, N, N, N, N, N, N],
}
NC_P_HAT = [0.9, 0.9, 0.55, 0.55, 0.97, 0.97, 1.0, 1.0]


def _predictions(model: str = "m") -> list[HCPrediction]:
    out = []
    for template, labels in PREDICTIONS.items():
        for index, label in enumerate(labels):
            p_hat = NC_P_HAT[index] if template == "NC" else 0.75
            out.append(
                HCPrediction(
                    instance_id=f"i{index}",
                    topic_id=TOPIC[index],
                    template=template,
                    model=model,
                    model_name=model,
                    endpoint="http://x/v1",
                    config_hash="h",
                    gold=GOLD[index],
                    label=label,
                    p_yes=None if label is None else (p_hat if label == "yes" else 1 - p_hat),
                    p_hat=None if label is None else p_hat,
                    method="logprobs" if label else "unparseable",
                    correct=label == GOLD[index],
                    context_words=0 if template == "NC" else WORDS[index],
                    truncated=template == "CIC" and index == 2,
                    prompt_tokens=None,
                    response_text="",
                )
            )
    return out


@pytest.fixture(scope="module")
def metrics():
    return model_metrics(_predictions())


def test_accuracy_and_macro_f1_per_template(metrics):
    expected = {
        "NC": (4, 0.5),
        "CC": (5, (2 / 5 + 8 / 11) / 2),
        "IC": (2, 0.2),
        "CIC": (6, 0.8),
        "ICC": (6, 3 / 7),
    }
    for template, (correct, f1) in expected.items():
        block = metrics["templates"][template]
        assert block["n"] == 8 and block["n_correct"] == correct
        assert block["accuracy"] == correct / 8
        assert block["macro_f1"] == pytest.approx(f1)
    assert metrics["templates"]["CIC"]["n_unparseable"] == 1
    assert metrics["templates"]["CIC"]["n_truncated"] == 1
    assert metrics["templates"]["CC"]["f1_yes"] == pytest.approx(0.4)
    assert metrics["templates"]["NC"]["accuracy_ci"] == pytest.approx([0.2152, 0.7848], abs=1e-4)


def test_failure_modes(metrics):
    assert (metrics["or_k"], metrics["or_n"], metrics["or_rate"]) == (2, 4, 0.5)
    assert (metrics["vm_k"], metrics["vm_n"], metrics["vm_rate"]) == (3, 4, 0.75)


@pytest.mark.parametrize(
    ("pair", "b", "c", "statistic"),
    [("NC-CC", 1, 2, 0.0), ("NC-IC", 3, 1, 0.25), ("IC-ICC", 0, 4, 2.25), ("CIC-ICC", 2, 2, 0.25)],
)
def test_mcnemar_by_hand_and_against_statsmodels(metrics, pair, b, c, statistic):
    test = metrics["mcnemar"][pair]
    assert (test["b"], test["c"], test["n"]) == (b, c, 8)
    assert test["chi2"] == pytest.approx(statistic)
    assert test["p_value"] == pytest.approx(chi2.sf(statistic, 1))
    first, second = pair.split("-")
    right = {t: [label == gold for label, gold in zip(PREDICTIONS[t], GOLD, strict=True)] for t in (first, second)}
    both = sum(x and y for x, y in zip(right[first], right[second], strict=True))
    neither = sum(not x and not y for x, y in zip(right[first], right[second], strict=True))
    reference = sm_mcnemar([[both, b], [c, neither]], exact=False, correction=True)
    assert test["chi2"] == pytest.approx(reference.statistic)
    assert test["p_value"] == pytest.approx(reference.pvalue)
    assert len(metrics["mcnemar"]) == 10  # every pair of the five templates


def test_mcnemar_without_discordant_pairs_is_undefined():
    assert mcnemar([True, False], [True, False]) == {"chi2": None, "p_value": None, "b": 0, "c": 0, "n": 2}
    assert mcnemar([True] * 30, [False] * 30)["p_value"] == pytest.approx(chi2.sf(29**2 / 30, 1))


def test_agreement_switches_density_and_quartiles(metrics):
    assert metrics["agreement"]["NC-CC"] == {"rate": 5 / 8, "k": 5, "n": 8}
    assert metrics["agreement"]["CIC-ICC"]["k"] == 4  # i2, i3, i4, i6 agree on no; i7's unreadable answer does not
    assert metrics["switches"]["CC"] == {"n": 8, "to_correct": 0.25, "to_incorrect": 0.125}
    nc = metrics["density"]["NC"]
    assert nc["counts"] == [0, 2, 0, 0, 0, 0, 0, 0, 2, 4]  # 0.55 | 0.9 | 0.97 and 1.0 (the last bin holds 1.0)
    assert nc["density"][9] == pytest.approx(4 / (8 * 0.05))
    assert sum(nc["density"]) * 0.05 == pytest.approx(1.0)
    assert metrics["density"]["CIC"]["n"] == 7  # the unreadable answer has no probability
    quartiles = metrics["by_context_quartile"]["CC"]
    assert [(q["min_words"], q["max_words"], q["n"], q["accuracy"]) for q in quartiles] == [
        (10, 20, 2, 0.5),
        (30, 40, 2, 0.0),
        (50, 60, 2, 1.0),
        (70, 80, 2, 1.0),
    ]
    assert "NC" not in metrics["by_context_quartile"]


def test_macro_f1_matches_scikit_learn_conventions():
    assert macro_f1(["no", "no"], ["no", "no"]) == 1.0  # only the classes that occur are averaged
    assert macro_f1(["yes", "no"], ["no", "no"]) == pytest.approx((0 + 2 / 3) / 2)
    assert macro_f1([], []) is None


def test_density_of_nothing():
    block = density([])
    assert block["n"] == 0 and block["density"] == [None] * 10


def test_report_groups_models_and_counts_failures():
    instances = [
        HCInstance(instance_id=f"i{k}", topic_id=TOPIC[k], query="Q?", query_stance=GOLD[k], doc_a="a", doc_b="b")
        for k in range(8)
    ]
    failures = [
        {"key": {"item": "topic-4", "condition": "NC", "model": "m2", "endpoint": "e"}, "meta": {"label": "m2"}},
        {"key": {"item": "i3", "condition": "CC", "model": "m2", "endpoint": "e"}, "meta": {"label": "m2"}},
    ]
    nc_m2 = [
        p
        for p in _predictions("m2")
        if not (p.template == "NC" and p.topic_id == 4) and not (p.template == "CC" and p.instance_id == "i3")
    ]
    data = HCRunData(instances, _predictions("m") + nc_m2, failures, 0)
    report = healthcontradict_report(data)
    assert report["benchmark"] == "healthcontradict" and set(report["models"]) == {"m", "m2"}
    assert report["n_instances"] == 8 and report["n_topics"] == 4
    m2 = report["models"]["m2"]["templates"]
    assert m2["NC"]["n_failed"] == 2 and m2["NC"]["n"] == 6  # a topic's failed NC call leaves both its instances out
    assert m2["CC"]["n_failed"] == 1
    for model in report["models"].values():
        assert {"templates", "or_rate", "vm_rate", "mcnemar"} <= set(model)
        for block in model["templates"].values():
            assert {"n", "accuracy", "macro_f1"} <= set(block)
        for test in model["mcnemar"].values():
            assert {"chi2", "p_value"} <= set(test)
