from __future__ import annotations

from datetime import datetime

import pytest

from narrative_mirror.events.record import RetrievalEvent, approx_tokens


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"method": "magic"}, "method 'magic'"),
        ({"created_at": datetime(2026, 1, 1)}, "created_at must be a timezone-aware"),
        ({"user_id": ""}, "user_id"),
        ({"returned_ids": ["D1:1", 3]}, "returned_ids"),
        ({"citation_confidence": 1.5}, "citation_confidence"),
        ({"latency_ms": -1}, "latency_ms"),
        ({"counts_per_source": {"bm25": -1}}, "counts_per_source"),
    ],
)
def test_invalid_events_are_rejected_naming_the_field(fields, message):
    defaults = {"user_id": "u", "chat_file": "c", "query": "q", "returned_ids": [], "method": "hybrid"}
    with pytest.raises(ValueError, match=message):
        RetrievalEvent(**{**defaults, **fields})


def test_approx_tokens():
    assert approx_tokens(["abcd", "abcde", ""]) == 1 + 2 + 0


def test_tenant_user_prefixes_the_namespace():
    from narrative_mirror.events.record import tenant_user

    assert tenant_user("ana", "u1") == "ana/u1"
    assert tenant_user(None, "anonymous") == "local/anonymous"
    assert tenant_user("ana", "cy/u1") == "ana/cy/u1"  # a client's "/" stays inside its own namespace
    with pytest.raises(ValueError, match="namespace"):
        tenant_user("ana/x", "u1")
