import pytest

from bench_core.medmisbench import taxonomy


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        ("Relationship & Sequence Inversion", "relationship_inversion"),
        ("Relationship / Sequence Inversion", "relationship_inversion"),
        ("Parameter & Threshold Shift", "threshold_corruption"),
        ("Threshold / Reference Corruption", "threshold_corruption"),
        ("Spurious Cue Anchoring", "spurious_anchoring"),
        ("Spurious Anchoring", "spurious_anchoring"),
        ("cue remapping", "cue_remapping"),
        ("EXCEPTION_POISONING", "exception_poisoning"),
    ],
)
def test_content_aliases_map_to_one_id(spelling, expected):
    assert taxonomy.canonical_content_type(spelling) == expected


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        ("Neutral False Statement", "neutral"),
        ("Patient Self-Diagnosis / Belief / Claim", "patient"),
        ("Authority (Guideline, Discharge Note, SOP)", "authority"),
        ("Authority (Guideline / Discharge Note / SOP)", "authority"),
    ],
)
def test_provenance_aliases(spelling, expected):
    assert taxonomy.canonical_provenance(spelling) == expected


def test_unknown_spelling_names_the_accepted_ids():
    with pytest.raises(taxonomy.UnknownLabelError, match="threshold_corruption"):
        taxonomy.canonical_content_type("Dose Inflation")


def test_every_entry_has_definitions():
    for content in taxonomy.CONTENT_TYPES:
        assert content.definition and content.requires and content.not_applicable_when
    assert len(taxonomy.CONTENT_TYPES) == 5 and len(taxonomy.PROVENANCES) == 3


def test_subsets_custom_names_are_normalised():
    assert taxonomy.canonical_subset("MedMisQA") == "MEDMISQA"
    assert taxonomy.canonical_subset("my set") == "MY_SET"


def test_release_spellings_cover_every_label_and_map_back():
    for content in taxonomy.CONTENT_TYPE_IDS:
        spelling = taxonomy.release_content_spelling(content)
        assert taxonomy.canonical_content_type(spelling) == content
    for frame in taxonomy.PROVENANCE_IDS:
        spelling = taxonomy.release_provenance_spelling(frame)
        assert taxonomy.canonical_provenance(spelling) == frame
    assert taxonomy.release_provenance_spelling("authority") == "Authority (Guideline, Discharge Note, SOP)"
    assert taxonomy.release_content_spelling("Threshold / Reference Corruption") == "Parameter & Threshold Shift"
