"""``narrative-mirror adapt``: train the embedder's adaptation to the home's chats now (the
``adapted_embedder`` asset of ``adaptation_job``), then say what it trained on and which chats'
stored work its new vectors make stale (re-encoded by the next ``build``)."""

from __future__ import annotations

from pathlib import Path


def add_adapt_parser(sub) -> None:
    """Register ``adapt`` on the command line's subparsers."""
    p = sub.add_parser(
        "adapt",
        help="train the embedder's adaptation to this home's chats now (embedding.toml "
        "[adaptation] on); says what it trained and what became stale",
    )
    p.add_argument(
        "--data",
        type=Path,
        default=None,
        help="folder of chat files (default: NM_DATA_DIR, else the packaged demo chats)",
    )
    p.add_argument(
        "--if-due",
        action="store_true",
        help="train only when the home grew by retrain_growth since the current adaptation",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--verbose", action="store_true", help="Dagster's log and tracebacks on stderr")
    p.set_defaults(func=cmd_adapt)


def cmd_adapt(args) -> dict:
    import dagster as dg

    from cli.session import INGEST, LAYERS, outcome, runner_for
    from narrative_mirror import settings

    if not settings.load_config("embedding").get("adaptation", {}).get("enabled"):
        raise ValueError("the adaptation is off: embedding.toml [adaptation] enabled = true turns it on")
    with runner_for(args) as runner:
        keys = runner.register()
        ingest = runner.materialize(INGEST, keys, what="ingest")
        trained = runner.materialize(
            ["adapted_embedder"],
            None,
            force=True,
            what="adaptation",
            run_config={"ops": {"adapted_embedder": {"config": {"force": not args.if_due}}}},
        )
        event = runner.instance.get_latest_materialization_event(dg.AssetKey("adapted_embedder"))
        meta = {k: v.value for k, v in event.asset_materialization.metadata.items()} if event else {}
        runner.register()  # embedding_config observed again: a new adaptation is a new data version
        stale = runner.plan(LAYERS, keys)
        report = meta.get("report") or {}
        result = {
            "adaptation": meta.get("fingerprint"),
            "retrained": meta.get("retrained"),
            "messages_trained_on": meta.get("messages_trained_on"),
            "pairs": meta.get("pairs"),
            "steps": report.get("steps"),
            "stopped_by": report.get("stopped_by"),
            "held_out_loss": report.get("held_out_loss"),
            "seconds": meta.get("seconds"),
            "stale_chats": len(stale),
            "per_file": {key: {"stale": ", ".join(k.to_user_string() for k in stale[key])} for key in stale},
            **outcome(runner, ingest, trained),
        }
    return result
