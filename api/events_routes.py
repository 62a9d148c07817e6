"""``POST /api/events/{event_id}/citations``: the second phase of the retrieval-events design's two-phase flow, for
clients that answer themselves: they searched (phase one logged the event: its id is the search's
``meta.event_id``, an ask's ``event_id``) and now report which messages their answer cited.

A token marks only the events of its own namespace (the user ids ``<token name>/...``; the open
API: ``local/...``); any other event, stored or not, is the same 404, so ids cannot be probed.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from fastapi import Depends, FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from api.access import TokenEntry
from api.requests import ApiError, bad_request, bounded_body
from narrative_mirror.events.record import MAX_ID_CHARS, tenant_user
from narrative_mirror.events.table import find_event

if TYPE_CHECKING:
    from api.service import MemoryApi
    from narrative_mirror.events.writer import EventLog

MAX_CITED = 200
CITATION_FIELDS = ("cited_ids", "confidence")


class CitationReport(BaseModel):
    """The body: the ids the answer cited and, optionally, how sure the client is (one value for
    all of them, or one per cited id); without it an explicit report counts as certain (1.0)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cited_ids: list[str] = Field(max_length=MAX_CITED)
    confidence: float | list[float] | None = None


def _check(report: CitationReport) -> tuple[list[str], list[float]]:
    cited = list(dict.fromkeys(report.cited_ids))
    if any(not i or len(i) > MAX_ID_CHARS for i in cited):
        raise ApiError(400, "cited_ids", f"cited_ids must hold non-empty ids of <= {MAX_ID_CHARS} characters")
    values = (
        report.confidence
        if isinstance(report.confidence, list)
        else [1.0 if report.confidence is None else report.confidence] * len(cited)
    )
    if len(values) != len(cited) or not all(0.0 <= v <= 1.0 for v in values):
        raise ApiError(400, "confidence", "confidence must be a number in [0, 1] or one such number per cited id")
    return cited, [float(v) for v in values]


def mount_event_routes(app: FastAPI, api: MemoryApi, event_log: EventLog) -> None:
    @app.post("/api/events/{event_id}/citations")
    async def report_citations(event_id: str, request: Request, who: TokenEntry | None = Depends(api.principal)):
        body = await bounded_body(request)
        try:
            cited, per_id = _check(CitationReport.model_validate_json(body))
        except ValidationError as exc:
            raise bad_request(exc.errors(), "field", CITATION_FIELDS) from None
        namespace = tenant_user(who and who.name, "")
        loop = asyncio.get_running_loop()
        event = None
        if 0 < len(event_id) <= MAX_ID_CHARS:
            await loop.run_in_executor(None, event_log.flush)  # an event logged a moment ago is stored
            event = await loop.run_in_executor(None, find_event, event_log.uri, event_id, event_log.storage_options)
        if event is None or not event["user_id"].startswith(namespace):
            raise ApiError(404, None, "no such retrieval event")
        event_log.mark_cited(event_id, cited, per_id=per_id)
        return {
            "event_id": event_id,
            "cited_ids": cited,
            "cited_confidences": per_id,
            "citation_confidence": sum(per_id) / len(per_id) if per_id else None,
        }
