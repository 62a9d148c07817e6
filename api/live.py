"""The live memory's routes: ``POST /api/chats/{chat}/messages`` adds a batch of messages to a
live chat (``narrative_mirror.live.memory.LiveMemory``), answered once the batch is durable and
searchable (409 when a chat file's chat has that name, unless the body says
``"replace_file_chat": true``; the forget routes: ``api.live_forget``). A token needs the ``add``
right in the chat's scope; every chat outside it gets the same 403, whether it exists or not.
Replacing a chat file's chat takes the ``replace`` right as well: it empties that chat for every
reader and every later build, which adding never implies.
"""

from __future__ import annotations

import asyncio
import functools
import json
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse

from api.access import TokenEntry
from api.live_forget import mount_forget
from api.requests import ApiError
from api.service import MemoryApi
from narrative_mirror.live.log import MessageError
from narrative_mirror.live.memory import FileBackedChat

if TYPE_CHECKING:
    from narrative_mirror.live.memory import LiveMemory

MAX_ADD_BODY_BYTES = 4 * 2**20
ADD_WORKERS = 4  # batches of different chats indexed at once; one chat's batches wait for its lock


async def _json_body(request: Request) -> object:
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_ADD_BODY_BYTES):
        raise ApiError(413, None, f"request body larger than {MAX_ADD_BODY_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_ADD_BODY_BYTES:
            raise ApiError(413, None, f"request body larger than {MAX_ADD_BODY_BYTES} bytes")
    try:
        return json.loads(bytes(body))
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, None, 'the body must be a JSON object: {"messages": [...]}') from None


def mount_live(app: FastAPI, api: MemoryApi, live: LiveMemory) -> None:
    """Add the live routes to ``app`` (whose memory service is ``api``)."""
    pool = ThreadPoolExecutor(ADD_WORKERS, thread_name_prefix="nm-live")
    app.state.live = live
    api.before_read = live.refresh  # messages another process added are read before answering
    mount_forget(app, api, live)

    @app.post("/api/chats/{chat}/messages")
    async def add_messages(chat: str, request: Request, who: TokenEntry | None = Depends(api.principal)):
        if who is not None and not who.allows(chat, "add"):
            raise ApiError(403, "chat", "this API token may not add messages to that chat")
        body = await _json_body(request)
        if not isinstance(body, dict) or "messages" not in body or set(body) - {"messages", "replace_file_chat"}:
            raise ApiError(
                400,
                "messages",
                "the body must be a JSON object with the field messages (and optionally replace_file_chat)",
            )
        replace = body.get("replace_file_chat", False)
        if not isinstance(replace, bool):
            raise ApiError(400, "replace_file_chat", "must be true or false")
        if replace and who is not None and not who.allows(chat, "replace"):
            raise ApiError(
                403,
                "replace_file_chat",
                "this API token may not replace a chat file's chat (it needs the replace right)",
            )
        add = functools.partial(live.add, chat, body["messages"], replace_file_chat=replace)
        try:
            result = await asyncio.get_running_loop().run_in_executor(pool, add)
        except FileBackedChat as exc:
            raise ApiError(409, exc.field, exc.reason) from None
        except MessageError as exc:
            raise ApiError(400, exc.field, exc.reason) from None
        return JSONResponse(result.to_json())
