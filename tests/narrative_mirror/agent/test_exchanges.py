"""The conversation read around the evidence (agent/exchanges.py): what counts as said in other
words (real embedder), and which words name something."""

from __future__ import annotations

from narrative_mirror.agent.exchanges import content_stems, said_in_other_words


def test_a_noun_is_said_in_other_words_only_by_a_word_naming_the_same_thing(embedder):
    beds = ["I'm building two raised beds this Saturday",
            "My neighbour Mr. Okafor has a pile of spare larch boards from his shed repair"]
    assert said_in_other_words("wood", beds, embedder.encode)
    # the same setting is not the same thing: a leaking sink names no plumber, food no wine
    assert not said_in_other_words("plumber", ["The bathroom sink is leaking again, the valve is stuck"], embedder.encode)
    assert not said_in_other_words("wine", ["I'll bring the food and some petrol for the boat"], embedder.encode)
    assert not said_in_other_words("wood", [], embedder.encode)


def test_content_stems_leave_out_the_grammar():
    operation = content_stems("Also dad's hip operation is confirmed for next Tuesday")
    assert {"dad", "hip", "tuesday"} <= operation and not {"is", "for", "also"} & operation
    # a later "update" on a boat shares no word with the operation through "is" and "on"
    assert not content_stems("Wren update: Rory patched the keel on Sunday and the first coat of blue is on") & operation
