"""One command's session with the asset graph: its runner, the chat memory it builds, and what
went wrong, as every command reports it."""

from __future__ import annotations

import gc
from collections.abc import Iterable
from pathlib import Path

INGEST = ["messages", "gold_qa", "arc_cases", "split"]
LAYERS = ["message_embeddings", "l1_topics", "l15_signals", "l2_threads", "lancedb_index"]
EVAL = ["qa_eval", "arc_eval"]


def runner_for(args):
    from cli.runner import Runner

    return Runner(
        data_dir=args.data,
        arcs_dir=getattr(args, "arcs", None),
        verbose=getattr(args, "verbose", False),
        import_options=import_options(args),
    )


def import_options(args):
    """How the command's flags say chat exports are read (None: no flag given)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from narrative_mirror.exports.folder import ImportOptions

    fmt, tz, day_first = getattr(args, "format", None), getattr(args, "tz", None), getattr(args, "day_first", None)
    if (fmt, tz, day_first) == (None, None, None):
        return None
    if tz is not None:
        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"--tz {tz!r}: not a time zone name (e.g. Europe/Berlin, America/New_York, UTC)") from None
    return ImportOptions(format=fmt, tz=tz, day_first=day_first)


def chat_sources(args):
    """(the data folder, how its exports are read, its chats and the home's live chats by key,
    problem lines) as ``build`` finds them, without Dagster."""
    from narrative_mirror.exports.folder import remembered_options
    from narrative_mirror.home import Home
    from narrative_mirror.live.source import find_chats
    from resources import environment

    data_dir = args.data.resolve() if args.data else environment.data_dir()
    home = environment.nm_home()
    options = remembered_options(home, data_dir, import_options(args), environment.machine_zone())
    sources, problems = find_chats(data_dir, options, Home(home).import_scans, home=home)
    return data_dir, options, sources, problems


def arcs_line(data_dir: Path, arcs_dir: Path | None, formats: Iterable[str] = ("native",)) -> str | None:
    """One line when ``data_dir`` has no ARC cases to go with it (None when it has): without
    it, ARC cases would be dropped without a word. A folder of app exports only (``formats`` of
    its chats) is nobody's evaluation set: it has none to miss."""
    from narrative_mirror.exports.folder import NATIVE

    if arcs_dir is None:
        if NATIVE not in set(formats):
            return None
        return (
            f"no ARC cases for {data_dir}: no *.arcs.json in it and no {data_dir.name}_arcs folder beside it "
            "(--arcs or NM_ARCS_DIR names one); ARC evaluation has no cases"
        )
    if not arcs_dir.is_dir():
        return f"ARC folder {arcs_dir} does not exist; ARC evaluation has no cases"
    return None


def outcome(runner, *reports) -> dict:
    """What went wrong across a command's reports, as the lines the command prints."""
    chat_data = runner.resource("chat_data")
    formats = [source.format for source in chat_data.chat_sources()[0].values()]
    arcs = arcs_line(chat_data.data_path(), chat_data.arcs_path(), formats)
    problems = list(runner.problems)
    failures, warnings = [], [arcs] if arcs else []
    for report in reports:
        problems += [line for line in report.problems.values() if line not in problems]
        failures += [f"{key or '(all)'}: {message}" for key, message in report.failures.items()]
        warnings += report.warnings
    return {"problems": problems, "failures": failures, "warnings": warnings}


def build_memory(runner, chats: list[str] | None = None, full_check: bool = False):
    """Ingest and layers of every chat file (or of ``chats``), then a freshness stamp per chat so
    that questions about it skip Dagster until something changes (cli/stamp.py). Stored outputs
    are checked first (cli/integrity.py; ``full_check``: every file and table read whole, and the
    chats whose build failed before are tried again) and what is damaged is rebuilt. Returns (all chat files, the BuildReport)."""
    from cli import integrity, stamp

    # Versions taken before Dagster observes them: a file edited during the build is never stamped fresh.
    files = runner.resources["chat_data"].chat_files()
    before = {k: stamp.sources_now(runner.state.root, p) for k, p in files.items() if chats is None or k in chats}
    keys = runner.register()
    # Asked for, but this home holds a chat of that key from another folder: left out, saying why
    # (a problem of that chat, never "no such --chat": the chats may come from --all).
    refused = {chat: runner.elsewhere[chat] for chat in chats or () if chat in runner.elsewhere}
    unknown = sorted(set(chats or ()) - set(keys) - set(refused))
    if unknown:
        raise ValueError(f"--chat {unknown[0]!r}: no such chat file in {runner.data_dir} (known: {', '.join(keys)})")
    targets = keys if chats is None else [chat for chat in chats if chat not in refused]
    findings = integrity.check(runner, targets, INGEST + LAYERS, full=full_check)
    repair = integrity.prepare(runner, findings, INGEST + LAYERS, keys)
    # The check leaves database objects whose collection runs Python callbacks; collected during
    # a run, a Ctrl-C/SIGTERM raised inside such a callback is lost ("Exception ignored"). Now.
    gc.collect()
    if targets:
        report = runner.materialize(
            INGEST + LAYERS, targets, what="memory", repair=repair, retry_failed=full_check, memory=True
        )
    else:  # every chat asked for was refused: nothing to run (an empty list would mean the unpartitioned assets)
        from cli.runner import BuildReport

        report = BuildReport()
    report.problems.update(refused)
    report.repairs = [f.as_json() for f in findings]
    for key in targets:
        if key in before and key not in report.failed:
            stamp.write(runner.state.root, key, before[key], integrity.recorded_rows(runner.instance, key))
    if report.ran:
        tidy_index(runner)
    return keys, report


# Every chat write leaves a small file in each LanceDB table: past this many, a build compacts
# them itself rather than waiting for the nightly maintenance job.
MAX_FRAGMENTS = 64


def tidy_index(runner) -> None:
    store = runner.resource("lancedb").get()
    if any(table["fragments"] > MAX_FRAGMENTS for table in store.health().values()):
        runner.progress(f"LanceDB: more than {MAX_FRAGMENTS} files in a table: compacting")
        store.maintain()


def partition_rows(report, keys: list[str]) -> dict:
    """Per chat file: the assets this command ran, how many messages it encoded, and the seconds
    its steps took, split into encoding and the rest."""
    rows = {}
    for key in keys:
        total, encode = report.partition_seconds.get(key, 0.0), report.encode_seconds.get(key, 0.0)
        rows[key] = {
            "ran": report.ran.get(key, []),
            "encoded_messages": report.encoded_messages.get(key, 0),
            "seconds": {"encode": round(encode, 3), "other": round(max(total - encode, 0.0), 3)},
        }
    return rows


def not_built(report, keys: list[str]) -> dict[str, str]:
    """The chat files of ``keys`` whose memory this command could not build, and why (one line each)."""
    why = {**report.problems, **report.failures}
    return {key: why.get(key, "its build failed") for key in keys if key in report.failed}


def memory_of(args):
    """The command's ``Memory``: the server's warm objects for a served command, else this
    process's, whose builder builds with the command's data folder and flags."""
    from resources import runtime

    served = getattr(args, "served", None)
    if served is not None:
        return runtime.memory(
            retriever=served.retriever,
            llm=served.llm,
            event_log=served.event_log,
            live=served.live,
            forgetting=served.forgetting,
        )

    def build(home, chats):
        with runner_for(args) as runner:
            return build_memory(runner, chats)[1]

    return runtime.memory(builder=build)


def build_chats(home, chats: list[str] | None = None):
    """``Memory.build``'s default builder (``front_door.DEFAULT_BUILDER``): the chats of NM_DATA_DIR
    built into ``home``, which must be this process's NM_HOME (the Dagster instance and resources
    are configured from the environment). Returns the BuildReport."""
    from cli.runner import Runner
    from resources import environment

    if Path(home.root).resolve() != environment.nm_home():
        raise ValueError(
            f"Memory.build: {home.root} is not this process's home (NM_HOME={environment.nm_home()}); "
            f"build it with NM_HOME={home.root} narrative-mirror build, or pass builder="
        )
    with Runner() as runner:
        return build_memory(runner, chats)[1]
