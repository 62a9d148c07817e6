"""Commands of the HTTP service: serve, and its API tokens."""

from __future__ import annotations

from cli.session import build_memory, not_built, outcome, runner_for


def cmd_serve(args) -> dict:
    from cli.commands.serve_control import control

    if (result := control(args)) is not None:  # stop, status, --background: before the server's imports
        return result
    import functools

    from api.access import load_tokens
    from api.app import check_host, create_app, serve
    from api.connections import bounded_protocol
    from api.limits import AskLimits, SearchLimits
    from api.live import mount_live
    from api.readiness import warm_up
    from narrative_mirror.keys import find_chat_files
    from resources import runtime

    tokens = load_tokens(args.tokens) if args.tokens else None
    check_host(args.host, tokens is not None)  # before the build, not after it
    # settings checked before the build, not after it
    limits = AskLimits(running=args.ask_running, queued=args.ask_queued)
    search_limits = SearchLimits(running=args.search_running, queued=args.search_queued)
    bounded_protocol(args.request_timeout)
    if args.keep_alive < 1:
        raise ValueError(f"--keep-alive must be >= 1 second, got {args.keep_alive}")
    with runner_for(args) as runner:  # the home is free again while serving
        keys, report = build_memory(runner)
    unavailable = not_built(report, keys)
    served = [key for key in keys if key not in unavailable]
    for line in runner.problems:
        runner.progress(f"skipped: {line}")
    for line in outcome(runner)["warnings"]:  # a data folder without its ARC cases
        runner.progress(f"warning: {line}")
    retriever = runtime.retriever(runner.resource("lancedb").get(), runner.resource("embedder").get())
    event_log = runtime.event_log(retriever)  # where `ask` logs too
    access = (
        f"token file {args.tokens}"
        if tokens is not None
        else "open API: answers only requests addressed to localhost, 127.0.0.1 or [::1]"
    )
    for key, why in unavailable.items():
        runner.progress(f"not serving {key}: {why}")
    if others := sorted(set(retriever.chat_files()) - set(keys)):
        # Chats built from another data folder, or under a key an older version gave a chat.
        runner.progress(
            f"also serving {len(others)} chats of this home's index that are not in {runner.data_dir}: "
            f"{', '.join(others)} (built from another folder or under an older key name; "
            "a home of its own per data folder, NM_HOME=..., holds only that folder's chats)"
        )
    runner.progress(
        f"warming up, then serving {serving_count(served, unavailable, runner.problems)} "
        f"on http://{args.host}:{args.port} ({access}; Ctrl-C stops)"
    )
    app = create_app(
        retriever,
        event_log,
        runner.resource("llm").get(),
        unavailable=unavailable,
        tokens=tokens,
        ask_limits=limits,
        search_limits=search_limits,
        warm_up=functools.partial(warm_up, retriever, served),
        home=runtime.home(),
    )
    mount_live(app, app.state.api, runtime.live_memory(retriever))
    app.state.chat_sources.update({key: path.name for key, path in find_chat_files(runner.data_dir)[0].items()})
    commands = command_socket(app, retriever, event_log, runner, args, served, unavailable)
    try:
        serve(app, host=args.host, port=args.port, request_timeout_s=args.request_timeout, keep_alive_s=args.keep_alive)
    except KeyboardInterrupt:  # uvicorn stops on Ctrl-C / SIGTERM, then raises it again: stopping is the normal end
        pass
    finally:
        commands.close()
    return {"url": f"http://{args.host}:{args.port}", "served": served, "not_served": unavailable}


def command_socket(app, retriever, event_log, runner, args, served: list[str], unavailable: dict):
    """The command line's way into this process (cli/command_server.py), started now."""
    from cli.command_server import CommandServer, Served, server_info
    from cli.commands.serve_control import running_server
    from resources import environment

    if (other := running_server(environment.nm_home())) is not None:
        # Two `serve` processes may share a home (each serves HTTP); the first keeps the command line.
        runner.progress(f"the command line keeps answering through the home's first server (pid {other['pid']})")
        return _NoCommandSocket()

    warm = Served(retriever, runner.resource("llm").get(), event_log, app.state.live, app.state.forgetting)
    arcs = args.arcs.resolve() if args.arcs else None
    info = server_info(f"http://{args.host}:{args.port}", runner.data_dir, arcs, served, unavailable)
    commands = CommandServer(environment.nm_home(), warm, info, *args.served_commands())
    commands.start()
    runner.progress(f"command line answered on {commands.path}")
    return commands


class _NoCommandSocket:
    def close(self) -> None:
        pass


def serving_count(served: list[str], unavailable: dict[str, str], skipped: list[str]) -> str:
    """What ``serve`` serves out of everything it found: the chats built, those that are not (named),
    and the files or channels no chat could be read from (their lines are printed above)."""
    found = len(served) + len(unavailable) + len(skipped)
    line = f"{len(served)} of {found} chat files ({', '.join(served) or 'none'})"
    if unavailable:
        line += f"; not serving {', '.join(unavailable)}"
    if skipped:
        line += f"; {len(skipped)} unreadable, skipped (the 'skipped:' lines above)"
    return line


def cmd_token(args) -> dict:
    """Create or revoke an API token of `serve --tokens FILE` (the file keeps only its hash)."""
    from api.access import add_token, expiry, remove_token

    if args.action == "add":
        if not args.chat:
            raise ValueError("token add: --chat PATTERN is required (a chat key or glob, repeatable)")
        rights = [right.strip() for right in args.rights.split(",") if right.strip()]
        expires = expiry(args.expires) if args.expires else None
        secret = add_token(args.tokens, args.name, args.chat, rights, expires)
        return {
            "tokens": str(args.tokens),
            "name": args.name,
            "chats": args.chat,
            "rights": rights,
            "token": secret,
            "expires": expires,
            "note": "shown once: only its hash is stored",
        }
    if not remove_token(args.tokens, args.name):
        raise ValueError(f"{args.tokens}: no token named {args.name!r}")
    return {"tokens": str(args.tokens), "removed": args.name}
