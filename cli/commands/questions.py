"""Commands that ask the memory: ask and search (one chat, a comma list, a glob or --all), arc and
trace (one chat)."""

from __future__ import annotations

import sys

from cli.server_client import NeedsLocalRun, through_server
from narrative_mirror.safe_text import terminal_safe


def _chat_sources(args) -> dict:
    """The data folder's chats (and the home's live chats), by key."""
    from cli.session import chat_sources

    return chat_sources(args)[2]


def _chosen_chats(args, memory, sources: dict) -> list[str]:
    """The chats ``--chat`` (a key, a comma list, globs) or ``--all`` names; a glob that matches
    no chat is bad input (exit 2)."""
    if getattr(args, "all", False):
        if args.chat:
            raise ValueError("give --chat or --all, not both")
        return memory.select("*", sources)
    if not args.chat:
        raise ValueError("--chat is required (a chat key, a comma-separated list, a glob such as 'slack_*'), or --all")
    return memory.select(args.chat, sources)


def _fresh_memory(args, memory, chats: list[str], sources: dict) -> dict[str, str]:
    """Make sure the chats' memory is built and fresh. Cheap when it is: a freshness stamp
    (cli/stamp.py) is compared without starting Dagster; otherwise Dagster rebuilds what is
    stale, with progress, and the stamps are renewed. Of several chats, those that cannot be
    built are left out: {chat: why}; one such chat alone is an error."""
    from cli import stamp

    home = memory.home.root
    stale = [chat for chat in chats if sources.get(chat) is None or not stamp.is_fresh(home, chat, sources[chat].path)]
    if not stale:
        return {}
    if getattr(args, "served", None) is not None:  # a build's progress belongs on the caller's terminal
        raise NeedsLocalRun(f"the memory of {', '.join(stale)} is stale: it needs a build")
    report = memory.build(stale)
    left_out = {
        chat: str(report.problems.get(chat) or report.failures.get(chat))
        for chat in stale
        if chat in report.problems or chat in report.failures
    }
    if len(left_out) == len(chats):
        chat = chats[0]
        if chat in report.problems:
            raise ValueError(report.problems[chat])
        raise RuntimeError(f"the memory of {chat} could not be built: {report.failures[chat]}")
    return left_out


def _memory_for(args, several: bool = False):
    """(the chats asked about, their ``Memory``) over the chats' fresh memory, without loading
    Dagster when fresh. Without ``several`` exactly one chat (arc, trace)."""
    from cli.session import memory_of

    memory = memory_of(args)
    if not several and (getattr(args, "all", False) or memory.is_several(args.chat)):
        raise ValueError(f"{args.command} answers about one chat: give --chat KEY (ask and search take several)")
    sources = _chat_sources(args)
    chats = _chosen_chats(args, memory, sources) if several else [args.chat]
    left_out = _fresh_memory(args, memory, chats, sources)
    args.left_out = [f"{chat} left out: {' '.join(why.split())}" for chat, why in left_out.items()]
    return [chat for chat in chats if chat not in left_out], memory


def cmd_ask(args) -> dict:
    if (result := through_server(args)) is not None:  # before the heavy imports: the server has them
        return result
    from narrative_mirror.agent.contract import answer_json

    chats, memory = _memory_for(args, several=True)
    mode = "oneshot" if args.oneshot else "agent"
    with memory:  # writes the queued event before the process ends
        answer, event_id = memory.ask(chats, args.question, args.profile, mode=mode, user_id=args.user)
    # The answer's JSON as POST /api/ask returns it (agent/contract.py answer_json).
    return answer_json(answer, memory.clocks(), event_id=event_id) | (
        {"warnings": args.left_out} if args.left_out else {}
    )


def cmd_search(args) -> dict:
    """The merged search of the chats (``Memory.search``): the k best messages, each naming its
    chat, as ``GET /api/memory/search`` lists hits."""
    if (result := through_server(args)) is not None:
        return result
    from narrative_mirror.chat_time import stamp_messages

    chats, memory = _memory_for(args, several=True)
    merged = memory.search(chats, args.query, args.k)
    hits = [
        {
            "chat": h.chat,
            "id": h.hit.local_id,
            "speaker": h.hit.speaker,
            "text": h.hit.text,
            "timestamp": h.hit.timestamp.isoformat() if h.hit.timestamp else None,
            "score": round(h.score, 6),
        }
        for h in merged.hits
    ]
    zones = stamp_messages(hits, memory.clocks(), chats[0])
    return {
        "query": args.query,
        "chats": chats,
        "count": len(merged.hits),
        "hits": hits,
        "time_zones": zones,
        "timings_ms": {k: round(v, 3) for k, v in merged.timings_ms.items()},
        **({"warnings": args.left_out} if args.left_out else {}),
    }


def cmd_arc(args) -> dict:
    if (result := through_server(args)) is not None:
        return result
    from narrative_mirror.agent.contract import answer_json

    _, memory = _memory_for(args)
    answer = memory.arc(args.chat, args.question, args.profile)
    ids = list(dict.fromkeys(lid for phase in answer.phases for lid in phase.evidence))
    # The phases hold ids; people read the messages: each with its author and date.
    messages = [
        {
            "id": m.local_id,
            "speaker": m.speaker,
            "text": m.text,
            "timestamp": m.timestamp.isoformat() if m.timestamp else None,
        }
        for m in memory.messages(args.chat, ids)
    ]
    return answer_json(answer, memory.clocks(), evidence_messages=messages)


def cmd_trace(args) -> dict:
    if (result := through_server(args)) is not None:
        return result

    _, memory = _memory_for(args)
    say = getattr(args, "say", None) or (lambda line: print(line, file=sys.stderr, flush=True))

    def follow(node: str, lines: list[str]) -> None:  # the agent's nodes as they run
        for line in lines or [f"{node}: -"]:
            say(terminal_safe(f"[{node}] {line.removeprefix(node + ': ')}"))

    answer = memory.trace(args.chat, args.question, args.profile, on_step=follow)
    trace = answer.trace
    out = {"route": answer.route, **trace.model_dump()}
    if args.gold:
        from narrative_mirror.metrics import attribute_losses

        gold = [g.strip() for g in args.gold.split(",") if g.strip()]
        out["gold"] = attribute_losses(
            gold, [c.id for c in trace.candidates], [r.id for r in trace.reranked][:10], [f.id for f in trace.final]
        )
    return out
