import bm25s
import numpy as np
import pytest

from narrative_mirror.retrieval.lexical import (
    LUCENE_STOPWORDS,
    BM25Index,
    Vocabulary,
    group_sum,
    light_stem,
    positive_order,
    tokenize,
    top_positive,
    widen,
)


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("hikes", "hik"),
        ("hiking", "hik"),
        ("hiked", "hik"),
        ("hike", "hik"),
        ("parties", "party"),
        ("classes", "class"),
        ("watches", "watch"),
        ("status", "status"),
        ("ski", "ski"),
        ("2023", "2023"),
    ],
)
def test_light_stem(word, stem):
    assert light_stem(word) == stem


def test_lucene_stopwords_are_those_of_bm25s():
    from bm25s.stopwords import STOPWORDS_EN

    assert frozenset(STOPWORDS_EN) == LUCENE_STOPWORDS


def test_the_search_engine_loads_without_bm25s():
    """bm25s imports numba (~0.3 s of CPU): no process that searches pays it for 33 words."""
    import subprocess
    import sys

    code = (
        "import sys\nimport narrative_mirror.retrieval.engine\n"
        "print(sorted(m for m in ('bm25s', 'numba') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_tokenize_drops_stopwords_possessives_and_single_letters():
    assert tokenize("Kate's hobbies: I love hiking, it’s great! What did you do in 2023?") == [
        "kat",
        "hobby",
        "lov",
        "hik",
        "great",
        "2023",
    ]
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


def bm25s_scores(texts, queries, stem=True):
    """What the index was: bm25s over ``tokenize`` of each text, queried with the known terms."""
    corpus = [tokenize(t, stem) for t in texts]
    vocab = {w for doc in corpus for w in doc}
    model = bm25s.BM25(k1=1.5, b=0.75)
    if texts and vocab:
        model.index(corpus, show_progress=False)
    out = []
    for query in queries:
        terms = [t for t in tokenize(query, stem) if t in vocab]
        out.append(np.asarray(model.get_scores(terms), dtype=np.float32) if terms else np.zeros(len(texts), np.float32))
    return out


def same_bits(a, b):
    return a.dtype == b.dtype == np.float32 and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_scores_equal_bm25s_bit_for_bit_also_for_joined_texts(realtalk_dir):
    from narrative_mirror.chats import load_chat
    from narrative_mirror.embedding import message_texts
    from narrative_mirror.gold import gold_qa_frame

    chat = load_chat(realtalk_dir / "Chat_1_Emi_Elise.json")
    texts = message_texts(chat.messages.sort("position"))
    queries = gold_qa_frame(chat)["question"].to_list()[:60] + ["ski ski hiking", "the of what", "Kate’s café"]
    windows = [[j for j in range(max(0, i - 3), min(len(texts), i + 4))] for i in range(len(texts))]
    groups = [list(range(i, min(i + 7, len(texts)))) + [i] for i in range(0, len(texts), 7)]  # a row twice
    labels = [f"label {i} kate hiking" for i in range(len(groups))]
    for stem in (True, False):
        vocabulary = Vocabulary(stem)
        counts = vocabulary.count(texts)
        label_counts = vocabulary.count(labels)
        counts = widen(counts, len(vocabulary))
        indexes = {
            "messages": (BM25Index.from_counts(vocabulary, counts), texts),
            "windows": (
                BM25Index.from_counts(vocabulary, group_sum(windows, len(texts)) @ counts),
                [" ".join(texts[j] for j in w) for w in windows],
            ),
            "groups": (
                BM25Index.from_counts(vocabulary, label_counts + group_sum(groups, len(texts)) @ counts),
                [" ".join([label] + [texts[j] for j in g]) for label, g in zip(labels, groups)],
            ),
        }
        for name, (index, docs) in indexes.items():
            expected = bm25s_scores(docs, queries, stem)
            alone = BM25Index(docs, stem=stem)
            for query, want in zip(queries, expected):
                assert same_bits(index.scores(query), want), (name, stem, query)
                assert same_bits(alone.scores(query), want), (name, stem, query)


def test_count_reads_odd_texts_like_tokenize():
    texts = ["Ski\x00hike", "", "ÉCOLE d’été’s KATE'S", "x", "a\u0130b ski"]
    vocabulary = Vocabulary()
    counts = vocabulary.count(texts).toarray()
    token = {t: i for t, i in vocabulary.ids.items()}
    for row, text in enumerate(texts):
        expected = np.zeros(len(token), dtype=np.int64)
        for t in tokenize(text):
            expected[token[t]] += 1
        assert counts[row].tolist() == expected.tolist(), text
    assert Vocabulary().count([]).shape == (0, 0)


def test_positive_order_matches_a_two_key_sort():
    rng = np.random.default_rng(3)
    scores = np.round(rng.random(5000), 2).astype(np.float32) * (rng.random(5000) > 0.3)
    rows, values = positive_order(scores)
    hits = np.flatnonzero(scores > 0)
    assert rows.tolist() == hits[np.lexsort((hits, -scores[hits]))].tolist()
    assert values.tolist() == scores[rows].tolist()
