"""Seed 003's iterative loop (narrative_mirror/retrieval/iterative.py) on a real LanceDB index of
the tiny bakery chat with block summaries and one L2 thread: rounds, ``rewrite_every``, branch
restriction, and a branch context made of the stored summaries, not the messages."""

import polars as pl
import pytest
from llm_servers import fault_server
from memory_api_chat import CHAT, chat_frames

from narrative_mirror import schema
from narrative_mirror.embedding import message_texts
from narrative_mirror.index_rows import build_rows
from narrative_mirror.index_store import IndexStore
from narrative_mirror.llm import DATA_BEGIN, DATA_END, LLMClient
from narrative_mirror.retrieval.engine import Retriever
from narrative_mirror.retrieval.iterative import iterative_search, llm_rewrite, offline_rewrite
from narrative_mirror.retrieval.traversal import ChatScorer, Tree, Variant, run_variant

SUMMARIES = [
    "Ana's first day at the Elm Street bakery",
    "Ben's marathon plan",
    "A week of rye loaves",
    "Ben's long run",
]


@pytest.fixture(scope="module")
def retriever(embedder, tmp_path_factory):
    messages, blocks, signals = chat_frames()
    blocks = blocks.with_columns(pl.Series("summary", SUMMARIES))
    ids = blocks["block_id"].to_list()
    threads = pl.DataFrame(
        [
            {  # the bakery storyline: blocks 0 and 2
                "thread_id": f"{CHAT}/T0",
                "chat_file": CHAT,
                "block_ids": [ids[0], ids[2]],
                "start_time": blocks["start_time"][0],
                "end_time": blocks["end_time"][2],
                "participants": ["Ana", "Ben"],
                "entities": [],
                "title": "The bakery job",
                "summary": "Ana works at a bakery and bakes rye",
            }
        ],
        schema=schema.THREADS,
    )
    vectors = embedder.encode(message_texts(messages))
    embeddings = pl.DataFrame(
        {
            "message_id": messages["message_id"],
            "chat_file": messages["chat_file"],
            "local_id": messages["local_id"],
            "vector": [v.tolist() for v in vectors],
        },
        schema=schema.MESSAGE_EMBEDDINGS,
    )
    store = IndexStore(str(tmp_path_factory.mktemp("iterative") / "lancedb"))
    for table, rows in build_rows(messages, embeddings, signals=signals, blocks=blocks, threads=threads).items():
        store.replace_partition(table, CHAT, rows)
    return Retriever(store, embedder)


def test_seed_003_iterative_loop_rewrites_every_n_rounds_from_leaf_context_within_the_branches(retriever):
    seen = []

    def rewrite(question, leaf_texts, branch_texts):
        seen.append((list(leaf_texts), list(branch_texts)))
        return offline_rewrite(question, leaf_texts)

    question = "Where does Ana bake rye bread?"
    ranked, trace = iterative_search(
        retriever, CHAT, question, k=8, rounds=3, rewrite_every=2, n_blocks=1, leaf=2, rewrite=rewrite
    )
    # Round 1 keeps the question (1 is not a multiple of 2); round 2 rewrites it, once.
    assert trace.queries[0] == trace.queries[1] == question and len(seen) == 1
    assert trace.queries[2].startswith(question + " ") and trace.queries[2] != question
    # The best hit sits in the bakery blocks: the branch is its block widened to its thread.
    bakery = [f"{CHAT}/S1/B0", f"{CHAT}/S2/B2"]
    assert sorted(trace.branches[0]) == bakery
    members = {"D1:1", "D1:2", "D1:3", "D11:1", "D11:2"}
    assert all(set(r) <= members for r in trace.rankings[1:]) and trace.rankings[1]
    # The branch context is the stored summaries of the blocks and of their thread, no message text.
    leaf_texts, branch_texts = seen[0]
    assert any("Elm Street bakery" in t for t in branch_texts) and any("The bakery job" in t for t in branch_texts)
    assert not any("forty loaves" in t for t in branch_texts) and len(leaf_texts) == 2
    # The fused ranking holds every message once, bakery messages first.
    assert sorted(ranked) == sorted(set(ranked)) and len(ranked) == 8 and ranked[0] in members


def test_rewrite_every_0_searches_the_branches_with_the_question_itself(retriever):
    def rewrite(question, leaf_texts, branch_texts):
        raise AssertionError("rewrite_every=0 never rewrites")

    question = "Where does Ana bake rye bread?"
    ranked, trace = iterative_search(
        retriever, CHAT, question, k=8, rounds=3, rewrite_every=0, n_blocks=1, leaf=2, rewrite=rewrite
    )
    assert trace.queries == [question] * 3 and len(trace.rankings) == 3 and ranked


def test_offline_rewrite_adds_the_leaf_contexts_most_repeated_terms():
    assert (
        offline_rewrite("Where does Ana work?", ["rye bread bakery", "bakery rye loaves", "bakery"])
        == "Where does Ana work? bakery rye bread loaves"
    )


def test_the_loop_is_the_iterative_retrieval_variant(retriever):
    result = retriever.search(CHAT, "Where does Ana bake rye bread?", k=3, variant="iterative")
    ranked, trace = iterative_search(
        retriever,
        CHAT,
        "Where does Ana bake rye bread?",
        k=3,
        rounds=3,
        rewrite_every=1,
        n_blocks=2,
        leaf=5,
        variant="hybrid_learned",
    )
    assert [h.local_id for h in result.hits] == ranked
    assert result.query_info["queries"] == trace.queries and len(trace.queries) == 3


def test_the_loops_llm_rewriter_sends_leaf_messages_and_branch_summaries_as_data(retriever):
    with fault_server("ok_json", content={"queries": ["rye loaves Elm Street bakery"]}) as server:
        _, trace = iterative_search(
            retriever,
            CHAT,
            "Where does Ana bake rye bread?",
            k=5,
            rounds=2,
            n_blocks=1,
            leaf=2,
            rewrite=llm_rewrite(LLMClient(server.settings())),
        )
        user = server.chat_requests[0]["messages"][1]["content"]
    assert trace.queries == ["Where does Ana bake rye bread?", "rye loaves Elm Street bakery"]
    data = user[user.index(DATA_BEGIN) : user.index(DATA_END)]
    assert "The bakery job" in data and "Elm Street bakery" in data  # branch summaries, inside the data block
    assert len(server.chat_requests) == 1


def test_the_loops_fusion_uses_retrieval_tomls_rrf_k(retriever):
    """rrf_k reaches the loop's fusion: a small k lets a round's top hit overtake the flat ranking's
    second, a large one keeps the flat order (the same rankings fused)."""
    question = "Where does Ana bake rye bread?"
    runs = {
        k: iterative_search(retriever, CHAT, question, k=8, rounds=3, rewrite_every=1, n_blocks=1, leaf=2, rrf_k=k)
        for k in (1, 10_000)
    }
    trace = runs[1][1]
    expected = {}
    for k in (1, 10_000):
        scores = {}
        for ranking in trace.rankings:
            for rank, lid in enumerate(ranking):
                scores[lid] = scores.get(lid, 0.0) + 1.0 / (k + rank + 1)
        first = {lid: i for i, lid in enumerate(trace.rankings[0])}
        expected[k] = sorted(scores, key=lambda lid: (-scores[lid], first.get(lid, len(first))))[:8]
    assert runs[1][0] == expected[1] and runs[10_000][0] == expected[10_000]
    assert retriever.rrf_k == 60  # retrieval.toml's, what the engine passes to the loop


def test_the_study_runs_on_a_real_index_through_the_chat_scorer(retriever):
    """Seed 003's traversal study (retrieval/traversal.py) over this index's tree."""
    tree = Tree.from_chat(retriever.chat(CHAT))
    assert tree.threads == {f"{CHAT}/T0": [f"{CHAT}/S1/B0", f"{CHAT}/S2/B2"]}
    scorer = ChatScorer(retriever, CHAT)
    question = "Where does Ana bake rye bread?"
    run = run_variant(Variant("A", expansion="thinkqe", rewrite_every=1, beam=1), question, tree, scorer)
    flat = [h.local_id for h in retriever.search(CHAT, "Ana bake rye bread", k=20).hits]
    assert run.queries[0] == "Ana bake rye bread" and run.rankings[0] == flat
    # The bakery thread holds the best leaves: the beam descends into it, then into one of its blocks.
    assert run.beams[1] == [f"{CHAT}/T0"] and run.beams[2][0] in tree.threads[f"{CHAT}/T0"]
    members = set(tree.leaves_under(run.beams[2][0]))
    assert set(run.rankings[2][: len(members)]) == members and all(a in ("explore", "exploit") for a in run.actions[1:])
    assert scorer.branch_texts([f"{CHAT}/T0"]) == ["The bakery job. Ana works at a bakery and bakes rye"]
