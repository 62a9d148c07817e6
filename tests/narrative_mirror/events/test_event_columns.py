"""Seed 001's stored extras: per-cited-id confidences, the query vector, the analysis indexes,
and a table written before they existed read and written without loss."""

from __future__ import annotations

from datetime import timedelta

import lancedb
import pyarrow as pa
import pytest
from event_factory import T0, event

from narrative_mirror.events.record import ADDED_COLUMNS, EVENT_SCHEMA
from narrative_mirror.events.table import TABLE, read_events
from narrative_mirror.events.writer import EventLog


def test_an_older_table_is_upgraded_and_its_rows_kept(tmp_path):
    uri = tmp_path / "lancedb"
    old_schema = pa.schema([f for f in EVENT_SCHEMA if f.name not in ADDED_COLUMNS])
    old_row = {k: v for k, v in event("old question").row().items() if k not in ADDED_COLUMNS}
    lancedb.connect(uri).create_table(TABLE, data=pa.Table.from_pylist([old_row], schema=old_schema))
    assert read_events(uri)["query"].to_list() == ["old question"]  # read before any upgrade: no error

    log = EventLog(uri)
    try:
        new_id = log.log(
            event(
                "new question",
                at=T0 + timedelta(seconds=1),
                cited_ids=["D1:1", "D1:2"],
                citation_confidence=0.6,
                cited_confidences=[0.8, 0.4],
                query_vector=[0.5, -0.25],
            )
        )
        rows = {r["query"]: r for r in log.events().to_dicts()}
    finally:
        log.close()
    assert rows["old question"]["query_vector"] is None and rows["old question"]["cited_confidences"] is None
    new = rows["new question"]
    assert (new["event_id"], new["cited_confidences"], new["query_vector"]) == (new_id, [0.8, 0.4], [0.5, -0.25])
    table = lancedb.connect(uri).open_table(TABLE)
    assert set(table.schema.names) == set(EVENT_SCHEMA.names)
    assert {c for i in table.list_indices() for c in i.columns} >= {"user_id", "created_at"}


def test_indexes_are_created_once_and_a_reopened_log_keeps_them(tmp_path):
    uri = tmp_path / "lancedb"
    for n in range(2):  # the second log finds the indexes and adds none
        log = EventLog(uri)
        log.log(event(f"q{n}", at=T0 + timedelta(seconds=n)))
        log.flush()
        log.close()
    indices = lancedb.connect(uri).open_table(TABLE).list_indices()
    assert sorted(c for i in indices for c in i.columns) == ["created_at", "user_id"]
    assert read_events(uri, user_id="u1")["query"].to_list() == ["q0", "q1"]


def test_mark_cited_per_id_and_citing_nothing_after_the_write(events_log):
    graded, empty = events_log.log(event("a")), events_log.log(event("b", at=T0 + timedelta(seconds=1)))
    events_log.flush()  # both stored: the marks are updates of stored rows
    events_log.mark_cited(graded, ["D1:1", "D1:2"], per_id=[0.9, 0.3])
    events_log.mark_cited(empty, [], 1.0)  # cited nothing: no confidence, and the writer does not stall
    rows = {r["query"]: r for r in events_log.events().to_dicts()}
    assert rows["a"]["cited_ids"] == ["D1:1", "D1:2"]
    assert rows["a"]["cited_confidences"] == [0.9, 0.3]
    assert rows["a"]["citation_confidence"] == pytest.approx(0.6)
    assert (rows["b"]["cited_ids"], rows["b"]["citation_confidence"], rows["b"]["cited_confidences"]) == ([], None, [])
    assert events_log.failures == 0
    assert events_log.state().status == "ok"


def test_confidences_must_match_the_cited_ids():
    with pytest.raises(ValueError, match="cited_confidences"):
        event(cited_ids=["D1:1"], cited_confidences=[0.5, 0.5])
    with pytest.raises(ValueError, match="cited_confidences"):
        event(cited_ids=["D1:1"], cited_confidences=[1.5])


def test_a_redacted_query_loses_its_stored_vector(events_log):
    from narrative_mirror.events.redaction import redact_events

    secret = events_log.log(event("where is the spare key of Ana's flat", query_vector=[0.1, 0.2]))
    kept = events_log.log(event("rye bread", at=T0 + timedelta(seconds=1), query_vector=[0.3, 0.4]))
    events_log.flush()
    assert redact_events(events_log.uri, lambda text: text.replace("spare key", "[forgotten]")) == 1
    rows = {r["event_id"]: r for r in events_log.events().to_dicts()}
    assert rows[secret]["query"] == "where is the [forgotten] of Ana's flat"
    assert rows[secret]["query_vector"] is None  # the vector would still tell the forgotten words
    assert rows[kept]["query_vector"] == pytest.approx([0.3, 0.4])
