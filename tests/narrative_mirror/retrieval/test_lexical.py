import numpy as np
import pytest

from narrative_mirror.retrieval.lexical import BM25Index, light_stem, tokenize, top_positive


@pytest.mark.parametrize(
    ("word", "stem"),
    [("hikes", "hik"), ("hiking", "hik"), ("hiked", "hik"), ("hike", "hik"), ("parties", "party"),
     ("classes", "class"), ("watches", "watch"), ("status", "status"), ("ski", "ski"), ("2023", "2023")],
)
def test_light_stem(word, stem):
    assert light_stem(word) == stem


def test_tokenize_drops_stopwords_possessives_and_single_letters():
    assert tokenize("Kate's hobbies: I love hiking, it’s great! What did you do in 2023?") == [
        "kat", "hobby", "lov", "hik", "great", "2023"]
    assert tokenize("Hiking trips", stem=False) == ["hiking", "trips"]


TEXTS = [
    "Emi: I love hiking in the mountains",  # 0
    "elise: We went skiing in Colorado",  # 1
    "Emi: The weather is nice today",  # 2
    "elise: Hiking and skiing are my favourite things",  # 3
]


def test_bm25_ranks_matching_messages_only():
    index = BM25Index(TEXTS)
    hits = index.search("Where does Kate go hiking?")
    assert [row for row, _ in hits] == [0, 3]  # the shorter message wins on length normalization
    assert all(score > 0 for _, score in hits)
    # both terms in row 3; rows 0 and 1 tie on one term of equal idf and length: lower row first
    assert [row for row, _ in index.search("skiing and hikes")] == [3, 0, 1]
    assert index.search("what is the", k=5) == []  # only stopwords
    assert index.search("zebra") == []


def test_bm25_scores_cover_every_text_and_k_limits():
    index = BM25Index(TEXTS)
    scores = index.scores("skiing")
    assert scores.shape == (4,)
    assert scores[0] == 0 and scores[2] == 0 and scores[1] > 0 and scores[3] > 0
    assert len(index.search("skiing hiking", k=1)) == 1


def test_bm25_empty_corpus():
    index = BM25Index([])
    assert index.search("anything") == []
    assert index.scores("anything").shape == (0,)


def test_top_positive_orders_by_score_then_row():
    assert top_positive(np.array([0.0, 2.0, 1.0, 2.0])) == [(1, 2.0), (3, 2.0), (2, 1.0)]
    assert top_positive(np.array([0.0, 2.0, 1.0, 2.0]), k=2) == [(1, 2.0), (3, 2.0)]
