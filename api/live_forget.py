"""The forget routes: ``DELETE /api/chats/{chat}/messages/{id}`` (one message),
``DELETE /api/chats/{chat}/messages?author=..&since=..&until=..`` (by author and/or UTC time
range) and ``DELETE /api/chats/{chat}`` (the whole live chat), each answered with what was
removed per store (``narrative_mirror.live.forget``). A token needs the ``forget`` right in the
chat's scope; every chat outside it gets the same 403, whether it exists or not.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse

from api.access import TokenEntry
from api.requests import ApiError
from api.service import MemoryApi
from narrative_mirror import Home
from narrative_mirror.live.forget import Selection
from narrative_mirror.live.log import MessageError, utc_time

if TYPE_CHECKING:
    from narrative_mirror.live.forget import Forgetting
    from narrative_mirror.live.memory import LiveMemory
from resources import environment


def forgetting_for(api: MemoryApi, live: LiveMemory) -> Forgetting:
    """The forgets of a serving process: its home is the live folder's parent; its own spooled
    events are stored before the events table is redacted."""
    memory = api.memory.using(
        home=Home(live.log.root.parent),
        live=live,
        runs_root=api.runs_root,
        dagster_elsewhere=environment.dagster_pg_url_env() is not None,
    )
    return memory.forgetting


def mount_forget(app: FastAPI, api: MemoryApi, live: LiveMemory) -> None:
    """Add the forget routes to ``app``; unfinished forgets of the home are finished first."""
    forgetting = forgetting_for(api, live)
    forgetting.finish_unfinished()
    pool = ThreadPoolExecutor(1, thread_name_prefix="nm-forget")  # one forget at a time: each sweeps the home
    app.state.forgetting = forgetting

    async def run(chat: str, who: TokenEntry | None, selection: Selection) -> JSONResponse:
        if who is not None and not who.allows(chat, "forget"):
            raise ApiError(403, "chat", "this API token may not forget messages of that chat")
        try:
            report = await asyncio.get_running_loop().run_in_executor(pool, forgetting.forget, chat, selection)
        except MessageError as exc:
            raise ApiError(400, exc.field, exc.reason) from None
        if report is None:
            raise ApiError(404, "chat", "no live message of that chat matches")
        if report["whole_chat"]:
            api.store_state.forget(chat)  # gone on purpose: health does not miss it
        return JSONResponse(report)

    def selection(**given) -> Selection:
        try:
            return Selection(**given)
        except MessageError as exc:
            raise ApiError(400, exc.field, exc.reason) from None

    @app.delete("/api/chats/{chat}/messages/{message_id}")
    async def forget_message(chat: str, message_id: str, who: TokenEntry | None = Depends(api.principal)):
        return await run(chat, who, selection(ids=(message_id,)))

    @app.delete("/api/chats/{chat}/messages")
    async def forget_messages(
        chat: str,
        author: str | None = None,
        since: str | None = None,
        until: str | None = None,
        who: TokenEntry | None = Depends(api.principal),
    ):
        if who is not None and not who.allows(chat, "forget"):  # before the parameters are judged
            raise ApiError(403, "chat", "this API token may not forget messages of that chat")
        if author is None and since is None and until is None:
            raise ApiError(400, "author", "name the messages: author, since and/or until (or DELETE the chat)")
        try:
            times = {k: utc_time(v, k) if v is not None else None for k, v in (("since", since), ("until", until))}
        except MessageError as exc:
            raise ApiError(400, exc.field, exc.reason) from None
        return await run(chat, who, selection(author=author, **times))

    @app.delete("/api/chats/{chat}")
    async def forget_chat(chat: str, who: TokenEntry | None = Depends(api.principal)):
        return await run(chat, who, selection(everything=True))
