"""Whether what Dagster says is materialized is really there and readable, and what to rebuild
when it is not: asked by every command that builds a chat's memory (cli/integrity.py, before the
freshness rule) and by the daemon's ``integrity_sensor`` (jobs/integrity.py).

For each chat it checks, the parquet outputs Dagster recorded exist and are whole (footer magic; ``full``: read
completely), and the LanceDB tables hold the chat's rows (one read of the ``chat_file`` column
per table, against the counts the latest ``lancedb_index`` materialization recorded). A damaged output is set aside, a
table that cannot be read is dropped, and the asset that made it is run again with everything
after it (the command's ``Runner.materialize(repair=...)``, the sensor's run requests), saying why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import dagster as dg

from narrative_mirror.index_store import TABLES
from narrative_mirror.live.source import live_chat_files
from narrative_mirror.storage import frame_problem, set_aside

INDEX_ASSET = "lancedb_index"


@dataclass
class Finding:
    """One damaged output: the chat (None: a whole table), the asset to run again, why, and
    what was done about it before the rebuild."""

    chat: str | None
    asset: str
    reason: str
    table: str | None = None
    action: str = ""

    def as_json(self) -> dict:
        return {
            "chat": self.chat,
            "asset": self.asset,
            "table": self.table,
            "reason": self.reason,
            "action": self.action,
        }


def recorded_rows(instance: dg.DagsterInstance, chat: str) -> dict[str, int]:
    """Rows per table the chat's latest index materialization wrote ({} when none recorded)."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(INDEX_ASSET), asset_partitions=[chat]), limit=1
    ).records
    if not records:
        return {}
    materialization = records[0].asset_materialization
    metadata = {k: v.value for k, v in (materialization.metadata if materialization else {}).items()}
    return {t: int(metadata[f"{t}_rows"]) for t in TABLES if f"{t}_rows" in metadata}


def check(
    instance: dg.DagsterInstance, state, store, chats: Sequence[str], selection: Sequence[str], full: bool = False
) -> list[Finding]:
    """What is damaged among ``selection``'s outputs of ``chats`` (only outputs Dagster says are
    materialized: what was never built is the freshness rule's business). ``state``: the
    ``StateResource`` (where outputs are); ``store``: the ``IndexStore`` (None: no index check)."""
    materialized = {a: instance.get_materialized_partitions(dg.AssetKey(a)) for a in selection}
    findings: list[Finding] = []
    store = store if INDEX_ASSET in selection else None
    broken_tables: dict[str, str] = {}
    if store is not None and full:
        broken_tables = {t: p for t in TABLES if (p := store.table_problem(t))}
    counts: dict[str, dict[str, int]] = {}
    if store is not None:
        for table in TABLES:
            if table not in broken_tables:
                try:
                    counts[table] = store.rows_per_chat(table)
                except (RuntimeError, OSError, ValueError) as exc:
                    broken_tables[table] = f"unreadable ({' '.join(str(exc).split())[:200]})"
    live_chats = live_chat_files(state.root) if store is not None else {}
    for chat in chats:
        for asset in selection:
            if asset == INDEX_ASSET or chat not in materialized[asset]:
                continue
            problem = frame_problem(state.frame_path(asset, chat), full=full)
            if problem:
                findings.append(Finding(chat, asset, f"{asset} output {problem}"))
        if store is not None and chat in materialized[INDEX_ASSET]:
            findings += _index_findings(instance, chat, counts, live=chat in live_chats)
    for table, problem in broken_tables.items():
        findings.append(Finding(None, INDEX_ASSET, f"lancedb table {table} {problem}", table=table))
    if store is not None and full:
        findings += [
            Finding(None, INDEX_ASSET, f"lancedb table {t} full-text index missing", table=t)
            for t in store.missing_text_indexes()
            if t not in broken_tables
        ]
    return findings


def _index_findings(
    instance: dg.DagsterInstance, chat: str, counts: dict[str, dict[str, int]], live: bool
) -> list[Finding]:
    """The chat's rows per readable table against those its latest index build recorded (``live``:
    a live chat of the home, whose messages may have grown since)."""
    recorded = recorded_rows(instance, chat)
    for table, per_chat in counts.items():
        count = per_chat.get(chat, 0)
        expected = recorded.get(table)
        if live and table == "messages" and expected is not None and count > expected:
            continue  # messages added live since the build: its data version says what to rebuild
        if expected is None and table == "messages" and count == 0:
            return [Finding(chat, INDEX_ASSET, "lancedb rows missing (0 messages)")]
        if expected is not None and count != expected:
            what = "missing" if count < expected else "differ"
            return [Finding(chat, INDEX_ASSET, f"lancedb rows {what} ({count} of {expected} in {table})")]
    return []


def downstream(graph, asset: str, selection: Sequence[str]) -> list[str]:
    """``asset`` and everything after it in ``graph`` (an asset graph), within ``selection``."""
    seen, todo = {dg.AssetKey(asset)}, [dg.AssetKey(asset)]
    while todo:
        for child in graph.get(todo.pop()).child_keys:
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return [a for a in selection if dg.AssetKey(a) in seen]


def prepare(
    findings: list[Finding],
    *,
    instance: dg.DagsterInstance,
    state,
    store,
    graph,
    selection: Sequence[str],
    keys: Sequence[str],
    say: Callable[[str], None],
) -> dict[str, list[str]]:
    """Set damaged files aside, drop unreadable tables, fix missing full-text indexes, ``say`` so;
    returns what to run again: {chat: asset names}."""
    store = store if INDEX_ASSET in selection else None
    repair: dict[str, set[str]] = {}
    indexed = instance.get_materialized_partitions(dg.AssetKey(INDEX_ASSET)) if store else set()
    for finding in findings:
        if finding.table is not None and "full-text index missing" in finding.reason:
            store.ensure_text_index(finding.table)
            finding.action = "full-text index created"
        elif finding.table is not None:
            store.drop(finding.table)
            # The table held every chat: each indexed chat file is written to it again.
            again = sorted(k for k in keys if k in indexed)
            finding.action = f"table dropped; index rebuilt for {len(again)} chat file(s)"
            for key in again:
                repair.setdefault(key, set()).add(INDEX_ASSET)
        else:
            path = state.frame_path(finding.asset, finding.chat)
            if finding.asset != INDEX_ASSET and path.exists():
                finding.action = f"set aside as {set_aside(path).name}; "
            finding.action += "rebuilt"
            repair.setdefault(finding.chat, set()).update(downstream(graph, finding.asset, selection))
        subject = f"{finding.chat}: " if finding.chat else ""
        say(f"{subject}{finding.reason}: {_rebuilding(finding)}")
    return {chat: [a for a in selection if a in assets] for chat, assets in sorted(repair.items())}


def _rebuilding(finding: Finding) -> str:
    if "full-text index" in finding.reason:
        return "creating it"
    if finding.asset == INDEX_ASSET:
        return "rebuilding the index"
    return f"rebuilding {finding.asset} and what follows it"
