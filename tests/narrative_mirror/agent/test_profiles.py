import pytest

from narrative_mirror.agent.profiles import DEFAULT_PROFILE, Profile, get_profile, profiles


def test_profile_budgets_and_thresholds_are_the_designed_ones():
    table = {
        name: (
            p.max_rounds,
            p.first_search,
            p.max_evidence_fetches,
            p.max_calls,
            p.rewrite_candidates,
            p.min_top5_relevance,
            p.min_must_have_hits,
            p.arc_blocks,
        )
        for name, p in profiles().items()
    }
    assert table == {
        "fast": (1, 8, 4, 8, 2, 0.60, 1, 4),
        "balanced": (2, 16, 8, 16, 4, 0.75, 2, 12),
        "deep": (3, 24, 16, 28, 7, 0.85, 2, 16),
    }
    assert DEFAULT_PROFILE == "balanced"


def test_get_profile_by_name_passes_custom_profiles_and_rejects_unknown_names():
    assert get_profile("deep") is profiles()["deep"]
    custom = Profile("tiny", 1, 2, 1, 3, 0, 0.1, 0)
    assert get_profile(custom) is custom
    assert custom.arc_blocks == 1  # a story pulls as many blocks as an answer pulls messages, unless told
    with pytest.raises(ValueError, match=r"unknown profile 'quick'.*balanced.*deep.*fast"):
        get_profile("quick")


@pytest.mark.parametrize(
    "fields, message",
    [
        ((0, 8, 4, 8, 2, 0.6, 1), "max_rounds must be >= 1"),
        ((1, 8, 4, 0, 2, 0.6, 1), "max_calls must be >= 1"),
        ((1, 8, 4, 8, -1, 0.6, 1), "rewrite_candidates"),
        ((1, 8, 4, 8, 2, 1.5, 1), r"min_top5_relevance must be in \[0, 1\]"),
    ],
)
def test_invalid_profiles_name_the_field(fields, message):
    with pytest.raises(ValueError, match=message):
        Profile("bad", *fields)


def test_story_blocks_below_one_are_rejected():
    with pytest.raises(ValueError, match="story_blocks must be >= 1"):
        Profile("bad", 1, 8, 4, 8, 2, 0.6, 1, story_blocks=0)
