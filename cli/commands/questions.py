"""Commands that ask one chat's memory: ask, arc, trace."""

from __future__ import annotations

import sys

from cli.session import build_memory, runner_for
from narrative_mirror.agent.contract import answer_json
from narrative_mirror.safe_text import terminal_safe


def _fresh_memory(args) -> None:
    """Make sure the chat's memory is built and fresh. Cheap when it is: a freshness stamp
    (cli/stamp.py) is compared without starting Dagster; otherwise Dagster rebuilds what is
    stale, with progress, and the stamp is renewed."""
    from cli import stamp
    from cli.session import import_options
    from narrative_mirror.exports.folder import remembered_options
    from narrative_mirror.live.source import find_chats
    from resources import environment

    data_dir = args.data.resolve() if args.data else environment.data_dir()
    home = environment.nm_home()
    options = remembered_options(home, data_dir, import_options(args), environment.machine_zone())
    source = find_chats(data_dir, options, home / "imports" / "scans")[0].get(args.chat)
    path = source.path if source is not None else None
    if path is not None and stamp.is_fresh(home, args.chat, path):
        return
    with runner_for(args) as runner:
        _, report = build_memory(runner, [args.chat])
    if args.chat in report.problems:
        raise ValueError(report.problems[args.chat])
    if args.chat in report.failures:
        raise RuntimeError(f"the memory of {args.chat} could not be built: {report.failures[args.chat]}")


def _memory_for(args):
    """The chat's fresh memory: a retriever and the LLM client (None = offline), built as the
    asset graph's resources build them, without loading Dagster when the memory is fresh."""
    from resources import runtime

    _fresh_memory(args)
    return runtime.retriever(runtime.index_from_environment(), runtime.embedder()), runtime.llm_from_environment()


def cmd_ask(args) -> dict:
    from narrative_mirror.logged_query import ask_logged
    from resources import runtime

    retriever, llm = _memory_for(args)
    event_log = runtime.event_log(retriever)
    try:
        answer, event_id = ask_logged(retriever, args.chat, args.question, args.profile, llm,
                                      "oneshot" if args.oneshot else "agent", event_log, user_id=args.user)
    finally:
        event_log.close()  # writes the queued event before the process ends
    # The answer's JSON as POST /api/ask returns it (agent/contract.py answer_json).
    return answer_json(answer, event_id=event_id)


def cmd_arc(args) -> dict:
    from narrative_mirror import query

    retriever, llm = _memory_for(args)
    answer = query.arc(retriever, args.chat, args.question, profile=args.profile, llm=llm)
    ids = list(dict.fromkeys(lid for phase in answer.phases for lid in phase.evidence))
    # The phases hold ids; people read the messages: each with its author and date.
    messages = [{"id": m.local_id, "speaker": m.speaker, "text": m.text,
                 "timestamp": m.timestamp.isoformat() if m.timestamp else None}
                for m in retriever.messages(args.chat, ids)]
    return answer_json(answer, evidence_messages=messages)


def cmd_trace(args) -> dict:
    from narrative_mirror import query

    retriever, llm = _memory_for(args)
    def follow(node: str, lines: list[str]) -> None:  # the agent's nodes as they run
        for line in lines or [f"{node}: -"]:
            print(terminal_safe(f"[{node}] {line.removeprefix(node + ': ')}"), file=sys.stderr, flush=True)

    answer = query.ask(retriever, args.chat, args.question, profile=args.profile, llm=llm, on_step=follow)
    trace = answer.trace
    out = {"route": answer.route, **trace.model_dump()}
    if args.gold:
        from narrative_mirror.metrics import attribute_losses

        gold = [g.strip() for g in args.gold.split(",") if g.strip()]
        out["gold"] = attribute_losses(gold, [c.id for c in trace.candidates],
                                       [r.id for r in trace.reranked][:10], [f.id for f in trace.final])
    return out
