"""The ``narrative-mirror`` command: the asset graph for people and scripts without the UI.

Readable output for people (progress on stderr), one JSON object on stdout with ``--json``,
always, with ``problems`` (bad input: one line per file naming the field) and ``failures``.
Exit codes: 0 ok, 2 bad input (an argument, a chat/ARC/config file), 1 anything else failed,
130 stopped by Ctrl-C or SIGTERM (the run in progress is marked canceled, no further one starts),
141 the reader of stdout went away (``| head -1``: no traceback). Each problem, failure and
warning line is at most ``safe_text.MAX_LINE_CHARS`` long, saying how long it was.
Good files are processed whatever the bad ones do; tracebacks only with ``--verbose`` (and in
the Dagster run logs).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from cli.commands.forget import finish_unfinished_forgets
from cli.parser import build_parser
from cli.printers import print_human
from cli.server_client import NeedsLocalRun
from narrative_mirror.safe_text import clip_line, terminal_safe
from resources import environment

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a tool its reader left


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def execute(args) -> tuple[dict, bool]:
    """Run the parsed command: (its result with ``problems`` and ``failures``, whether a signal
    stopped it). Bad input becomes a problem, any other error a failure (``--verbose`` raises)."""
    verbose = getattr(args, "verbose", False)
    stopped = False
    try:
        if getattr(args, "served", None) is None:  # a server finished them when it started
            finish_unfinished_forgets()  # a forget a process left half done is finished before the home is used
        result = args.func(args)
    except NeedsLocalRun:  # in the server: the caller runs the command itself
        raise
    except (FileNotFoundError, ValueError) as exc:  # bad input: an argument, a file, a config value
        if verbose:
            raise
        result = {"problems": [_one_line(exc)]}
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the runner marked its run canceled
        result = {"failures": ["stopped by a signal before the command finished"]}
        stopped = True
    except Exception as exc:
        if verbose:
            raise
        result = {"failures": [f"{type(exc).__name__}: {_one_line(exc)} (--verbose shows the traceback)"]}
    for key in ("problems", "failures", "warnings"):  # each line bounded, on the terminal and in --json
        if key in result:
            result[key] = [clip_line(line) for line in result[key]]
    result.setdefault("problems", [])
    result.setdefault("failures", [])
    return result, stopped


def served_commands() -> tuple[dict, Callable]:
    """What a running server answers for the command line (cli/command_server.py): the served
    commands' functions by name, and ``execute``, how it runs one."""
    from cli.command_server import SERVED_COMMANDS

    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")  # noqa: SLF001 - argparse has no public way
    functions = {name: sub.get_default("func") for name, sub in subparsers.choices.items() if name in SERVED_COMMANDS}
    return functions, execute


def main(argv: list[str] | None = None) -> int:
    environment.hand_to_library()  # before any command: the library reads NM_HOME / NM_CONFIG_DIR through it
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # `serve --background` starts itself again
    args.served_commands = served_commands  # `serve` answers the command line with them
    result, stopped = execute(args)
    problems, failures = result["problems"], result["failures"]
    for line in result.get("warnings", []):
        print(f"narrative-mirror {args.command}: warning: {terminal_safe(line)}", file=sys.stderr)
    for line in problems + failures:
        print(f"narrative-mirror {args.command}: {terminal_safe(line)}", file=sys.stderr)
    if args.json:
        print(json.dumps(result, default=str))
    elif set(result) - {"problems", "failures", "warnings"}:
        print_human(args.command, result)
    if stopped:
        return 130
    return 1 if failures else 2 if problems else 0


def run() -> None:
    """The console script: ``main``, then exit without tearing the interpreter down.

    Everything is written and closed by then (stores, event log, Dagster instance); unwinding
    torch, LanceDB and Dagster module state would add about a second to every command.
    """
    import os

    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (`| head -1`): stop quietly, as Unix tools do
        code = EXIT_BROKEN_PIPE
    try:
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    os._exit(code)


if __name__ == "__main__":
    run()
