"""``Memory``: the one object through which the command line, the HTTP API, the benchmarks and
Python users reach a home's memory: which chats it holds, search and ask (one chat or several),
arc and trace, live messages added and forgotten, and chats built.

    from narrative_mirror import Memory

    memory = Memory.open("~/.narrative-mirror")        # a home `narrative-mirror build` filled
    print(memory.chats())
    answer, event_id = memory.ask(["chat_1"], "Where did they travel?", profile="fast")

Its parts (index, embedder, LLM client, event log, live chats) are built when first used, from the
home and the packaged config; an entry point that reads the environment passes its own
(``resources/runtime.memory``). Building chats needs the Dagster layer, which the library never
imports: ``builder`` is a callable the caller passes, or the one named by ``DEFAULT_BUILDER``,
imported only when ``build`` runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from narrative_mirror.home import Home

# The Dagster builder a Memory without one uses: "module:function", function(home, chats) -> report.
DEFAULT_BUILDER = "cli.session:build_chats"


class Asked(NamedTuple):
    """An answer and the id of the retrieval event it left."""

    answer: Any  # narrative_mirror.agent.contract.AgentAnswer
    event_id: str


def _made(part: Any) -> Any:
    """``part`` itself, or what it makes when it is a factory (none of the parts is callable)."""
    return part() if callable(part) else part


class Memory:
    """A home's memory. ``store``, ``embedder``, ``llm``, ``retriever``, ``event_log``, ``live`` and
    ``forgetting`` may be given built (a server's warm objects) or as factories; left out, they are
    built from the home when first used (the index under the home, the embedder on ``device``, no
    LLM: offline). ``home`` None: a memory of given parts only (what needs the home says so)."""

    def __init__(
        self,
        home: Home | str | Path | None,
        *,
        store: Any = None,
        embedder: Any = None,
        llm: Any = None,
        retriever: Any = None,
        event_log: Any = None,
        live: Any = None,
        forgetting: Any = None,
        builder: Callable[[Home, list[str] | None], Any] | None = None,
        device: str = "auto",
        dagster_elsewhere: bool = False,
        runs_root: Path | None = None,
    ):
        self.home = home if isinstance(home, Home) or home is None else Home.at(home)
        self._store, self._embedder, self._llm = store, embedder, llm
        self._retriever, self._event_log, self._live, self._forgetting = retriever, event_log, live, forgetting
        self._owns_event_log = event_log is None
        self.builder, self.device, self.dagster_elsewhere = builder, device, dagster_elsewhere
        self.runs_root = runs_root  # where recall runs are written; None: the home's

    def _home(self) -> Home:
        if self.home is None:
            raise RuntimeError("this Memory was made without a home: give Memory(home, ...) to use its folders")
        return self.home

    @classmethod
    def open(cls, home: str | Path, **parts: Any) -> Memory:
        """The memory of the home at ``home`` (offline unless ``llm=`` is given)."""
        return cls(Home.at(home), **parts)

    # -- parts, built when first used
    @property
    def store(self) -> Any:
        if self._retriever is not None:
            return self._retriever.store
        if self._store is None:
            from narrative_mirror import assembly

            self._store = assembly.index_store(str(self._home().lancedb))
        self._store = _made(self._store)
        return self._store

    @property
    def retriever(self) -> Any:
        if self._retriever is None:
            from narrative_mirror import assembly

            if self._embedder is None:
                self._embedder = assembly.embedder(self._home(), device=self.device)
            self._embedder = _made(self._embedder)
            self._retriever = assembly.retriever(self.store, self._embedder, home=self.home)
        return self._retriever

    @property
    def llm(self) -> Any:
        """The LLM client; None answers offline."""
        self._llm = _made(self._llm)
        return self._llm

    @property
    def event_log(self) -> Any:
        if self._event_log is None:
            from narrative_mirror import assembly

            self._event_log = assembly.event_log(self.retriever, self._home())
        return self._event_log

    @property
    def live(self) -> Any:
        if self._live is None:
            from narrative_mirror import assembly

            self._live = assembly.live_memory(self._home(), self.retriever)
        return self._live

    @property
    def forgetting(self) -> Any:
        """The forgets of live messages. In a serving memory (``live`` given) a forget first stores
        the process's own spooled events and tells its live chats what changed."""
        if self._forgetting is None:
            from narrative_mirror import assembly

            serving: dict[str, Any] = {}
            if self._live is not None:
                log = self._event_log
                serving = {
                    "spool_dir": getattr(log, "spool_dir", None),
                    "flush_events": getattr(log, "flush", None),
                    "on_changed": self._live.on_indexed,
                }
            store = self._live.store if self._live is not None else self.store
            self._forgetting = assembly.forgetting(
                self._home(), store, dagster_elsewhere=self.dagster_elsewhere, runs_root=self.runs_root, **serving
            )
        return self._forgetting

    def using(self, **changes: Any) -> Memory:
        """This memory with some parts or settings replaced (e.g. a retriever that stops an ask whose
        client left, ``llm=None`` for offline, another event log), sharing the others."""
        mine = {
            "retriever": self.retriever,
            "llm": self.llm,
            "event_log": self._event_log,
            "live": self._live,
            "forgetting": self._forgetting,
            "builder": self.builder,
            "device": self.device,
            "dagster_elsewhere": self.dagster_elsewhere,
            "runs_root": self.runs_root,
        }
        home = changes.pop("home", self.home)
        view = Memory(home, **(mine | changes))
        view._owns_event_log = False
        return view

    def close(self) -> None:
        """Write the queued retrieval events (of an event log this memory made) before the process ends."""
        if self._event_log is not None and self._owns_event_log:
            self._event_log.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- what the memory holds
    def chats(self) -> list[str]:
        """The chats of the index, by key."""
        return sorted(self.retriever.chat_files())

    @staticmethod
    def select(
        selector: str | Iterable[str], available: Iterable[str], readable: Callable[[str], bool] | None = None
    ) -> list[str]:
        """The chats of ``available`` (those ``readable``) a selector names (a key, a comma list,
        globs, ``*``); ``NoChatMatches`` for a glob that matches none."""
        from narrative_mirror.across_chats import select_chats

        return select_chats(selector, available, readable) if readable else select_chats(selector, available)

    @staticmethod
    def is_several(selector: str | Iterable[str]) -> bool:
        from narrative_mirror.across_chats import is_several

        return is_several(selector)

    def messages(self, chat: str, ids: Sequence[str]) -> list[Any]:
        """The messages of ``chat`` with these ids (``Hit``s: id, speaker, text, timestamp)."""
        return self.retriever.messages(chat, list(ids))

    def clocks(self) -> Any:
        """Each chat's message times in its own zone, from the home's stored messages layers."""
        from narrative_mirror.chat_time import StoredClocks

        return StoredClocks(self._home().storage)

    # -- questions
    def search(self, chats: Sequence[str], query: str, k: int = 10, **recorded: Any) -> Any:
        """The ``k`` best messages of ``chats`` for ``query``, merged (``across_chats.MergedSearch``:
        ``hits``, each naming its chat). With ``recorded`` options each chat is searched by
        ``recorded_search`` (its ``results`` are then ``RecordedSearch``es)."""
        from narrative_mirror.across_chats import search_chats

        if not recorded:
            return search_chats(self.retriever, list(chats), query, k)
        return search_chats(
            self.retriever,
            list(chats),
            query,
            k,
            search=lambda chat: self.recorded_search(chat, query, k, **recorded),
            hits_of=lambda one: one.result.hits,
            info_of=lambda one: one.result.query_info,
        )

    def recorded_search(self, chat: str, query: str, k: int = 5, **options: Any) -> Any:
        """One chat's search with its recall-run record (``recall_runs.recorded_search``: options
        ``need_fresh``, ``half_life_days``, ``fresh_weight``, ``self_rag``, ``root``, ``variant``,
        ``tiers``)."""
        from narrative_mirror.recall_runs import recorded_search

        if options.get("root") is None:
            options["root"] = self.runs_root if self.runs_root is not None else self._home().recall_runs
        return recorded_search(self.retriever, chat, query, k, **options)

    def ask(
        self,
        chats: Sequence[str],
        question: str,
        profile: str | None = None,
        *,
        mode: str = "agent",
        user_id: str | None = None,
        session_id: str | None = None,
    ) -> Asked:
        """The answer about one chat or several, with the evidence that proves it, and the id of the
        retrieval event it left."""
        from narrative_mirror.across_chats import ask_chats_logged
        from narrative_mirror.agent.profiles import DEFAULT_PROFILE
        from narrative_mirror.logged_query import DEFAULT_USER, ask_logged

        chats = list(chats)
        if not chats:
            raise ValueError("no chat to ask about")
        ask = ask_logged if len(chats) == 1 else ask_chats_logged
        return Asked(
            *ask(
                self.retriever,
                chats[0] if len(chats) == 1 else chats,
                question,
                profile or DEFAULT_PROFILE,
                self.llm,
                mode,
                self.event_log,
                DEFAULT_USER if user_id is None else user_id,
                session_id,
            )
        )

    def arc(self, chat: str, question: str, profile: str | None = None) -> Any:
        """A story question about one chat, answered as chronological phases with evidence ids."""
        from narrative_mirror import query
        from narrative_mirror.agent.profiles import DEFAULT_PROFILE

        return query.arc(self.retriever, chat, question, profile=profile or DEFAULT_PROFILE, llm=self.llm)

    def trace(
        self,
        chat: str,
        question: str,
        profile: str | None = None,
        on_step: Callable[[str, list[str]], None] | None = None,
    ) -> Any:
        """One chat's answer with its trace (candidates, reranked, final); ``on_step(node, lines)``
        follows the agent's nodes as they finish."""
        from narrative_mirror import query
        from narrative_mirror.agent.profiles import DEFAULT_PROFILE

        return query.ask(
            self.retriever, chat, question, profile=profile or DEFAULT_PROFILE, llm=self.llm, on_step=on_step
        )

    # -- live chats
    def add(self, chat: str, messages: Sequence[dict], *, replace_file_chat: bool = False) -> dict:
        """Messages (id, author, text, timestamp, reply_to) added to the live chat ``chat``, durable
        and searchable on return; every message is checked before the first is stored."""
        from narrative_mirror.live.log import MAX_BATCH, parse_batch

        for start in range(0, len(messages), MAX_BATCH):
            parse_batch(messages[start : start + MAX_BATCH])
        ids: list[str] = []
        stored: list[str] = []
        duplicates: list[str] = []
        created = False
        for start in range(0, len(messages), MAX_BATCH):  # each batch durable before the next is read
            result = self.live.add(chat, messages[start : start + MAX_BATCH], replace_file_chat=replace_file_chat)
            ids += result.ids
            stored += result.stored
            duplicates += result.duplicates
            created = created or result.created
        return {
            "chat": chat,
            "added": len(stored),
            "duplicates": len(duplicates),
            "created": created,
            "ids": ids,
            "stored": stored,
        }

    def forget(
        self,
        chat: str,
        *,
        ids: Sequence[str] = (),
        author: str | None = None,
        since: Any = None,
        until: Any = None,
        everything: bool = False,
    ) -> dict | None:
        """Live messages forgotten in every store of the home (by id, author and/or UTC range, or
        the whole chat); what was removed per store, None when nothing matched."""
        from narrative_mirror.live.forget import Selection

        if ids:
            selection = Selection(ids=tuple(ids))
        elif everything:
            selection = Selection(everything=True)
        else:
            selection = Selection(author=author, since=since, until=until)
        return self.forgetting.forget(chat, selection)

    def finish_forgets(self) -> list[dict]:
        """Finish what a forget interrupted (its journal left in the home); one ``stat`` when none was."""
        if not any(self._home().forget_journals.glob("*.json")):
            return []
        return self.forgetting.finish_unfinished()

    # -- building
    def build(self, chats: list[str] | None = None) -> Any:
        """The chats' memory (every chat of the data folder with None) built by the builder."""
        builder = self.builder
        if builder is None:
            module, _, name = DEFAULT_BUILDER.partition(":")
            builder = getattr(importlib.import_module(module), name)
        return builder(self._home(), chats)
