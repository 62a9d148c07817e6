"""Retriever end to end: a hand-made chat in a real LanceDB on tmp_path, the real MiniLM embedder."""

import copy
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import polars as pl
import pytest

from narrative_mirror import schema, settings
from narrative_mirror.embedding import message_search_text
from narrative_mirror.index_rows import build_rows
from narrative_mirror.index_store import IndexStore
from narrative_mirror.retrieval.config import VARIANTS
from narrative_mirror.retrieval.engine import Retriever
from narrative_mirror.retrieval.rerank import HybridScoreReranker

CHAT = "tiny_chat"
# (local_id, session, speaker, time, text); blocks: B0 = D1:1-2, B1 = D1:3-5, B2 = D1:6,
# B3 = D2:1-2, B4 = D2:3-4; thread T0 = the puppy story (B1, B3).
MESSAGES = [
    ("D1:1", 1, "Ann", "2024-01-05 10:00", "Hi! I'm Annie."),
    ("D1:2", 1, "Ben", "2024-01-05 10:01", "Nice to meet you, Annie!"),
    ("D1:3", 1, "Ann", "2024-01-05 10:02", "I adopted a puppy named Biscuit yesterday."),
    ("D1:4", 1, "Ben", "2024-01-05 10:03", "A puppy! What breed is Biscuit?"),
    ("D1:5", 1, "Ann", "2024-01-05 10:04", "Biscuit is a golden retriever."),
    ("D1:6", 1, "Ben", "2024-01-05 10:05", "I am training for the Boston marathon."),
    ("D2:1", 2, "Ann", "2024-02-10 09:00", "Biscuit chewed my favourite shoes today."),
    ("D2:2", 2, "Ben", "2024-02-10 09:01", "Ha, puppies do that. My marathon training is going well."),
    ("D2:3", 2, "Ann", "2024-02-12 18:00", "I started pottery classes tonight."),
    ("D2:4", 2, "Ben", "2024-02-12 18:01", "Pottery sounds relaxing."),
]
BLOCKS = [["D1:1", "D1:2"], ["D1:3", "D1:4", "D1:5"], ["D1:6"], ["D2:1", "D2:2"], ["D2:3", "D2:4"]]


def frames():
    n = len(MESSAGES)
    messages = pl.DataFrame(
        {
            "message_id": [f"{CHAT}/{m[0]}" for m in MESSAGES],
            "chat_file": [CHAT] * n,
            "local_id": [m[0] for m in MESSAGES],
            "position": list(range(n)),
            "session": [m[1] for m in MESSAGES],
            "speaker": [m[2] for m in MESSAGES],
            "text": [m[4] for m in MESSAGES],
            "timestamp": [datetime.fromisoformat(m[3]) for m in MESSAGES],
            "image_urls": [[] for _ in range(n)],
            "image_caption": [""] * n,
        },
        schema=schema.MESSAGES,
    )
    row = {m[0]: i for i, m in enumerate(MESSAGES)}
    blocks = pl.DataFrame(
        {
            "block_id": [f"{CHAT}/S{MESSAGES[row[b[0]]][1]}/B{i}" for i, b in enumerate(BLOCKS)],
            "chat_file": [CHAT] * len(BLOCKS),
            "session": [MESSAGES[row[b[0]]][1] for b in BLOCKS],
            "block_index": list(range(len(BLOCKS))),
            "first_position": [row[b[0]] for b in BLOCKS],
            "last_position": [row[b[-1]] for b in BLOCKS],
            "message_ids": BLOCKS,
            "start_time": [datetime.fromisoformat(MESSAGES[row[b[0]]][3]) for b in BLOCKS],
            "end_time": [datetime.fromisoformat(MESSAGES[row[b[-1]]][3]) for b in BLOCKS],
            "speakers": [["Ann", "Ben"]] * len(BLOCKS),
            "keywords": [[]] * len(BLOCKS),
            "label": [""] * len(BLOCKS),
            "summary": [""] * len(BLOCKS),
        },
        schema=schema.BLOCKS,
    )
    block_of = {lid: blocks["block_id"][i] for i, b in enumerate(BLOCKS) for lid in b}
    signals = pl.DataFrame(
        {
            "message_id": messages["message_id"],
            "chat_file": messages["chat_file"],
            "local_id": messages["local_id"],
            "block_id": [block_of[m[0]] for m in MESSAGES],
            "entities": [["biscuit"] if "Biscuit" in m[4] else [] for m in MESSAGES],
            "temporal": [[] for _ in range(n)],
            "is_plan": [False] * n,
            "is_question": [False] * n,
            "sentiment": [0.0] * n,
            "emotion": [""] * n,
            "has_image": [False] * n,
            "ref_block_ids": [[] for _ in range(n)],
            "refs": [0.0] * n,
            "importance_tier": [1] * n,
        },
        schema=schema.MESSAGE_SIGNALS,
    )
    threads = pl.DataFrame(
        {
            "thread_id": [f"{CHAT}/T0"],
            "chat_file": [CHAT],
            "block_ids": [[blocks["block_id"][1], blocks["block_id"][3]]],
            "start_time": [datetime(2024, 1, 5, 10, 2)],
            "end_time": [datetime(2024, 2, 10, 9, 1)],
            "participants": [["Ann", "Ben"]],
            "entities": [["biscuit"]],
            "title": ["Biscuit the puppy"],
            "summary": [""],
        },
        schema=schema.THREADS,
    )
    return messages, blocks, signals, threads


@pytest.fixture(scope="module")
def store(tmp_path_factory, embedder):
    messages, blocks, signals, threads = frames()
    vectors = embedder.encode([message_search_text(s, t) for s, t in zip(messages["speaker"], messages["text"])])
    embeddings = pl.DataFrame(
        {
            "message_id": messages["message_id"],
            "chat_file": messages["chat_file"],
            "local_id": messages["local_id"],
            "vector": list(vectors),
        },
        schema=schema.MESSAGE_EMBEDDINGS,
    )
    index = IndexStore(str(tmp_path_factory.mktemp("engine") / "lancedb"))
    for table, rows in build_rows(messages, embeddings, signals=signals, blocks=blocks, threads=threads).items():
        index.replace_partition(table, CHAT, rows)
    return index


def config(**sections):
    cfg = copy.deepcopy(settings.load_config("retrieval"))
    for dotted, value in sections.items():
        section, key = dotted.split("__")
        cfg[section][key] = value
    return cfg


@pytest.fixture(scope="module")
def retriever(store, embedder):
    return Retriever(store, embedder, settings.load_config("retrieval"))


def ids(result):
    return [h.local_id for h in result.hits]


def test_bm25_variant_exact_ranking(retriever):
    # D2:3 holds "pottery" and "classes", D2:4 only "pottery"
    assert ids(retriever.search(CHAT, "Who takes pottery classes?", k=5, variant="bm25")) == ["D2:3", "D2:4"]
    # one term: the shorter message (D2:4, 4 tokens against 5) first
    assert ids(retriever.search(CHAT, "pottery", k=5, variant="bm25")) == ["D2:4", "D2:3"]
    assert ids(retriever.search(CHAT, "zebra?", k=5, variant="bm25")) == []


def test_lancedb_full_text_backend(store, embedder):
    native = Retriever(store, embedder, config(lexical__backend="lancedb"))
    assert ids(native.search(CHAT, "Who takes pottery classes?", k=5, variant="bm25")) == ["D2:3", "D2:4"]
    assert ids(native.search(CHAT, "puppies", k=5, variant="bm25")) == ["D1:4", "D1:3", "D2:2"]  # stemmed
    with pytest.raises(ValueError, match="retrieval.toml: lexical.backend: 'solr' not in"):
        Retriever(store, embedder, config(lexical__backend="solr"))


def test_dense_variant_finds_the_meaning(retriever):
    result = retriever.search(CHAT, "What kind of dog does Ann have?", k=3, variant="dense")
    assert {"D1:3", "D1:5"} & set(ids(result)[:2])
    assert len(result.hits) == 3 and result.hits[0].sources == ["dense"]


def test_hybrid_trace_hits_and_query_info(retriever):
    result = retriever.search(CHAT, "What breed is Annie's puppy Biscuit?", k=3, variant="hybrid", candidates=6)
    assert "D1:5" in ids(result)  # the answer
    assert result.hits[0].speaker == "Ann" and "speaker" in result.hits[0].sources
    assert len(result.trace.candidates) == 6  # the whole pool, ranked
    assert [lid for lid, _ in result.trace.reranked[:3]] == ids(result)
    scores = [s for _, s in result.trace.candidates]
    assert scores == sorted(scores, reverse=True)
    assert result.query_info["persons"] == ["Ann"]  # "Annie" is Ann's alias in this chat
    assert result.query_info["entities"] == ["biscuit"]
    assert result.query_info["question_type"] == "what"
    assert result.query_info["variant"] == "hybrid"
    top = result.hits[0]
    assert top.message_id == f"{CHAT}/{top.local_id}" and top.block_id == f"{CHAT}/S1/B1"
    assert top.reasons["retrieval"] == top.score
    assert "bm25" in top.sources and "dense" in top.sources
    assert set(result.timings_ms) == {"parse", "encode", "first_stage", "expand", "rerank", "total"}


def test_person_names_are_stripped_from_the_search_query(store, embedder):
    stripping = Retriever(store, embedder, config(hybrid__strip_person_names=True))
    result = stripping.search(CHAT, "What is Annie's dog called?", variant="hybrid")
    assert result.query_info["search_query"] == "What is dog called?"
    keeping = Retriever(store, embedder, config(hybrid__strip_person_names=False))
    assert (
        keeping.search(CHAT, "What is Annie's dog called?").query_info["search_query"] == "What is Annie's dog called?"
    )


def test_speaker_and_time_lists(store, embedder):
    on = Retriever(store, embedder, config(hybrid__w_speaker=1.0, hybrid__w_time=1.0, hybrid__time_slack_hours=0))
    result = on.search(CHAT, "What did Ben say on 12 Feb 2024?", k=10, variant="hybrid")
    # the time list holds D2:3 and D2:4 (12 Feb); the speaker list Ben's messages: D2:4 has both
    assert ids(result)[0] == "D2:4"
    assert "time" in result.hits[0].sources and "speaker" in result.hits[0].sources
    assert result.query_info["windows"][0]["expression"] == "12 Feb 2024"


def test_expand_adds_neighbours(store, embedder):
    r = Retriever(
        store,
        embedder,
        config(expand__seeds=1, expand__before=1, expand__after=1, expand__decay=0.9, expand__block_decay=0.0),
    )
    plain = r.search(CHAT, "Who takes pottery classes?", k=3, variant="bm25")
    expanded = r.search(CHAT, "Who takes pottery classes?", k=10, variant="hybrid_expand")
    top = ids(expanded)[0]
    neighbours = [h for h in expanded.hits if h.sources and h.sources[-1] == "neighbour"]
    assert top in ids(plain)
    assert neighbours, "the top hit's neighbours come in by expansion"
    top_pos = expanded.hits[0].position
    assert all(abs(h.position - top_pos) == 1 for h in neighbours)


def test_rerank_variant_records_reasons(retriever, store, embedder):
    result = retriever.search(CHAT, "marathon training", k=4, variant="hybrid_expand_rerank")
    assert result.query_info["reranker"] == "hybrid_score"
    assert {"kw", "recency", "refs", "tier_weight"} <= set(result.hits[0].reasons)
    custom = retriever.search(
        CHAT,
        "marathon training",
        k=4,
        variant="hybrid_expand_rerank",
        reranker=HybridScoreReranker(w_rec=0.0, w_refs=0.0, w_tier=0.0),
    )
    assert [h.score for h in custom.hits] == sorted((h.score for h in custom.hits), reverse=True)
    assert custom.hits[0].reasons["kw"] == 1.0


def test_dual_path_reports_mode_and_active_blocks(retriever):
    result = retriever.search(CHAT, "Biscuit the puppy", k=5, variant="dual_path")
    assert result.query_info["tree"]["mode"] in ("exploit", "explore")
    assert f"{CHAT}/S1/B1" in result.query_info["tree"]["active_blocks"]
    assert any(s in ("local", "global") for h in result.hits for s in h.sources)


def test_block_search_returns_whole_blocks_with_their_thread_and_member_scores(retriever):
    found = retriever.search_blocks(CHAT, "What happened with Biscuit the puppy?", k=3)
    assert [b.block_id for b in found][:2] == [f"{CHAT}/S1/B1", f"{CHAT}/S2/B3"]  # the puppy story
    assert len(found) == 3 and found[0].score >= found[1].score >= found[2].score
    first = found[0]
    assert [h.local_id for h in first.members] == retriever.block_ids(CHAT, first.block_id) == ["D1:3", "D1:4", "D1:5"]
    assert first.members[2].text == "Biscuit is a golden retriever." and first.members[2].block_id == first.block_id
    assert first.thread_id == f"{CHAT}/T0" and found[1].thread_id == f"{CHAT}/T0"
    assert max(h.score for b in found for h in b.members) == 1.0  # the search's best message
    assert set(first.sources) == {"block_bm25", "block_vector", "best_message", "top3_messages"}
    assert [b.block_id for b in retriever.search_blocks(CHAT, "pottery", k=1)] == [f"{CHAT}/S2/B4"]
    assert [b.block_id for b in retriever.search_blocks(CHAT, "pottery", k=1, variant="hybrid")] == [f"{CHAT}/S2/B4"]
    with pytest.raises(ValueError, match="k must be >= 1"):
        retriever.search_blocks(CHAT, "pottery", k=0)


def test_every_variant_runs(retriever):
    for variant in VARIANTS:
        result = retriever.search(CHAT, "puppy", k=2, variant=variant)
        assert 1 <= len(result.hits) <= 2, variant


def test_lookups_block_ids_and_errors(retriever):
    assert retriever.chat_files() == [CHAT]
    assert retriever.block_ids(CHAT, f"{CHAT}/S1/B1") == ["D1:3", "D1:4", "D1:5"]
    hits = retriever.messages(CHAT, ["D2:4", "D1:1"])
    assert [(h.local_id, h.speaker, h.text) for h in hits] == [
        ("D2:4", "Ben", "Pottery sounds relaxing."),
        ("D1:1", "Ann", "Hi! I'm Annie."),
    ]
    with pytest.raises(ValueError, match=r"unknown chat_file 'nope'; indexed chat files: \['tiny_chat'\]"):
        retriever.search("nope", "anything")
    with pytest.raises(ValueError, match="unknown variant 'magic'"):
        retriever.search(CHAT, "anything", variant="magic")
    with pytest.raises(ValueError, match=r"unknown local ids \['D9:9'\]"):
        retriever.messages(CHAT, ["D9:9"])
    with pytest.raises(ValueError, match="unknown block_id"):
        retriever.block_ids(CHAT, "tiny_chat/S9/B9")
    with pytest.raises(ValueError, match="empty question"):
        retriever.search(CHAT, "  ")


def test_bad_config_is_named(store, embedder):
    with pytest.raises(ValueError, match="retrieval.toml: default_variant: 'best' not in"):
        Retriever(store, embedder, {**settings.load_config("retrieval"), "default_variant": "best"})
    broken = settings.load_config("retrieval")
    del broken["hybrid"]["w_bm25"]
    with pytest.raises(ValueError, match=r"retrieval\.toml: hybrid\.w_bm25: missing"):
        Retriever(store, embedder, broken)


def test_cache_is_refreshed_by_invalidate(store, embedder, retriever):
    assert retriever.chat(CHAT) is retriever.chat(CHAT)
    first = retriever.chat(CHAT)
    retriever.invalidate(CHAT)
    assert retriever.chat(CHAT) is not first


def test_concurrent_queries_load_a_cold_chat_once(store, embedder, monkeypatch):
    r = Retriever(store, embedder, settings.load_config("retrieval"))
    r.cache.REFRESH_SECONDS = 0.0  # every call also checks the store's versions
    loads = []
    read_messages = store.messages_for
    monkeypatch.setattr(store, "messages_for", lambda chat_file: loads.append(chat_file) or read_messages(chat_file))
    start = threading.Barrier(8)

    def query(_):
        start.wait()
        return r.chat(CHAT)

    with ThreadPoolExecutor(8) as pool:
        chats = list(pool.map(query, range(8)))
    assert loads == [CHAT]
    assert all(c is chats[0] for c in chats)


def test_reindexed_chat_is_reread(tmp_path, embedder):
    messages, blocks, signals, threads = frames()
    vectors = embedder.encode(messages["text"].to_list())
    embeddings = pl.DataFrame(
        {
            "message_id": messages["message_id"],
            "chat_file": messages["chat_file"],
            "local_id": messages["local_id"],
            "vector": list(vectors),
        },
        schema=schema.MESSAGE_EMBEDDINGS,
    )
    own = IndexStore(str(tmp_path / "lancedb"))
    own.replace_partition("messages", CHAT, build_rows(messages, embeddings)["messages"])
    r = Retriever(own, embedder, settings.load_config("retrieval"))
    r.cache.REFRESH_SECONDS = 0.0
    assert ids(r.search(CHAT, "pottery", k=5, variant="bm25")) == ["D2:4", "D2:3"]
    shorter = build_rows(messages.head(8), embeddings.head(8))["messages"]
    own.replace_partition("messages", CHAT, shorter)
    assert ids(r.search(CHAT, "pottery", k=5, variant="bm25")) == []  # D2:3 and D2:4 are gone


class CountingEmbedder:
    """The real embedder, counting its encode calls."""

    def __init__(self, embedder):
        self.embedder, self.calls = embedder, []

    def __getattr__(self, name):
        return getattr(self.embedder, name)

    def encode(self, texts, progress=None):
        self.calls.append(list(texts))
        return self.embedder.encode(texts)


def test_search_many_encodes_once_and_matches_search(store, embedder):
    counting = CountingEmbedder(embedder)
    batch = Retriever(store, counting, settings.load_config("retrieval"))
    queries = ["What breed is Ann's puppy?", "marathon training", "pottery"]
    results = batch.search_many(CHAT, queries, k=5)
    # one forward pass, over the texts actually searched (the person name stripped)
    assert len(counting.calls) == 1
    assert counting.calls[0][0] != queries[0] and "Ann" not in counting.calls[0][0]
    single = Retriever(store, embedder, settings.load_config("retrieval"))
    for query, result in zip(queries, results):
        one = single.search(CHAT, query, k=5)
        assert ids(result) == ids(one)
        assert [h.score for h in result.hits] == pytest.approx([h.score for h in one.hits], abs=1e-5)
    assert batch.search_many(CHAT, [], k=5) == []


def learned_config(features, weights):
    cfg = settings.load_config("retrieval")
    cfg["learned"] = {
        "features": features,
        "mean": [0.0] * len(features),
        "scale": [1.0] * len(features),
        "weights": weights,
    }
    return cfg


def test_hybrid_learned_reorders_the_hybrid_pool_by_the_model(store, embedder):
    # All weight on message length: the pool comes back longest first, the same ids as hybrid's pool.
    by_length = Retriever(store, embedder, learned_config(["log_words"], [1.0]))
    result = by_length.search(CHAT, "puppy", k=3, variant="hybrid_learned", candidates=10)
    hybrid = by_length.search(CHAT, "puppy", k=10, variant="hybrid", candidates=10)
    assert ids(result)[0] == "D2:2"  # 10 words, the longest message
    assert {lid for lid, _ in result.trace.reranked} == set(ids(hybrid))
    assert result.trace.candidates == [(h.local_id, h.score) for h in hybrid.hits]  # checkpoint 1 = hybrid pool
    scores = [s for _, s in result.trace.reranked]
    assert scores[0] == 1.0 and all(0 < b <= a for a, b in zip(scores, scores[1:]))
    assert "learned" in result.timings_ms
    # The speaker feature alone puts Ben's messages first.
    ben_first = Retriever(store, embedder, learned_config(["speaker_named"], [1.0]))
    hits = ben_first.search(CHAT, "What did Ben say about the puppy?", k=4, variant="hybrid_learned").hits
    assert [h.speaker for h in hits] == ["Ben"] * 4


def test_pool_features_respect_session_boundaries(retriever, embedder):
    from narrative_mirror.retrieval.chat_index import QueryScores
    from narrative_mirror.retrieval.learned_fusion import FEATURES
    from narrative_mirror.retrieval.pool_features import pool_features

    chat = retriever.chat(CHAT)
    query, info, search_query = retriever._parse(chat, "Did Biscuit chew anything?")
    scores = QueryScores(chat, search_query, embedder.encode([search_query])[0])
    fused, _, lists = retriever._first_stage(chat, "hybrid", info, scores)
    rows = list(range(chat.size))
    x = pool_features(chat, info, lists, fused, rows, scores, retriever.rrf_k)
    column = {name: x[:, j] for j, name in enumerate(FEATURES)}
    row = {lid: i for i, lid in enumerate(chat.local_ids)}
    assert column["is_question"][row["D1:4"]] == 1.0 and column["after_question"][row["D1:5"]] == 1.0
    # D1:6 ends session 1: its only neighbour 1 away in the same session is D1:5.
    assert column["cosine_near1"][row["D1:6"]] == pytest.approx(column["cosine"][row["D1:5"]])
    assert column["cosine_near1"][row["D2:1"]] == pytest.approx(column["cosine"][row["D2:2"]])
    assert column["bm25"].max() == 1.0 and column["bm25"][row["D2:1"]] == 1.0  # "chew" only there (stemmed)
    assert column["speaker_named"].sum() == 0  # no speaker named
    # Messages that speak of their writer: "Hi! I'm Annie.", "I adopted a puppy ...", "I am training ...",
    # "Biscuit chewed my favourite shoes today.", "... My marathon training ...", "I started pottery ...".
    speaks = {lid for lid in chat.local_ids if column["first_person"][row[lid]] == 1.0}
    assert speaks == {"D1:1", "D1:3", "D1:6", "D2:1", "D2:2", "D2:3"}
    # ... unless the question asks for a fact slot (a place, time, person or count).
    query, info, search_query = retriever._parse(chat, "When did Biscuit chew the shoes?")
    scores = QueryScores(chat, search_query, embedder.encode([search_query])[0])
    fused, _, lists = retriever._first_stage(chat, "hybrid", info, scores)
    when = pool_features(chat, info, lists, fused, rows, scores, retriever.rrf_k)
    assert info.question_type == "when" and when[:, list(FEATURES).index("first_person")].sum() == 0


def test_hybrid_learned_needs_a_valid_learned_section(store, embedder):
    cfg = settings.load_config("retrieval")
    del cfg["learned"]
    with pytest.raises(ValueError, match=r"no \[learned\] section"):
        Retriever(store, embedder, cfg).search(CHAT, "puppy", variant="hybrid_learned")
    assert Retriever(store, embedder, cfg).search(CHAT, "puppy", variant="hybrid").hits  # other variants unaffected
    with pytest.raises(ValueError, match="unknown features"):
        Retriever(store, embedder, learned_config(["shoe_size"], [1.0])).search(CHAT, "puppy", variant="hybrid_learned")
