"""The inspector's pages, each a server-rendered HTML answer to one GET: the chats, a chat's
transcript, an ask, a story (arc), and the evaluation (overview, a chat's questions, one
question). Every page checks the token and the chat the way the JSON API does (``MemoryApi``)
and answers errors as pages that never name a chat."""

from __future__ import annotations

import asyncio
import functools
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from api.access import TokenEntry
from api.guard import PAGE_CSP
from api.pages import evaluation as ev
from api.pages.login import LoginNeeded, login_location, page_principal, safe_target, sign_in, sign_out
from api.pages.plot import history_plot, timeline
from api.pages.store import PageStore, Transcript
from api.requests import ApiError, AskRequest
from api.service import MemoryApi
from narrative_mirror import regressions
from narrative_mirror.agent.profiles import DEFAULT_PROFILE, profiles
from narrative_mirror.index_store import validate_chat_file
from narrative_mirror.reactions import reaction_words

TEMPLATES = Path(__file__).parent / "templates"
PAGE_USER = "inspector"  # the user id of the retrieval events an ask page logs
MAX_MARKS = 50


class PageError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def _when(value: datetime | None, with_time: bool = True) -> str:
    if value is None:
        return ""
    return value.strftime("%a %-d %b %Y %H:%M" if with_time else "%-d %b %Y")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.filters["day"] = functools.partial(_when, with_time=False)
    env.filters["pct"] = lambda v: "–" if v is None else f"{v:.3f}"
    env.filters["reaction"] = lambda r: reaction_words(*r)
    return env


class Pages:
    """The page routes over one ``MemoryApi`` (its tokens, chat checks, pools and asks)."""

    def __init__(self, api: MemoryApi, home: Path, sources: dict[str, str] | None = None):
        self.api, self.store = api, PageStore(api.retriever, home)
        self.sources = sources if sources is not None else {}
        self.env = _environment()

    # -- helpers ------------------------------------------------------------------------------------
    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = self.env.get_template(name).render(
            signed_in=self.api.tokens is not None, path=request.url.path, **context
        )
        return HTMLResponse(
            html, status_code=status, headers={"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-store"}
        )

    async def _run(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self.api.search_pool, functools.partial(fn, *args))

    async def who(self, request: Request) -> TokenEntry | None:
        return page_principal(self.api, request)

    async def chat(self, request: Request, chat: str) -> tuple[TokenEntry | None, str, Transcript]:
        """The principal, the checked chat and its transcript (403 / 404 / 503 pages as the API)."""
        who = await self.who(request)
        try:
            validate_chat_file(chat)
        except ValueError:
            raise PageError(400, "that is not a chat key") from None
        try:
            await self.api.check_chat(chat, who)  # the API's own rule: scope, then existence
        except ApiError as exc:
            raise PageError(exc.status, exc.message) from None
        return who, chat, await self._run(self.store.transcript, chat)

    async def visible(self, who: TokenEntry | None) -> list[str]:
        chats = [c for c in await self._run(self.store.chats) if c not in self.api.unavailable]
        return who.visible(chats) if who is not None else chats

    @staticmethod
    def marks(raw: str | None, transcript: Transcript) -> list[str]:
        ids = [part.strip() for part in (raw or "").split(",") if part.strip()][:MAX_MARKS]
        return transcript.known(ids)

    # -- pages --------------------------------------------------------------------------------------
    async def chats(self, request: Request) -> HTMLResponse:
        who = await self.who(request)
        rows = []
        for chat in await self.visible(who):
            transcript = await self._run(self.store.transcript, chat)
            messages = transcript.messages
            rows.append(
                {
                    "chat": chat,
                    "participants": transcript.participants,
                    "messages": transcript.said,
                    "sessions": transcript.sessions,
                    "blocks": len(transcript.blocks),
                    "threads": len(transcript.threads),
                    "first": messages[0].timestamp if messages else None,
                    "last": messages[-1].timestamp if messages else None,
                    "source": self.sources.get(chat, ""),
                }
            )
        failed = {c: r for c, r in sorted(self.api.unavailable.items()) if who is None or who.allows(c)}
        return self.render(request, "chats.html", rows=rows, failed=failed)

    async def transcript(self, request: Request, chat: str, hl: str | None = None) -> HTMLResponse:
        _, chat, transcript = await self.chat(request, chat)
        return self.render(
            request,
            "transcript.html",
            chat=chat,
            t=transcript,
            marks=set(self.marks(hl, transcript)),
            blocks={b.block_id: b for b in transcript.blocks},
        )

    async def ask(
        self, request: Request, chat: str, q: str | None = None, profile: str = DEFAULT_PROFILE
    ) -> HTMLResponse:
        who, chat, transcript = await self.chat(request, chat)
        context: dict[str, Any] = {
            "chat": chat,
            "q": q or "",
            "profile": profile,
            "profiles": sorted(profiles()),
            "times": transcript.times,
            "answer": None,
            "suggestions": self._suggestions(chat, "gold_qa", "question"),
        }
        if q and q.strip():
            try:
                body = AskRequest(chat=chat, question=q, profile=profile, user_id=PAGE_USER)
            except ValidationError as exc:
                field = str(exc.errors()[0]["loc"][0]) if exc.errors()[0]["loc"] else "question"
                raise PageError(400, f"{field}: {exc.errors()[0]['msg']}") from None
            answered = await self.api.answer_for(request, who, body)  # as POST /api/ask: limits, pools, deadline
            if answered is None:  # the browser went away
                return HTMLResponse("", status_code=499)
            answer, event_id = answered
            evidence = transcript.known([e.id for e in answer.evidence])
            context.update(
                answer=answer,
                event_id=event_id,
                evidence=evidence,
                excerpts=transcript.excerpts(evidence),
                marks=set(evidence),
            )
        return self.render(request, "ask.html", **context)

    async def story(
        self, request: Request, chat: str, q: str | None = None, profile: str = DEFAULT_PROFILE
    ) -> HTMLResponse:
        who, chat, transcript = await self.chat(request, chat)
        context: dict[str, Any] = {
            "chat": chat,
            "q": q or "",
            "profile": profile,
            "profiles": sorted(profiles()),
            "times": transcript.times,
            "story": None,
            "suggestions": self._suggestions(chat, "arc_cases", "query"),
        }
        if q and q.strip():
            try:
                body = AskRequest(chat=chat, question=q, profile=profile)
            except ValidationError as exc:
                raise PageError(400, f"question: {exc.errors()[0]['msg']}") from None
            story = await asyncio.get_running_loop().run_in_executor(
                self.api.ask_pool,
                functools.partial(self.api.memory.using(llm=None).arc, chat, body.question, body.profile),
            )
            phases = []
            for phase in story.phases:
                ids = transcript.known(phase.evidence)
                times = [transcript.messages[transcript.row_of[i]].timestamp for i in ids]
                phases.append(
                    {
                        "phase": phase,
                        "ids": ids,
                        "excerpts": transcript.excerpts(ids, 1),
                        "start": min(times) if times else None,
                        "end": max(times) if times else None,
                    }
                )
            spans = [(p["phase"].name, p["start"], p["end"]) for p in phases if p["start"] is not None]
            context.update(story=story, phases=phases, line=timeline(spans))
        return self.render(request, "story.html", **context)

    def _suggestions(self, chat: str, asset: str, column: str) -> list[str]:
        split = self.store.stored("split", chat)
        if split is None or not split.height or split["split"][0] != "train":  # held-out questions stay unseen
            return []
        frame = self.store.stored(asset, chat)
        return frame[column].to_list()[:8] if frame is not None and column in frame.columns else []

    async def evaluation(self, request: Request) -> HTMLResponse:
        who = await self.who(request)
        visible = await self.visible(who)
        all_chats = await self._run(self.store.chats)
        rows = [r for r in [await self._run(ev.chat_evaluation, self.store, c) for c in visible] if r is not None]
        records, series = await self._run(
            ev.recall_history, self.store, visible, who is None or len(visible) == len(all_chats)
        )
        evaluated = {r.chat for r in rows}
        no_gold = [c for c in visible if c not in evaluated and not await self._run(ev.gold_questions, self.store, c)]
        standing = [
            regressions.describe(e)
            for e in (await self._run(regressions.read, self.store.home)).values()
            if e["partition"] in visible
        ]
        return self.render(
            request,
            "evaluation.html",
            rows=rows,
            plot=history_plot(series, len(records)),
            records=len(records),
            outcome_words=ev.OUTCOME_WORDS,
            no_gold=no_gold,
            standing=standing,
        )

    async def evaluation_chat(
        self, request: Request, chat: str, category: str | None = None, lost: str | None = None
    ) -> HTMLResponse:
        _, chat, transcript = await self.chat(request, chat)
        chosen = int(category) if category and category.isdigit() else None
        stage = lost if lost in ev.OUTCOMES else None
        summary = await self._run(ev.chat_evaluation, self.store, chat)
        rows = await self._run(ev.questions, self.store, chat, chosen, stage)
        gold = await self._run(ev.gold_questions, self.store, chat)
        return self.render(
            request,
            "evaluation_chat.html",
            chat=chat,
            summary=summary,
            rows=rows,
            gold=gold,
            categories=await self._run(ev.categories, self.store, chat),
            category=chosen,
            lost=stage,
            outcomes=ev.OUTCOMES,
            outcome_words=ev.OUTCOME_WORDS,
            t=transcript,
        )

    async def evaluation_question(self, request: Request, chat: str, key: str) -> HTMLResponse:
        _, chat, transcript = await self.chat(request, chat)
        row = await self._run(ev.question, self.store, chat, key)
        if row is None:
            raise PageError(404, "no evaluated question has that key")
        shown = transcript.known(list(dict.fromkeys([*row["gold_ids"], *row["returned"]])))
        return self.render(
            request,
            "evaluation_question.html",
            chat=chat,
            row=row,
            t=transcript,
            excerpts=transcript.excerpts(transcript.known(row["gold_ids"]), 1),
            shown=set(shown),
            outcome_words=ev.OUTCOME_WORDS,
        )

    async def login(self, request: Request, next: str | None = None) -> Response:
        if self.api.tokens is None:
            return RedirectResponse(safe_target(next), status_code=303)
        return self.render(request, "login.html", target=safe_target(next))


def add_routes(app: FastAPI, pages: Pages) -> None:
    """Routes and error pages of ``pages`` on ``app``."""

    async def page_error(request: Request, exc: PageError) -> HTMLResponse:
        return pages.render(request, "error.html", status=exc.status, code=exc.status, message=exc.message)

    async def login_needed(request: Request, exc: LoginNeeded) -> Response:
        return RedirectResponse(login_location(exc.target), status_code=303)

    app.add_exception_handler(PageError, page_error)
    app.add_exception_handler(LoginNeeded, login_needed)
    app.add_api_route("/", lambda: RedirectResponse("/chats", status_code=303), methods=["GET"])
    app.add_api_route("/chats", pages.chats, methods=["GET"])
    app.add_api_route("/chats/{chat}", pages.transcript, methods=["GET"])
    app.add_api_route("/chats/{chat}/ask", pages.ask, methods=["GET"])
    app.add_api_route("/chats/{chat}/story", pages.story, methods=["GET"])
    app.add_api_route("/evaluation", pages.evaluation, methods=["GET"])
    app.add_api_route("/evaluation/{chat}", pages.evaluation_chat, methods=["GET"])
    app.add_api_route("/evaluation/{chat}/{key}", pages.evaluation_question, methods=["GET"])
    app.add_api_route("/login", pages.login, methods=["GET"])

    async def login_post(request: Request) -> Response:
        return await sign_in(pages.api, request)

    app.add_api_route("/login", login_post, methods=["POST"])
    app.add_api_route("/logout", sign_out, methods=["POST"])
