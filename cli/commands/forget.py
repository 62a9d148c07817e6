"""``narrative-mirror forget``: live messages forgotten everywhere under NM_HOME (by id, author,
UTC time range, or the whole chat), with what was removed per store; and the finishing of
forgets a process left half done, before any command uses the home."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when a forget runs: every command calls finish_unfinished_forgets
    from narrative_mirror.live.forget import Forgetting, Selection


def add_forget_parser(sub) -> None:
    """Register ``forget`` on the command line's subparsers."""
    p = sub.add_parser("forget", help="forget messages of a live chat for good: its log, the index, layers, retrieval "
                                      "events, recall runs, Dagster's records, logs and old index versions; "
                                      "--json says what was removed per store")
    p.add_argument("--chat", required=True, help="the live chat")
    p.add_argument("--id", action="append", default=None, help="a message id (as `add` answered it); repeatable")
    p.add_argument("--author", default=None, help="every message of this author (with --since/--until: in that range)")
    p.add_argument("--since", default=None, help="messages at or after this UTC time (ISO 8601)")
    p.add_argument("--until", default=None, help="messages before this UTC time (ISO 8601)")
    p.add_argument("--all", action="store_true", help="the whole chat")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_forget)


def selection_of(args) -> Selection:
    from narrative_mirror.live.forget import Selection
    from narrative_mirror.live.log import utc_time

    ranged = [name for name in ("author", "since", "until") if getattr(args, name) is not None]
    if sum([bool(args.id), bool(ranged), args.all]) != 1:
        raise ValueError("name the messages: --id X, or --author A and/or --since T / --until T, or --all"
                         + (f" (--{ranged[0]} goes with neither --id nor --all)" if ranged else ""))
    since = utc_time(args.since, "--since") if args.since is not None else None
    until = utc_time(args.until, "--until") if args.until is not None else None
    if args.id:
        return Selection(ids=tuple(args.id))
    if args.all:
        return Selection(everything=True)
    return Selection(author=args.author, since=since, until=until)


def forgetting() -> Forgetting:
    """The home's forgets, outside a serving process (no spool of its own to flush)."""
    from narrative_mirror.live.forget import Forgetting
    from narrative_mirror.live.log import LiveLog
    from resources import environment, runtime

    home = environment.nm_home()
    return Forgetting(LiveLog(home / "live"), runtime.index_from_environment(), home,
                      dagster_elsewhere=environment.dagster_pg_url_env() is not None)


def cmd_forget(args) -> dict:
    from cli.server_client import through_server

    if (result := through_server(args)) is not None:
        return result
    selection = selection_of(args)
    served = getattr(args, "served", None)
    report = (served.forgetting if served is not None else forgetting()).forget(args.chat, selection)
    if report is None:
        raise ValueError(f"live chat {args.chat!r} has no message with that id or in that selection"
                         if not args.all else f"no live chat {args.chat!r}")
    return report


def finish_unfinished_forgets() -> list[dict]:
    """Finish what a forget interrupted (a journal left under ``<NM_HOME>/live/forgetting``);
    one ``stat`` when there is none."""
    from resources import environment

    live = environment.nm_home() / "live"
    if not live.is_dir():
        return []
    from narrative_mirror.live.forget import JOURNAL_FOLDER

    if not any((live / JOURNAL_FOLDER).glob("*.json")):
        return []
    return forgetting().finish_unfinished()
