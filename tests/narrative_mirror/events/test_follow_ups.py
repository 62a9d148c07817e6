from __future__ import annotations

from datetime import timedelta

from event_factory import T0, event

from narrative_mirror.events.writer import EventLog


def test_a_similar_query_of_the_same_user_is_a_follow_up(follow_log):
    first = follow_log.log(event("Where does Ana work?", user="u1"))
    other_user = follow_log.log(event("Where does Ana work?", user="u2", at=T0 + timedelta(minutes=1)))
    unrelated = follow_log.log(event("How far did Ben run on Sunday?", user="u1", at=T0 + timedelta(minutes=2)))
    retry = follow_log.log(event("Where is Ana working?", user="u1", at=T0 + timedelta(minutes=3)))
    rows = {r["event_id"]: r for r in follow_log.events().to_dicts()}
    # The retry follows up the similar earlier query, skipping the unrelated one in between.
    assert rows[retry]["follow_up_of"] == first
    assert rows[first]["satisfied"] is False
    assert rows[other_user]["follow_up_of"] is None and rows[other_user]["satisfied"] is None
    assert rows[unrelated]["follow_up_of"] is None and rows[unrelated]["satisfied"] is None
    assert rows[retry]["satisfied"] is None


def test_a_follow_up_must_fall_inside_the_window(follow_log):
    first = follow_log.log(event("Where does Ana work?"))
    follow_log.flush()  # the earlier event is stored: marking it is an update
    late = follow_log.log(event("Where is Ana working?", at=T0 + timedelta(minutes=11)))
    retry = follow_log.log(event("Where does Ana work now?", at=T0 + timedelta(minutes=15)))
    rows = {r["event_id"]: r for r in follow_log.events().to_dicts()}
    assert rows[late]["follow_up_of"] is None
    assert rows[retry]["follow_up_of"] == late
    assert rows[late]["satisfied"] is False
    assert rows[first]["satisfied"] is None


def test_follow_ups_link_across_event_logs(tmp_path, embedder):
    # One CLI run per question: the second process finds the first query in the table.
    first_log = EventLog(tmp_path / "lancedb", embedder=embedder)
    first = first_log.log(event("Where does Ana work?"))
    first_log.close()
    second_log = EventLog(tmp_path / "lancedb", embedder=embedder)
    retry = second_log.log(event("Where is Ana working?", at=T0 + timedelta(minutes=2)))
    rows = {r["event_id"]: r for r in second_log.events().to_dicts()}
    second_log.close()
    assert rows[retry]["follow_up_of"] == first
    assert rows[first]["satisfied"] is False


def test_linking_compares_with_the_newest_recent_queries_and_encodes_each_text_once(tmp_path, embedder):
    embedder.encode(["warm up"])
    queries = [f"How many loaves did Ana bake on day {i}?" for i in range(12)]
    first_log = EventLog(tmp_path / "lancedb")  # no linking: 12 stored events of one user
    ids = [first_log.log(event(q, at=T0 + timedelta(seconds=i))) for i, q in enumerate(queries)]
    first_log.close()
    log = EventLog(tmp_path / "lancedb", embedder=embedder, follow_up_recent=3)
    retry = log.log(event(queries[-1], at=T0 + timedelta(minutes=1)))
    again = log.log(event(queries[-1], at=T0 + timedelta(minutes=2)))
    rows = {r["event_id"]: r for r in log.events().to_dicts()}
    linker = log._follow_ups
    log.close()
    # The user's stored window held 12 queries: only the newest 3 were read and encoded, and the
    # repeated text of the two new events was encoded once (3 + 0: it is one of those 3).
    assert linker.encoded == 3
    assert (rows[retry]["follow_up_of"], rows[again]["follow_up_of"]) == (ids[-1], retry)
    assert len(linker._recent["u1"]) == 3


def test_the_same_client_user_under_two_tokens_is_two_users(follow_log):
    from narrative_mirror.events.record import tenant_user

    ana = follow_log.log(event("Where does Ana work?", user=tenant_user("ana-laptop", "u1")))
    cy = follow_log.log(event("Where does Ana work?", user=tenant_user("cy", "u1"), at=T0 + timedelta(minutes=1)))
    rows = {r["event_id"]: r for r in follow_log.events().to_dicts()}
    assert (rows[ana]["user_id"], rows[cy]["user_id"]) == ("ana-laptop/u1", "cy/u1")
    assert rows[cy]["follow_up_of"] is None and rows[ana]["satisfied"] is None
