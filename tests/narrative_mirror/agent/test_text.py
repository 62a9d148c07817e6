import pytest

from narrative_mirror.agent.text import stem


@pytest.mark.parametrize(
    "words",
    [
        ("remedies", "remedy"),
        ("hiking", "hike", "hikes"),
        ("operation", "operations", "operated", "operating"),
        ("discussion", "discussed"),
        ("question", "questions"),
        ("nation", "nations"),
        ("Kate's", "Kate"),
    ],
)
def test_forms_of_one_word_share_a_stem(words):
    assert len({stem(w) for w in words}) == 1, {w: stem(w) for w in words}


@pytest.mark.parametrize("a, b", [("run", "ran"), ("mission", "mist"), ("operation", "opera")])
def test_what_the_crude_stem_leaves_apart(a, b):
    assert stem(a) != stem(b)


def test_reasons_show_words_as_written_and_only_the_names_in_the_message():
    from narrative_mirror.agent.text import names_in, stems, written_words

    text = "I went over on my ankle at football last night, we raised the beds"
    assert written_words(text, stems("ankle raised beds")) == ["ankle", "raised", "beds"]
    assert names_in(["Theo", "Mr Okafor"], "Theo", "I went over on my ankle") == ["Theo"]
    assert names_in(["Theo", "Lisbon"], "Ines", "Lisbon half marathon, Sunday the 19th.") == ["Lisbon"]
