"""The web inspector served by ``serve`` beside the JSON API (same process, same tokens): plain
server-rendered HTML (Jinja2, autoescaped) under a strict content policy (``guard.PAGE_CSP``: only
this site's own scripts, styles and images), one small script shipped in ``static/``, nothing
fetched from anywhere else.

- ``/chats``: the served chats (participants, messages, sessions, dates, source);
- ``/chats/{chat}``: the transcript, session dividers, L1 blocks as bands that open and close,
  L2 threads; every message has a stable link ``/chats/{chat}#{id}`` (``?hl=ID,ID`` marks some);
- ``/chats/{chat}/ask?q=...``: an ask as ``POST /api/ask`` answers it (claims and their checks,
  evidence highlighted among its neighbours, unknowns); the URL reproduces it;
- ``/chats/{chat}/story?q=...``: the arc: phases on a time line, each with its evidence in context;
- ``/evaluation``, ``/evaluation/{chat}?category=&lost=``, ``/evaluation/{chat}/{q}``: what the
  evaluation stored, per chat and split, gold against returned ids and the stage that lost each;
  recall@10 per chat across the experiment log;
- ``/login``: with tokens, sets the token as an HttpOnly SameSite=Strict cookie (``login``).

One job per module: ``store`` (reads), ``evaluation`` (the evaluation views' data), ``plot``
(SVG geometry), ``login`` (who is looking), ``routes`` (the pages).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

from api.pages.routes import Pages, add_routes
from api.service import MemoryApi

STATIC = Path(__file__).parent / "static"


def mount_pages(app: FastAPI, api: MemoryApi, home: Path | None = None) -> Pages:
    """Add the inspector's pages to ``app``. ``home``: the state folder whose stored layers,
    evaluations and experiment log the pages read (default NM_HOME, resolved now). The chat
    files' paths, when known, go in ``app.state.chat_sources`` (chat key -> file)."""
    pages = Pages(api, Path(home) if home is not None else api.home.root)
    pages.sources = getattr(app.state, "chat_sources", None) or pages.sources
    app.state.chat_sources = pages.sources  # the same dict: `serve` fills it after create_app
    api.clocks = pages.store.clocks  # answers' times in each chat's zone, as the pages show them
    app.mount("/static", StaticFiles(directory=STATIC), name="inspector-static")
    add_routes(app, pages)
    return pages
