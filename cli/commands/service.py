"""Commands of the HTTP service: serve, and its API tokens."""

from __future__ import annotations

from cli.session import build_memory, runner_for


def cmd_serve(args) -> dict:
    from api.access import load_tokens
    from api.app import check_host, create_app, serve
    from resources import runtime

    tokens = load_tokens(args.tokens) if args.tokens else None
    check_host(args.host, tokens is not None)  # before the build, not after it
    with runner_for(args) as runner:  # the home is free again while serving
        keys, report = build_memory(runner)
    unavailable = {key: message for key, message in {**report.problems, **report.failures}.items() if key}
    for line in runner.problems:
        runner.progress(f"skipped: {line}")
    retriever = runtime.retriever(runner.resource("lancedb").get(), runner.resource("embedder").get())
    event_log = runtime.event_log(retriever)  # where `ask` logs too
    access = (f"token file {args.tokens}" if tokens is not None
              else "open API: answers only requests addressed to localhost, 127.0.0.1 or [::1]")
    served = [k for k in keys if k not in unavailable]
    not_served = f"; not served: {', '.join(sorted(unavailable))} (see /api/health)" if unavailable else ""
    runner.progress(f"serving {len(served)} of {len(keys)} chats on http://{args.host}:{args.port} "
                    f"({access}; Ctrl-C stops){not_served}")
    app = create_app(retriever, event_log, runner.resource("llm").get(), unavailable=unavailable, tokens=tokens)
    serve(app, host=args.host, port=args.port)
    return {"served": served}


def cmd_token(args) -> dict:
    """Create or revoke an API token of `serve --tokens FILE` (the file keeps only its hash)."""
    from api.access import add_token, remove_token

    if args.action == "add":
        if not args.chat:
            raise ValueError("token add: --chat PATTERN is required (a chat key or glob, repeatable)")
        secret = add_token(args.tokens, args.name, args.chat)
        return {"tokens": str(args.tokens), "name": args.name, "chats": args.chat, "token": secret,
                "note": "shown once: only its hash is stored"}
    if not remove_token(args.tokens, args.name):
        raise ValueError(f"{args.tokens}: no token named {args.name!r}")
    return {"tokens": str(args.tokens), "removed": args.name}
