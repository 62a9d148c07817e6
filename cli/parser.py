"""The command line's arguments: ``build_parser`` wires each subcommand to its command."""

from __future__ import annotations

import argparse
from pathlib import Path

from cli.commands.adapt import add_adapt_parser
from cli.commands.baseline import cmd_baseline
from cli.commands.building import cmd_build, cmd_demo, cmd_eval, cmd_ingest, cmd_protocol
from cli.commands.chats import cmd_chats
from cli.commands.forget import add_forget_parser
from cli.commands.live import add_live_parsers
from cli.commands.operations import cmd_backfill_test, cmd_compare_run, cmd_experiments, cmd_maintain
from cli.commands.questions import cmd_arc, cmd_ask, cmd_search, cmd_trace
from cli.commands.service import cmd_serve, cmd_token

DESCRIPTION = "The ``narrative-mirror`` command: the asset graph for people and scripts without the UI."


def export_args(p) -> None:
    """How chat exports in the data folder are read; given once, remembered for the folder."""
    from narrative_mirror.exports import FORMATS

    p.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="read every chat export of the folder with this reader (default: detected from the content)",
    )
    p.add_argument(
        "--tz",
        default=None,
        help="time zone of exports that write local times (WhatsApp, Signal, old Telegram), "
        "e.g. Europe/Berlin (default: the machine's zone; recorded per chat)",
    )
    order = p.add_mutually_exclusive_group()
    order.add_argument(
        "--day-first",
        dest="day_first",
        action="store_const",
        const=True,
        default=None,
        help="WhatsApp dates whose order the file leaves open are day/month",
    )
    order.add_argument(
        "--month-first",
        dest="day_first",
        action="store_const",
        const=False,
        help="WhatsApp dates whose order the file leaves open are month/day",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="narrative-mirror", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)

    def data_args(p):
        p.add_argument(
            "--data",
            type=Path,
            default=None,
            help="folder of chat files (default: NM_DATA_DIR, else the packaged demo chats)",
        )
        p.add_argument(
            "--arcs",
            type=Path,
            default=None,
            help="folder of <chat>.arcs.json (default: NM_ARCS_DIR, the data folder, or <data>_arcs)",
        )
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument("--verbose", action="store_true", help="Dagster's log and tracebacks on stderr")
        export_args(p)

    p = sub.add_parser(
        "chats", help="list the chats of the data folder: participants, messages, dates, built or not (and why)"
    )
    data_args(p)
    p.set_defaults(func=cmd_chats)

    p = sub.add_parser("ingest", help="register chat files and materialize messages, gold QA, ARC cases")
    data_args(p)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser(
        "build", help="ingest (if needed) and materialize all layers and the index; only stale work is redone"
    )
    data_args(p)
    p.add_argument(
        "--repair",
        action="store_true",
        help="check everything stored in full (every parquet file read, every index table counted, "
        "full-text indexes) and rebuild what is damaged, and build again the chats whose build "
        "failed before; --json lists what was found and repaired",
    )
    p.set_defaults(func=cmd_build)
    p = sub.add_parser("eval", help="build what is stale, evaluate a split (QA + ARC), print its metrics")
    data_args(p)
    p.add_argument("--split", choices=["train", "test", "all"], required=True)
    p.add_argument("--allow-test", action="store_true", help="required for any run that touches a test chat file")
    p.add_argument(
        "--profile",
        choices=["fast", "balanced", "deep"],
        default=None,
        help="agent profile (default: config/evaluation.toml)",
    )
    p.set_defaults(func=cmd_eval)

    def question_args(p, several: bool = False, profile: bool = True):
        data_args(p)
        if several:
            p.add_argument(
                "--chat",
                default=None,
                help="the chat's key (its file stem), a comma-separated list, or a glob such as 'slack_*'",
            )
            p.add_argument("--all", action="store_true", help="every chat of the data folder")
        else:
            p.add_argument("--chat", required=True, help="partition key of the chat file (its file stem)")
        if profile:
            p.add_argument("--profile", choices=["fast", "balanced", "deep"], default="balanced")

    p = sub.add_parser("ask", help="answer a question about one chat or several: Answer / Evidence / Unknowns")
    question_args(p, several=True)
    p.add_argument("question")
    p.add_argument("--oneshot", action="store_true", help="the deprecated one-shot path, for comparison")
    p.add_argument("--user", default="anonymous", help="user id recorded in the retrieval event")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("search", help="the k best messages of one chat or several, each naming its chat")
    question_args(p, several=True, profile=False)
    p.add_argument("-k", type=int, default=10, help="how many messages (default 10)")
    p.add_argument("query")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("arc", help="tell a story of one chat as chronological phases with evidence ids")
    question_args(p)
    p.add_argument("question")
    p.set_defaults(func=cmd_arc)

    p = sub.add_parser("trace", help="the three debug checkpoints (candidates, after rerank, final selection)")
    question_args(p)
    p.add_argument("question")
    p.add_argument("--gold", default="", help="comma-separated gold ids: say where each was lost")
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser(
        "serve",
        help="HTTP search API: GET /api/memory/search, POST /api/ask (loopback by default); "
        "the command line's questions of this home go through it while it runs",
    )
    data_args(p)
    p.add_argument(
        "action",
        nargs="?",
        choices=["stop", "status"],
        default=None,
        help="stop: stop the home's server (SIGTERM, then wait); status: what it serves and since when",
    )
    p.add_argument(
        "--background",
        action="store_true",
        help="start detached (output in NM_HOME/logs/serve.log); returns once it answers",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--tokens", type=Path, default=None, help="API token file (`token add`); required to serve beyond loopback"
    )
    p.add_argument("--ask-running", type=int, default=4, help="asks at work at once per token (open API: per address)")
    p.add_argument("--ask-queued", type=int, default=8, help="asks waiting beyond those per token; more get 429")
    p.add_argument(
        "--search-running", type=int, default=2, help="searches at work at once per token (open API: per address)"
    )
    p.add_argument("--search-queued", type=int, default=6, help="searches waiting beyond those per token; more get 429")
    p.add_argument(
        "--request-timeout",
        type=float,
        default=10.0,
        help="seconds a client has to send a whole request (head and body); slower ones are disconnected",
    )
    p.add_argument("--keep-alive", type=int, default=5, help="seconds an idle connection is kept between requests")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser(
        "maintain",
        help="compact the LanceDB tables, update their full-text indexes, drop old versions; "
        "remove recall runs and retrieval events older than retention.toml's keep_days",
    )
    data_args(p)
    p.set_defaults(func=cmd_maintain)

    p = sub.add_parser("token", help="add or remove an API token of `serve --tokens FILE` (scoped to chats)")
    p.add_argument("action", choices=["add", "remove"])
    p.add_argument("--tokens", type=Path, required=True, help="the token file (created if missing)")
    p.add_argument("--name", required=True, help="who or what the token is for")
    p.add_argument("--chat", action="append", default=[], help="chat key or glob the token may use (repeatable)")
    p.add_argument(
        "--rights",
        default="read",
        help="comma-separated: read, add, forget, replace (a live chat "
        "replacing a chat file's chat; add does not imply it) (default: read)",
    )
    p.add_argument(
        "--expires",
        default=None,
        help="refuse the token from then on: a duration (12h, 30d) or a "
        "UTC time (2026-12-31T00:00:00Z); default: never",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_token)

    p = sub.add_parser("compare-run", help="before/after rerank of a recall-run file (average top-3 score lift)")
    p.add_argument("run_file", type=Path)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_compare_run)

    p = sub.add_parser("experiments", help="show the experiment log; --csv FILE exports it")
    p.add_argument("--csv", type=Path, default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_experiments)

    p = sub.add_parser("baseline", help="show the regression checks' baselines, or pin the latest evaluations as them")
    p.add_argument("action", choices=["show", "pin"])
    p.add_argument("--chat", action="append", default=[], help="chat file (partition key); repeatable; default: all")
    p.add_argument("--asset", choices=["qa_eval", "arc_eval"], default=None, help="default: both")
    data_args(p)
    p.set_defaults(func=cmd_baseline)

    p = sub.add_parser(
        "backfill-test", help="print (or --launch) the Dagster backfill evaluating exactly the test files"
    )
    data_args(p)
    p.add_argument("--launch", action="store_true", help="submit it to the Dagster instance in NM_HOME")
    p.set_defaults(func=cmd_backfill_test)

    p = sub.add_parser(
        "protocol", help="the agentic-RAG design's protocol: train questions under fast/balanced/deep, adoption gate"
    )
    data_args(p)
    p.set_defaults(func=cmd_protocol)

    p = sub.add_parser("demo", help="the main job: build and evaluate the packaged demo chats offline")
    data_args(p)
    p.set_defaults(func=cmd_demo)
    add_live_parsers(sub)
    add_forget_parser(sub)
    add_adapt_parser(sub)
    return parser
