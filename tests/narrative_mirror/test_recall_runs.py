from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta, timezone

import pytest
from memory_api_chat import CHAT, MESSAGES, START

from narrative_mirror.home import Home
from narrative_mirror.recall_runs import compare_run, recorded_search, run_item, write_run
from narrative_mirror.retrieval.records import Hit

NOW = datetime(2025, 8, 26, 1, 30, 0, 250000, tzinfo=timezone(timedelta(hours=2)))  # 2025-08-25 23:30:00.250 UTC
NOW_MS = int(NOW.timestamp() * 1000)


def test_run_goes_to_the_utc_date_folder_of_the_home(tmp_path):
    path = write_run(
        "rye", {"k": 1}, [{"score": 1.0}], [{"score": 1.0}], root=Home(tmp_path / "nm_home").recall_runs, now=NOW
    )
    assert path == tmp_path / "nm_home" / "recall_runs" / "20250825" / f"run_{NOW_MS}.json"
    record = json.loads(path.read_text())
    assert record == {
        "query": "rye",
        "params": {"k": 1},
        "pre_items": [{"score": 1.0}],
        "post_items": [{"score": 1.0}],
        "ts": "2025-08-25T23:30:00.250Z",
    }


def test_runs_in_the_same_millisecond_never_overwrite(tmp_path):
    first = write_run("first", {}, [], [], root=tmp_path, now=NOW)
    second = write_run("second", {}, [], [], root=tmp_path, now=NOW)
    assert (first.name, second.name) == (f"run_{NOW_MS}.json", f"run_{NOW_MS}_1.json")
    assert json.loads(first.read_text())["query"] == "first"
    assert json.loads(second.read_text())["query"] == "second"


def test_an_existing_file_is_left_untouched(tmp_path):
    folder = tmp_path / "20250825"
    folder.mkdir()
    (folder / f"run_{NOW_MS}.json").write_text("kept as it was")
    path = write_run("new", {}, [], [], root=tmp_path, now=NOW)
    assert path.name == f"run_{NOW_MS}_1.json"
    assert (folder / f"run_{NOW_MS}.json").read_text() == "kept as it was"


def test_concurrent_runs_in_one_millisecond_get_distinct_files(tmp_path):
    paths = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        path = write_run(f"q{i}", {}, [], [], root=tmp_path, now=NOW)
        with lock:
            paths.append(path)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(paths)) == 20
    assert sorted(json.loads(p.read_text())["query"] for p in paths) == sorted(f"q{i}" for i in range(20))


def write_record(path, record) -> None:
    path.write_text(json.dumps(record))


def test_compare_run_exact_lift(tmp_path):
    path = tmp_path / "run.json"
    write_record(
        path,
        {
            "pre_items": [{"score": 1.0}, {"score": 0.8}, {"score": 0.6}, {"score": 5.0}],
            "post_items": [
                {"score": 1.0, "rerank": {"new_score": 0.9}},
                {"score": 0.6, "rerank": {"new_score": 1.2}},
                {"score": 0.3},
            ],
        },
    )
    result = compare_run(path)
    assert result["avg_pre"] == pytest.approx(0.8)  # only the top 3 count
    assert result["avg_post"] == pytest.approx((0.9 + 1.2 + 0.3) / 3)
    assert result["lift"] == pytest.approx(0.0)


def test_compare_run_of_empty_lists(tmp_path):
    path = tmp_path / "run.json"
    write_record(path, {"pre_items": [], "post_items": []})
    assert compare_run(path) == {"avg_pre": 0.0, "avg_post": 0.0, "lift": 0.0}


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"post_items": []}, "'pre_items' must be a list"),
        ({"pre_items": [{"score": "high"}], "post_items": []}, r"pre_items\[0\] has no numeric score"),
        ({"pre_items": [], "post_items": [{"rerank": {"new_score": None}}]}, r"post_items\[0\] has no numeric score"),
    ],
)
def test_compare_run_names_the_bad_field(tmp_path, record, message):
    path = tmp_path / "bad.json"
    write_record(path, record)
    with pytest.raises(ValueError, match=message) as info:
        compare_run(path)
    assert str(path) in str(info.value)


def test_compare_run_of_a_broken_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="broken.json"):
        compare_run(path)


def test_run_item_cuts_the_text_and_needs_hybrid_reasons():
    reasons = {
        "kw": 1.0,
        "recency": 0.5,
        "refs": 0.0,
        "tier_weight": 1 / 3,
        "hybrid_score": 1.3,
        "rubric": 0.65,
        "new_score": 1.105,
    }
    hit = Hit(
        local_id="D1:1",
        message_id="c/D1:1",
        position=7,
        session=1,
        speaker="Ana",
        text="x" * 500,
        timestamp=datetime(2024, 3, 1, 9, 0),
        score=1.105,
        reasons=reasons,
        block_id="c/S1/B0",
    )
    item = run_item(hit, "c", 1, with_rerank=True)
    assert item == {
        "id": "D1:1",
        "tier": 1,
        "score": 1.3,
        "ts": "2024-03-01T09:00:00",
        "scope_id": "c/S1/B0",
        "text": "x" * 400,
        "path": "c",
        "line_from": 7,
        "line_to": 7,
        "reasons": {"kw": 1.0, "recency": 0.5, "refs": 0.0, "tier_weight": 1 / 3},
        "rerank": {"rubric": 0.65, "new_score": 1.105},
    }
    assert "rerank" not in run_item(hit, "c", 1, with_rerank=False)
    hit.reasons = {"retrieval": 0.1}
    with pytest.raises(ValueError, match="D1:1: no hybrid-score reasons"):
        run_item(hit, "c", 1, with_rerank=False)


def expected_tier_and_refs() -> dict[str, tuple[int, float]]:
    out, counters = {}, {}
    for day, _speaker, _text, tier, refs in MESSAGES:
        counters[day] = counters.get(day, 0) + 1
        out[f"D{day + 1}:{counters[day]}"] = (tier, refs)
    return out


def test_recorded_search_without_self_rag(retriever, tmp_path):
    recorded = recorded_search(
        retriever, CHAT, "rye bread at the bakery", 3, root=tmp_path, variant="hybrid_expand_rerank"
    )
    record = json.loads(recorded.run_path.read_text())
    assert recorded.run_path.parent.parent == tmp_path
    assert record["query"] == "rye bread at the bakery"
    assert record["params"] == {
        "chat": CHAT,
        "k": 3,
        "need_fresh": 0,
        "half_life_days": 7.0,
        "fresh_weight": 0.9,
        "self_rag": 0,
        "tiers": None,
        "variant": "hybrid_expand_rerank",
    }
    pre, post = record["pre_items"], record["post_items"]
    assert len(pre) == 3 and pre == post  # no Self-RAG: same items, same order, no rerank field
    assert [item["id"] for item in post] == [h.local_id for h in recorded.result.hits]
    known = expected_tier_and_refs()
    last = START + timedelta(days=10, minutes=len(MESSAGES) - 1)
    for item, hit in zip(post, recorded.result.hits):
        tier, refs = known[item["id"]]
        assert (item["tier"], item["reasons"]["refs"], item["reasons"]["tier_weight"]) == (tier, refs, tier / 3)
        age_days = (last - hit.timestamp).total_seconds() / 86400
        assert item["reasons"]["recency"] == pytest.approx(1 / (1 + age_days / 7.0))
        assert (item["path"], item["line_from"], item["line_to"]) == (CHAT, hit.position, hit.position)
        assert item["scope_id"] == hit.block_id and item["text"] == hit.text
        assert item["score"] == pytest.approx(
            item["reasons"]["kw"] + 0.6 * item["reasons"]["recency"] + 0.4 * refs + 0.2 * tier / 3
        )
    assert [item["score"] for item in pre] == sorted((item["score"] for item in pre), reverse=True)
    assert compare_run(recorded.run_path)["lift"] == 0.0


def test_recorded_search_with_fresh_weight_and_self_rag(retriever, tmp_path):
    recorded = recorded_search(
        retriever,
        CHAT,
        "rye bread at the bakery",
        4,
        need_fresh=True,
        half_life_days=1.0,
        fresh_weight=2.0,
        self_rag=True,
        root=tmp_path,
        variant="hybrid_expand_rerank",
    )
    record = json.loads(recorded.run_path.read_text())
    assert (
        record["params"]["need_fresh"],
        record["params"]["half_life_days"],
        record["params"]["fresh_weight"],
        record["params"]["self_rag"],
    ) == (1, 1.0, 2.0, 1)
    last = START + timedelta(days=10, minutes=len(MESSAGES) - 1)
    by_id = {h.local_id: h for h in recorded.result.hits}
    for item in record["post_items"]:
        r = item["reasons"]
        age_days = (last - by_id[item["id"]].timestamp).total_seconds() / 86400
        assert r["recency"] == pytest.approx(1 / (1 + age_days / 1.0))
        assert item["score"] == pytest.approx(r["kw"] + 2.0 * r["recency"] + 0.4 * r["refs"] + 0.2 * r["tier_weight"])
        rubric = min(1.0, 0.5 * r["kw"] + 0.3 * r["recency"] + 0.2 * r["refs"])
        assert item["rerank"]["rubric"] == pytest.approx(rubric)
        assert item["rerank"]["new_score"] == pytest.approx(0.7 * item["score"] + 0.3 * rubric)
    new_scores = [item["rerank"]["new_score"] for item in record["post_items"]]
    assert new_scores == sorted(new_scores, reverse=True)
    assert all("rerank" not in item for item in record["pre_items"])
    pre_scores = [item["score"] for item in record["pre_items"]]
    assert pre_scores == sorted(pre_scores, reverse=True)
    lift = compare_run(recorded.run_path)
    assert lift["avg_pre"] == pytest.approx(sum(pre_scores[:3]) / 3)
    assert lift["avg_post"] == pytest.approx(sum(new_scores[:3]) / 3)


def test_a_search_ranks_with_the_default_variant_unless_the_request_names_another(retriever, tmp_path):
    # Issue #30 item 3: the same ranking as `ask`'s retrieval (retrieval.toml's default_variant).
    default = retriever.default_variant
    assert default != "hybrid_expand_rerank"
    recorded = recorded_search(retriever, CHAT, "rye bread at the bakery", 4, root=tmp_path)
    record = json.loads(recorded.run_path.read_text())
    expected = [h.local_id for h in retriever.search(CHAT, "rye bread at the bakery", 4).hits]
    assert [h.local_id for h in recorded.result.hits] == expected
    assert record["params"]["variant"] == default
    assert [item["id"] for item in record["pre_items"]] == [item["id"] for item in record["post_items"]] == expected
    assert all(set(item["reasons"]) == {"kw", "recency", "refs", "tier_weight"} for item in record["post_items"])
    # Another variant, named by the request, ranks and is recorded instead.
    bm25 = recorded_search(retriever, CHAT, "rye bread at the bakery", 4, root=tmp_path, variant="bm25")
    assert [h.local_id for h in bm25.result.hits] == [
        h.local_id for h in retriever.search(CHAT, "rye bread at the bakery", 4, variant="bm25").hits
    ]
    assert json.loads(bm25.run_path.read_text())["params"]["variant"] == "bm25"


def test_a_failed_record_write_does_not_fail_the_search(retriever, tmp_path):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the runs folder should be")
    recorded = recorded_search(retriever, CHAT, "marathon", 2, root=blocked)
    assert len(recorded.result.hits) == 2
    assert recorded.run_path is None
    assert "could not write the recall-run record" in recorded.run_error


def test_a_run_without_its_folder_is_refused_not_written_to_a_default():
    with pytest.raises(ValueError, match="no recall-run folder"):
        write_run("q", {}, [], [], root=None)


def test_run_timestamps_are_utc_z(tmp_path):
    stamp = json.loads(
        write_run("q", {}, [], [], root=tmp_path, now=datetime(2024, 1, 1, 0, 0, tzinfo=UTC)).read_text()
    )["ts"]
    assert stamp == "2024-01-01T00:00:00.000Z"
