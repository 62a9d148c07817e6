from __future__ import annotations

from datetime import timedelta

from event_factory import T0, event

from narrative_mirror.events.record import EVENT_SCHEMA
from narrative_mirror.events.table import read_events


def test_filters_quote_their_values(events_log):
    events_log.log(event(user="o'brien", chat_file="chat_b"))
    events_log.log(event(user="ana", at=T0 + timedelta(hours=1)))
    assert events_log.events(user_id="o'brien")["chat_file"].to_list() == ["chat_b"]
    assert events_log.events(chat_file="chat_a")["user_id"].to_list() == ["ana"]
    assert events_log.events(since=T0 + timedelta(minutes=30))["user_id"].to_list() == ["ana"]
    assert events_log.events(until=T0 + timedelta(minutes=30))["user_id"].to_list() == ["o'brien"]


def test_events_of_an_empty_log_have_the_schema(events_log, tmp_path):
    frame = events_log.events()
    assert frame.height == 0
    assert frame.columns == EVENT_SCHEMA.names
    assert read_events(tmp_path / "nothing_here").columns == EVENT_SCHEMA.names
