"""The search endpoint of ``MemoryApi`` (``GET /api/memory/search``): one chat's recorded search, or
several chats merged, in the search pool within the client's search slots; the retrieval event,
the search-run record and the recall-run path (relative: no server path leaves the API)."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from fastapi import Request
from fastapi.responses import JSONResponse

from api.across_chats import search_several
from api.limits import ARRIVAL, client_key
from api.requests import SearchQuery
from api.responses import hit_json, without_paths
from narrative_mirror.across_chats import DEFAULT_MERGE, MergedSearch
from narrative_mirror.events.record import VARIANT_METHODS, RetrievalEvent, approx_tokens, tenant_user
from narrative_mirror.home import Home
from narrative_mirror.safe_text import clip_line, terminal_safe
from narrative_mirror.search_evidence import SEARCH_RUNS_DIR, record_search

if TYPE_CHECKING:
    from api.access import TokenEntry

log = logging.getLogger(__name__)
RECALL_RUNS = Home(Path()).recall_runs.name  # as responses name it, relative to the home


class SearchEndpoint:
    """``MemoryApi``'s search (a mixin: it uses the service's pools, limiter, memory and event log)."""

    async def search(self, request: Request, who: TokenEntry | None, params: SearchQuery) -> JSONResponse:
        """A search in one of its client's search slots (429 when they and its queue are full)."""
        async with self.search_limiter.slot(client_key(who, request.scope)):
            return await self._search(request, who, params)

    async def _search(self, request: Request, who: TokenEntry | None, params: SearchQuery) -> JSONResponse:
        arrival = request.scope.get(ARRIVAL, time.monotonic())
        chats = await self.check_chats(params.chat, params.chats, who)
        loop = asyncio.get_running_loop()
        if params.chats is not None:
            merged, event_id = await loop.run_in_executor(
                self.search_pool,
                functools.partial(
                    search_several, self.memory, chats, params, arrival, who and who.name, self.runs_root
                ),
            )
            return JSONResponse(self._several_json(params, merged, event_id))
        chat = chats[0]
        recorded = await loop.run_in_executor(
            self.search_pool,
            functools.partial(
                self.memory.recorded_search,
                chat,
                params.q,
                params.k,
                **params.ranking(),
                root=self.runs_root,
                tiers=params.tiers,
            ),
        )
        hits = recorded.result.hits
        event_id = self.event_log.log(
            RetrievalEvent(
                user_id=tenant_user(who and who.name, params.user_id),
                session_id=params.session_id,
                chat_file=chat,
                query=params.q,
                returned_ids=[h.local_id for h in hits],
                method=VARIANT_METHODS[recorded.params["variant"]],
                counts_per_source=dict(Counter(source for h in hits for source in h.sources)),
                latency_ms=(time.monotonic() - arrival) * 1000,
                tokens_in_context=approx_tokens([h.text for h in hits]),
            )
        )
        meta = {
            "chat": chat,
            "query": params.q,
            "count": len(hits),
            "params": recorded.params,
            "reranker": "hybrid_score",
            "event_id": event_id,
            "timings_ms": recorded.result.timings_ms,
        }
        hits_out = [{**hit_json(h), "chat": chat} for h in hits]
        errors = [recorded.run_error] if recorded.run_error else []
        search_run = None
        try:  # under NM_HOME: search_runs/YYYYMMDD/run_<ms>.json, and the day's recall cards
            search_run = await loop.run_in_executor(
                self.search_pool,
                functools.partial(
                    record_search,
                    params.q,
                    chat,
                    recorded.params,
                    event_id,
                    hits_out,
                    self.retriever.chat(chat).tiers,
                    recorded.run_path,
                    root=self.runs_root,
                ),
            )
        except OSError as exc:
            errors.append(f"could not write the search-run record: {exc}")
        if errors:
            log.warning("memory search: %s", clip_line(terminal_safe("; ".join(errors))))
            meta["evidence_error"] = without_paths("; ".join(errors))
        if recorded.run_path:  # never the server's absolute path
            meta["recall_run_path"] = str(PurePosixPath(RECALL_RUNS, *recorded.run_path.parts[-2:]))
        return JSONResponse(
            {
                "hits": hits_out,
                "meta": meta,
                "evidence_path": str(PurePosixPath(SEARCH_RUNS_DIR, *search_run.parts[-2:])) if search_run else None,
            }
        )

    @staticmethod
    def _several_json(params: SearchQuery, merged: MergedSearch, event_id: str) -> dict:
        """A search over several chats as JSON: the search's shape, each hit naming its chat with its
        ``merged_score``; ``meta.chats`` the chats searched, one recall-run record per chat."""
        first = next(iter(merged.results.values()))
        errors = {chat: without_paths(r.run_error) for chat, r in merged.results.items() if r.run_error}
        meta = {
            "chats": merged.chats,
            "query": params.q,
            "count": len(merged.hits),
            "params": {**{k: v for k, v in first.params.items() if k not in ("chat", "tiers")}, "merge": DEFAULT_MERGE},
            "reranker": "hybrid_score",
            "event_id": event_id,
            "timings_ms": {
                **merged.timings_ms,
                "chats": {c: r.result.timings_ms.get("total") for c, r in merged.results.items()},
            },
        }
        if errors:
            log.warning("memory search: %s", clip_line(terminal_safe("; ".join(errors.values()))))
            meta["evidence_error"] = "; ".join(errors.values())
        return {
            "hits": [{**hit_json(h.hit), "chat": h.chat, "merged_score": h.score} for h in merged.hits],
            "meta": meta,
            "evidence_paths": {
                chat: str(PurePosixPath(RECALL_RUNS, *r.run_path.parts[-2:]))
                for chat, r in merged.results.items()
                if r.run_path
            },
        }
