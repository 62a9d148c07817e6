"""``narrative-mirror forget``: live messages forgotten everywhere under NM_HOME (by id, author,
UTC time range, or the whole chat), with what was removed per store; and the finishing of
forgets a process left half done, before any command uses the home."""

from __future__ import annotations


def add_forget_parser(sub) -> None:
    """Register ``forget`` on the command line's subparsers."""
    p = sub.add_parser(
        "forget",
        help="forget messages of a live chat for good: its log, the index, layers, retrieval "
        "events, recall runs, Dagster's records, logs and old index versions; "
        "--json says what was removed per store",
    )
    p.add_argument("--chat", required=True, help="the live chat")
    p.add_argument("--id", action="append", default=None, help="a message id (as `add` answered it); repeatable")
    p.add_argument("--author", default=None, help="every message of this author (with --since/--until: in that range)")
    p.add_argument("--since", default=None, help="messages at or after this UTC time (ISO 8601)")
    p.add_argument("--until", default=None, help="messages before this UTC time (ISO 8601)")
    p.add_argument("--all", action="store_true", help="the whole chat")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_forget)


def selection_of(args) -> dict:
    """The messages the flags name, as ``Memory.forget`` takes them."""
    from narrative_mirror.live.log import utc_time

    ranged = [name for name in ("author", "since", "until") if getattr(args, name) is not None]
    if sum([bool(args.id), bool(ranged), args.all]) != 1:
        raise ValueError(
            "name the messages: --id X, or --author A and/or --since T / --until T, or --all"
            + (f" (--{ranged[0]} goes with neither --id nor --all)" if ranged else "")
        )
    since = utc_time(args.since, "--since") if args.since is not None else None
    until = utc_time(args.until, "--until") if args.until is not None else None
    if args.id:
        return {"ids": tuple(args.id)}
    if args.all:
        return {"everything": True}
    return {"author": args.author, "since": since, "until": until}


def cmd_forget(args) -> dict:
    from cli.server_client import through_server
    from cli.session import memory_of

    if (result := through_server(args)) is not None:
        return result
    report = memory_of(args).forget(args.chat, **selection_of(args))
    if report is None:
        raise ValueError(
            f"live chat {args.chat!r} has no message with that id or in that selection"
            if not args.all
            else f"no live chat {args.chat!r}"
        )
    return report


def finish_unfinished_forgets() -> list[dict]:
    """Finish what a forget interrupted (a journal left under ``<NM_HOME>/live/forgetting``);
    one ``stat`` when there is none."""
    from resources import runtime

    return runtime.memory().finish_forgets()
