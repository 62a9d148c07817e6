"""Seed 003's traversal study (narrative_mirror/retrieval/traversal.py, query_rewrite.py,
traversal_study.py) on a hand-made tree with a term-count scorer, so every beam, query, ranking and
table cell is known exactly; the LLM rewriter against a loopback server:

    T1 "bakery and running" > B1 "bakery work" (m1, m2), B2 "marathon training" (m3, m4)
    T2 "market days rye"    > B3 "market stall rye" (m5, m6)
    B4 "harvest" (m7, in no thread)
"""

import math

import pytest
from llm_servers import fault_server

from narrative_mirror.agent.text import content_tokens, stem
from narrative_mirror.llm import DATA_BEGIN, DATA_END, LLMClient
from narrative_mirror.retrieval.query_rewrite import (
    EXPLOIT,
    EXPLORE,
    RewriteCache,
    Rewritten,
    llm_expander,
    llm_rewriter,
    llm_schema,
    query_t,
)
from narrative_mirror.retrieval.traversal import Tools, Tree, Variant, run_variant
from narrative_mirror.retrieval.traversal_study import VARIANTS, by_name, leave_one_chat_out, summary_row

TREE = Tree(
    blocks={"B1": ["m1", "m2"], "B2": ["m3", "m4"], "B3": ["m5", "m6"], "B4": ["m7"]},
    threads={"T1": ["B1", "B2"], "T2": ["B3"]},
)
LEAVES = {
    "m1": "ana bakes rye bread at the bakery",
    "m2": "ana's rye dough by the oven",
    "m3": "ben runs a marathon",
    "m4": "ben trains for the marathon in the park",
    "m5": "sells rye loaves at the market",
    "m6": "market stall opens at dawn",
    "m7": "rye field harvest",
}
BRANCHES = {
    "T1": "bakery and running",
    "T2": "market days rye",
    "B1": "bakery work",
    "B2": "marathon training",
    "B3": "market stall rye",
    "B4": "harvest",
}
QUESTION = "Where does Ana bake rye?"


class TermScorer:
    """Ranks by the number of the query's word stems a text holds; ties and zeros in id order."""

    def __init__(self):
        self.leaf_queries = []

    @staticmethod
    def _rank(texts, query):
        wanted = {stem(t) for t in content_tokens(query)}
        score = {i: len(wanted & {stem(t) for t in content_tokens(text)}) for i, text in texts.items()}
        order = list(texts)
        return sorted(order, key=lambda i: (-score[i], order.index(i)))

    def leaves(self, query):
        self.leaf_queries.append(query)
        return self._rank(LEAVES, query)

    def branches(self, query):
        return self._rank(BRANCHES, query)

    def leaf_texts(self, ids):
        return [LEAVES[i] for i in ids]

    def branch_texts(self, ids):
        return [BRANCHES[i] for i in ids]


def test_baseline_1_descends_by_branch_scores_alone_into_the_wrong_thread():
    run = run_variant(Variant("1", flat=False, beam=1, anchors=2), QUESTION, TREE, TermScorer())
    assert run.rankings[0] == ["m1", "m2", "m5", "m7", "m3", "m4", "m6"]  # the flat ranking
    # "rye" is in T2's description, not T1's: the beam goes T2 > B3 and stays (B3 has no sibling).
    assert run.beams == [[], ["T2"], ["B3"], ["B3"]]
    assert run.rankings[1] == ["m5", "m6", "m1", "m2", "m7", "m3", "m4"]
    assert run.actions == [None] * 4 and run.queries == [QUESTION] * 4


def test_variant_a_flat_anchors_gate_the_beam_into_the_thread_holding_the_best_leaves():
    run = run_variant(Variant("A", beam=1, anchors=2), QUESTION, TREE, TermScorer())
    # Both anchors (m1, m2) sit in T1 > B1: the gate outranks T2's better description.
    assert run.beams == [[], ["T1"], ["B1"], ["B1"]]
    assert run.rankings[1] == ["m1", "m2", "m3", "m4", "m5", "m7", "m6"]
    assert run.rankings[2] == ["m1", "m2", "m5", "m7", "m3", "m4", "m6"]


def test_variant_a_expands_then_rewrites_every_n_from_leaf_evidence_with_an_exploit_action():
    scorer = TermScorer()
    seen = []

    def rewrite(question, leaf_texts, branch_texts, schema, previous):
        seen.append((list(leaf_texts), list(branch_texts), previous))
        return Rewritten("bread dough", EXPLOIT)

    tools = Tools(rewrite=rewrite, expand=lambda q, style: f"{style}: ana bakes rye")
    run = run_variant(
        Variant("A", expansion="thinkqe", rewrite_every=2, beam=1, anchors=2), QUESTION, TREE, scorer, tools
    )
    assert run.queries[0] == run.queries[1] == "thinkqe: ana bakes rye"
    # Iteration 2 rewrites once, from the last ranking's 5 best leaves (no branch text in "leaf" context);
    # exploit: Query_t = the expanded query + the rewrite, and the descent goes on below B1.
    assert len(seen) == 1 and seen[0] == ([LEAVES[i] for i in ["m1", "m2", "m3", "m4", "m5"]], [], None)
    assert run.actions == [None, None, EXPLOIT, None]
    assert run.queries[2] == run.queries[3] == "thinkqe: ana bakes rye bread dough"
    assert run.beams == [[], ["T1"], ["B1"], ["B1"]]


def test_rewrite_every_0_never_rewrites():
    def rewrite(*args):
        raise AssertionError("rewrite_every=0 disables rewriting")

    run = run_variant(Variant("A0", rewrite_every=0), QUESTION, TREE, TermScorer(), Tools(rewrite=rewrite))
    assert run.queries == [QUESTION] * 4 and run.actions == [None] * 4


def test_an_explore_action_replaces_the_query_and_restarts_the_descent_at_the_top():
    # No leaf mentions Zoe or swimming: the offline rewriter finds its evidence off-topic -> explore.
    question = "Where does Zoe swim?"
    run = run_variant(
        Variant("1b", flat=False, rewrite_every=1, context="leafslate", leaf=2), question, TREE, TermScorer()
    )
    assert run.actions == [None, EXPLORE, EXPLORE, EXPLORE]
    # Query_t on explore is the rewrite alone: the question's statement form and leaf feedback terms,
    # the previous rewrite's terms excluded from the next.
    # (ana and rye in both leaves first, then alphabetical).
    assert run.queries[1] == "Zoe swim ana rye bakes bakery"
    assert run.queries[2].startswith("Zoe swim ") and not set(run.queries[2].split()[2:]) & {
        "ana",
        "rye",
        "bakes",
        "bakery",
    }
    assert all(beam[0] in TREE.top for beam in run.beams[1:])  # explore: back to the top each time


def test_explore_mode_concat_keeps_the_original_query():
    run = run_variant(
        Variant("c", flat=False, rewrite_every=1, explore_mode="concat", leaf=2),
        "Where does Zoe swim?",
        TREE,
        TermScorer(),
    )
    assert run.actions[1] == EXPLORE and run.queries[1] == "Where does Zoe swim? Zoe swim ana rye bakes bakery"


def test_baselines_2_and_2b_expand_without_context_then_traverse_without_rewriting():
    runs = {
        style: run_variant(Variant(style, expansion=style, flat=False), QUESTION, TREE, TermScorer())
        for style in ("thinkqe", "executor")
    }
    assert runs["thinkqe"].queries == ["Ana bake rye"] * 4
    assert runs["executor"].queries == ["ana bake rye"] * 4
    assert all(a is None for run in runs.values() for a in run.actions)


def test_schema_induction_logs_3_to_5_categories_with_their_own_candidates():
    scorer = TermScorer()
    seen = []

    def rewrite(question, leaf_texts, branch_texts, schema, previous):
        seen.append(list(schema))
        return Rewritten("rye loaves", EXPLOIT)

    run = run_variant(
        Variant("s", schema=True, traverse=False, rewrite_every=1, iterations=2),
        QUESTION,
        TREE,
        scorer,
        Tools(rewrite=rewrite),
    )
    # Words shared by 2+ of the flat branch hits' descriptions: market (T2, B3) and bakery (T1, B1);
    # filled to 3 with the next most repeated (alphabetical): days.
    assert run.schema == ["bakery", "market", "days"] and seen == [run.schema]
    assert run.schema_candidates["market"][:3] == ["m1", "m2", "m5"]
    assert set(run.schema_candidates) == set(run.schema)
    assert run.rankings[1] == scorer.leaves(f"{QUESTION} rye loaves")[:20]  # no traversal: the flat ranking


def test_the_rewrite_cache_is_keyed_by_query_context_and_action_and_persists(tmp_path):
    path = tmp_path / "rewrites.jsonl"
    calls = []
    cache = RewriteCache(path)
    for action in (None, None, EXPLORE):
        cache.lookup("rewrite", "q", ["leaf"], action, lambda: calls.append(1) or {"query": "x", "action": EXPLOIT})
    assert (cache.hits, cache.misses, len(calls)) == (1, 2, 2)
    again = RewriteCache(path)
    assert again.lookup("rewrite", "q", ["leaf"], EXPLORE, lambda: pytest.fail("cached")) == {
        "query": "x",
        "action": EXPLOIT,
    }
    path.write_text(path.read_text() + "not json\n")
    with pytest.raises(ValueError, match=r"rewrites.jsonl: line 3"):
        RewriteCache(path)


def test_a_second_run_with_the_same_cache_asks_the_rewriter_nothing():
    calls = []

    def rewrite(question, leaf_texts, branch_texts, schema, previous):
        calls.append(previous)
        return Rewritten("bread", EXPLOIT)

    tools = Tools(rewrite=rewrite)
    variant = Variant("A", rewrite_every=1)
    first = run_variant(variant, QUESTION, TREE, TermScorer(), tools)
    asked = len(calls)
    second = run_variant(variant, QUESTION, TREE, TermScorer(), tools)
    assert asked == 3 and calls[0] is None and calls[1] == Rewritten("bread", EXPLOIT)  # one per iteration
    assert len(calls) == asked and first.rankings == second.rankings and tools.cache.hits == 3


HALF = 100 / math.log2(3)  # nDCG@10 of one gold id at rank 2


def test_the_table_reads_ndcg_and_recall_at_iteration_0_and_at_the_best_iteration():
    gold = [["a"], ["b"]]
    rankings = [[["x", "a"], ["a"], ["a"]], [["y"], ["y"], ["b"]]]
    row = summary_row("V", rankings, gold)
    assert row["ndcg@10 it0"] == pytest.approx(HALF / 2) and row["recall@10 it0"] == 50
    assert row["best it"] == 2 and row["ndcg@10 best"] == 100 and row["recall@10 best"] == 100
    # A run that stopped early keeps its last ranking; on a tie the earliest iteration is the best.
    assert summary_row("W", [[["a"]], [["b"], ["b"]]], gold)["best it"] == 0


def test_leave_one_chat_out_chooses_on_the_other_chats_and_scores_the_held_out_one():
    gold = [["a"], ["b"]]
    rankings = {"flat": [[["x", "a"]], [["b"]]], "V": [[["x", "a"], ["a"]], [["b"], ["x", "y", "b"]]]}
    loco = leave_one_chat_out(rankings, gold, ["c1", "c2"])
    # Held out c1: on c2 flat@0 and V@0 tie at 100 -> the baseline; held out c2: V@1 (100 on c1) wins
    # but scores 50 on c2, where flat scores 100.
    assert [f["chosen"] for f in loco["folds"]] == ["flat @ it 0", "V @ it 1"]
    assert loco["chosen"] == pytest.approx((HALF + 50) / 2) and loco["baseline"] == pytest.approx((HALF + 100) / 2)


def test_every_study_row_is_a_variant_and_names_select_them():
    names = [v.name for v in VARIANTS]
    assert len(set(names)) == len(names) and names[0] == "flat"
    assert [v.name for v in by_name("1,2b")] == ["1 traversal only", "2b QE executor > traversal"]
    with pytest.raises(ValueError, match="no study variant named \\['nope'\\]"):
        by_name("1,nope")


def test_query_t_by_action():
    assert query_t("q", None) == "q"
    assert query_t("q", Rewritten("r", "exploit")) == "q r" and query_t("q", Rewritten("r", EXPLORE)) == "r"
    assert (
        query_t("q", Rewritten("r", EXPLORE), "concat") == "q r"
        and query_t("q", Rewritten("r", EXPLORE), "original") == "q"
    )
    with pytest.raises(ValueError, match="explore_mode"):
        query_t("q", None, "sideways")


def test_the_llm_rewriter_returns_its_action_and_gets_leaf_and_branch_text_labelled_apart():
    content = {"query": "market rye loaves", "action": "explore", "categories": ["place", "food"]}
    with fault_server("ok_json", content=content) as server:
        llm = LLMClient(server.settings())
        tools = Tools(rewrite=llm_rewriter(llm), expand=llm_expander(llm), schema=llm_schema(llm), name="llm")
        run = run_variant(
            Variant("1b", expansion="thinkqe", flat=False, rewrite_every=1, context="leafslate", iterations=3, leaf=2),
            QUESTION,
            TREE,
            TermScorer(),
            tools,
        )
        bodies = server.chat_requests
    assert run.queries == ["market rye loaves"] * 3 and run.actions == [None, EXPLORE, EXPLORE]
    second = bodies[2]["messages"][1]["content"]  # expansion, first rewrite, second rewrite
    data = second[second.index(DATA_BEGIN) : second.index(DATA_END)]
    assert "leaf evidence" in data and "branch context" in data and "market days rye" in data
    assert "Previous rewrite (explore): market rye loaves" in second
    assert len(bodies) == 3  # the third iteration's evidence repeats the second's: cached


def test_the_llm_schema_is_filled_to_three_categories():
    with fault_server("ok_json", content={"categories": ["place"]}) as server:
        categories = llm_schema(LLMClient(server.settings()))("Where?", ["market days rye", "market stall rye"])
    assert categories == ["place", "market", "rye"]


def test_a_failed_llm_rewrite_falls_back_to_the_offline_one_and_is_counted():
    from collections import Counter

    failures = Counter()
    with fault_server("malformed") as server:
        rewrite = llm_rewriter(LLMClient(server.settings(max_retries=0)), failures)
        rewritten = rewrite("Where does Zoe swim?", [LEAVES["m1"], LEAVES["m2"]])
    assert rewritten == Rewritten("Zoe swim ana rye bakes bakery", EXPLORE)
    assert failures == {"rewrite: malformed": 1}
