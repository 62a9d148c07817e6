"""Recall-run evidence (the memory-API design): every search leaves an append-only JSON record of its top-k
before and after the hybrid-score rerank, so score changes can be compared run by run.

Path: ``<NM_HOME>/recall_runs/YYYYMMDD/run_<epoch_ms>.json`` (UTC). A file is created with
O_EXCL and never rewritten; a second run in the same millisecond gets ``run_<epoch_ms>_1.json``.
The folder is bounded as it is written: past ``retention.toml``'s ``[recall_runs] keep_last``
(default ``DEFAULT_KEEP_RUNS``) by a tenth, the oldest records go (and those older than
``keep_days`` when set), so a busy server never collects one file per search forever.

A search ranks with the retriever's default variant (``retrieval.toml``, what ``ask`` uses) unless
the request names another. With ``hybrid_expand_rerank`` the pre items are the hybrid-score
order before the Self-RAG pass; with any other variant they are the variant's own order (the
hybrid-score reasons computed for the record), and the post items the same order, or the
Self-RAG pass's when asked for.

Record: ``query``, ``params`` (k, need_fresh, half_life_days, fresh_weight, self_rag, tiers (the
tier filter asked for, null: every tier), chat, variant), ``pre_items`` / ``post_items`` and ``ts`` (UTC ISO8601 with Z). An item:
``id``, ``tier``, ``score`` (the first hybrid score), ``ts``, ``scope_id`` (block id), ``text``
(<= 400 chars), ``path`` (chat file), ``line_from`` / ``line_to`` (message position),
``reasons`` {kw, recency, refs, tier_weight}; post items add ``rerank`` {rubric, new_score}
when Self-RAG was applied.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from narrative_mirror import settings
from narrative_mirror.home import Home
from narrative_mirror.pii import pii_kinds, quarantine_marker
from narrative_mirror.retention import DEFAULT_KEEP_RUNS, load_retention
from narrative_mirror.retrieval.rerank import HybridScoreReranker, RerankContext

if TYPE_CHECKING:
    from narrative_mirror.retrieval.engine import Retriever
    from narrative_mirror.retrieval.records import Hit, SearchResult

SNIPPET_CHARS = 400
REASON_KEYS = ("kw", "recency", "refs", "tier_weight")
RERANK_VARIANT = "hybrid_expand_rerank"  # first stage + expansion, then the seed-004 hybrid score
MAX_SAME_MS = 1000  # runs sharing one millisecond before giving up
TIER_POOL = 10  # a tier-filtered search ranks this many times k before keeping k of those tiers

log = logging.getLogger(__name__)


def runs_dir(root: Path | None) -> Path:
    """The recall-run folder ``root`` (a home's is ``Home.recall_runs``)."""
    if root is None:
        raise ValueError("no recall-run folder: pass root (e.g. Home(...).recall_runs)")
    return Path(root)


def utc_iso(moment: datetime) -> str:
    """ISO 8601 in UTC with a Z and milliseconds, e.g. 2025-08-25T10:11:12.345Z."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def run_item(hit: Hit, chat_file: str, tier: int, *, with_rerank: bool) -> dict:
    """One hit as a recall-run item; the hit must carry the hybrid-score reasons."""
    missing = [key for key in (*REASON_KEYS, "hybrid_score") if key not in hit.reasons]
    if missing:
        raise ValueError(
            f"hit {hit.local_id}: no hybrid-score reasons {missing} (was the hybrid_score reranker applied?)"
        )
    item = {
        "id": hit.local_id,
        "tier": tier,
        "score": hit.reasons["hybrid_score"],
        "ts": hit.timestamp.isoformat(),
        "scope_id": hit.block_id,
        "text": hit.text[:SNIPPET_CHARS],
        "path": chat_file,
        "line_from": hit.position,
        "line_to": hit.position,
        "reasons": {key: hit.reasons[key] for key in REASON_KEYS},
    }
    if with_rerank and "rubric" in hit.reasons:
        item["rerank"] = {"rubric": hit.reasons["rubric"], "new_score": hit.reasons["new_score"]}
    return item


def write_record(base: Path, record: Mapping, now: datetime) -> Path:
    """Write ``record`` as ``base/YYYYMMDD/run_<epoch_ms>.json`` (UTC); returns its path. The
    folder ``base`` is kept within the recall runs' retention (``_RunBound``).

    Never overwrites: the name is claimed with O_EXCL, then suffixed ``_1``, ``_2``, ... .
    """
    data = (json.dumps(record, ensure_ascii=False, indent=1) + "\n").encode("utf-8")
    folder = base / now.strftime("%Y%m%d")
    folder.mkdir(parents=True, exist_ok=True)
    stamp = int(now.timestamp() * 1000)
    for n in range(MAX_SAME_MS):
        path = folder / (f"run_{stamp}.json" if n == 0 else f"run_{stamp}_{n}.json")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        _bound_for(base).written()
        return path
    raise OSError(f"{folder}: {MAX_SAME_MS} runs already recorded for millisecond {stamp}")


def write_run(
    query: str,
    params: Mapping,
    pre_items: Sequence[Mapping],
    post_items: Sequence[Mapping],
    *,
    root: Path | None = None,
    now: datetime | None = None,
) -> Path:
    """Write one run record under ``root`` (default ``<NM_HOME>/recall_runs``); returns its path."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    record = {
        "query": query,
        "params": dict(params),
        "pre_items": list(pre_items),
        "post_items": list(post_items),
        "ts": utc_iso(now),
    }
    return write_record(runs_dir(root), record, now)


def _run_time(path: Path) -> datetime:
    """When a run was recorded: the epoch milliseconds of its name, else the file's mtime."""
    stamp = path.stem.removeprefix("run_").split("_")[0]
    seconds = int(stamp) / 1000 if stamp.isdigit() else path.stat().st_mtime
    return datetime.fromtimestamp(seconds, UTC)


def prune_runs(
    before: datetime | None = None, root: Path | None = None, keep_last: int | None = None
) -> dict[str, int]:
    """Remove the run records made before ``before`` and all but the newest ``keep_last`` (and day
    folders left empty); returns ``removed_files``, ``removed_bytes``, ``removed_folders`` and
    ``kept_files``."""
    removed = {"removed_files": 0, "removed_bytes": 0, "removed_folders": 0, "kept_files": 0}
    base = runs_dir(root)
    if not base.is_dir():
        return removed
    runs = []
    for path in base.glob("*/run_*.json"):
        try:
            runs.append((_run_time(path), path.name, path))
        except FileNotFoundError:  # removed meanwhile by another pruner
            continue
    runs.sort()
    cut = len(runs) - keep_last if keep_last is not None else 0
    for i, (made, _, path) in enumerate(runs):
        if i >= cut and (before is None or made >= before):
            removed["kept_files"] += 1
            continue
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            continue
        removed["removed_files"] += 1
        removed["removed_bytes"] += size
    for folder in sorted(p for p in base.iterdir() if p.is_dir()):
        try:
            folder.rmdir()  # only when empty: a day still being written keeps its folder
            removed["removed_folders"] += 1
        except OSError:
            pass
    return removed


class _RunBound:
    """Keeps one runs folder within its retention as records are written: counts the records
    (read once from the folder) and prunes when they pass ``keep_last`` by a tenth."""

    def __init__(self, root: Path):
        try:
            retention = load_retention()
            self.keep_last, self.keep_days = retention.recall_runs_keep_last, retention.recall_runs_days
        except (OSError, ValueError) as exc:  # a bad setting is `maintain`'s to report; the bound still holds
            log.warning("recall runs: retention.toml cannot be used (%s); keeping the last %d", exc, DEFAULT_KEEP_RUNS)
            self.keep_last, self.keep_days = DEFAULT_KEEP_RUNS, None
        self.root, self.slack = root, max(1, self.keep_last // 10)
        self.count: int | None = None
        self.lock = threading.Lock()

    def written(self) -> None:
        with self.lock:
            if self.count is None:
                self.count = sum(1 for _ in self.root.glob("*/run_*.json"))
            else:
                self.count += 1
            if self.count <= self.keep_last + self.slack:
                return
            before = datetime.now(UTC) - timedelta(days=self.keep_days) if self.keep_days else None
            self.count = prune_runs(before, self.root, self.keep_last)["kept_files"]


_bounds: dict[Path, _RunBound] = {}
_bounds_lock = threading.Lock()


def _bound_for(root: Path) -> _RunBound:
    with _bounds_lock:
        if root not in _bounds:
            _bounds[root] = _RunBound(root)
        return _bounds[root]


def compare_run(path: str | Path) -> dict[str, float]:
    """The memory-API design's before/after summary: average score of the top 3 pre items, of the top 3 post
    items (``rerank.new_score`` when present, else ``score``) and the lift between them."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable recall-run JSON file: {exc}") from exc

    def scores(key: str, rerank: bool) -> list[float]:
        items = record.get(key) if isinstance(record, dict) else None
        if not isinstance(items, list):
            raise ValueError(f"{path}: field {key!r} must be a list of items")
        out = []
        for i, item in enumerate(items[:3]):
            value = (
                ((item.get("rerank") or {}).get("new_score", item.get("score")) if rerank else item.get("score"))
                if isinstance(item, dict)
                else None
            )
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise ValueError(f"{path}: {key}[{i}] has no numeric score")
            out.append(float(value))
        return out

    pre, post = scores("pre_items", False), scores("post_items", True)
    avg_pre = sum(pre) / len(pre) if pre else 0.0
    avg_post = sum(post) / len(post) if post else 0.0
    return {"avg_pre": avg_pre, "avg_post": avg_post, "lift": avg_post - avg_pre if pre and post else 0.0}


class _Recording:
    """Wraps a reranker and keeps its whole output (the search returns only the top k)."""

    def __init__(self, inner: HybridScoreReranker):
        self.inner, self.name = inner, inner.name
        self.ranked: list[Hit] = []

    def rerank(self, query: str, hits: Sequence[Hit], context: RerankContext) -> list[Hit]:
        self.ranked = self.inner.rerank(query, hits, context)
        return self.ranked


@dataclass
class RecordedSearch:
    result: SearchResult  # hits = post-rerank top k
    pre: list[Hit]  # top k by the first hybrid score, before the Self-RAG pass
    params: dict
    run_path: Path | None  # None when the record could not be written
    run_error: str | None = None


def recorded_search(
    retriever: Retriever,
    chat_file: str,
    query: str,
    k: int = 5,
    *,
    need_fresh: bool = False,
    half_life_days: float | None = None,
    fresh_weight: float | None = None,
    self_rag: bool = False,
    root: Path | None = None,
    variant: str | None = None,
    tiers: Sequence[int] | None = None,
) -> RecordedSearch:
    """Search with the seed-004 hybrid score (optionally fresh-weighted and Self-RAG reranked)
    and write the recall-run record. ``half_life_days`` / ``fresh_weight`` apply when
    ``need_fresh`` (defaults: ``retrieval.toml`` [rerank.hybrid_score]). ``tiers``: only messages
    of these importance tiers are returned (None: every tier); the search then ranks a deeper
    pool (``TIER_POOL`` times k, at least the retriever's pool) and keeps the first k of those
    tiers. Under PII_STRICT (``settings.pii_strict``) hits carrying personal data are quarantined
    (``quarantine``). A failed record write does not fail the search: ``run_path`` is None and
    ``run_error`` says why."""
    options = dict(retriever.config.get("rerank", {}).get("hybrid_score", {}))
    if half_life_days is not None:
        options["fresh_half_life_days"] = half_life_days
    if fresh_weight is not None:
        options["fresh_weight"] = fresh_weight
    options["self_rag"] = self_rag
    recording = _Recording(HybridScoreReranker(**options))
    variant = variant or retriever.default_variant
    chat = retriever.chat(chat_file)
    wanted = None if tiers is None else set(tiers)
    depth = k if wanted is None else max(k * TIER_POOL, retriever.pool_size)

    def kept(hits: Sequence[Hit]) -> list[Hit]:
        return [h for h in hits if wanted is None or chat.tiers[h.local_id] in wanted][:k]

    if variant == RERANK_VARIANT or need_fresh:
        # The engine reranks with the hybrid score here (need_fresh does under every variant).
        result = retriever.search(chat_file, query, depth, variant=variant, need_fresh=need_fresh, reranker=recording)
        result = dataclasses.replace(result, hits=kept(result.hits))
        # Stable sort: with Self-RAG off the pre order equals the post order.
        pre = kept(sorted(recording.ranked, key=lambda h: -h.reasons["hybrid_score"]))
    else:
        result = retriever.search(chat_file, query, depth, variant=variant, need_fresh=need_fresh)
        result = dataclasses.replace(result, hits=kept(result.hits))
        context = RerankContext(last_time=chat.end, refs=chat.refs, tiers=chat.tiers, need_fresh=need_fresh)
        rescored = recording.inner.rerank(query, result.hits, context)
        scored = {h.local_id: h for h in rescored}
        pre = [dataclasses.replace(h, reasons={**h.reasons, **scored[h.local_id].reasons}) for h in result.hits]
        # The Self-RAG pass, when asked for, reorders the variant's hits by its new score.
        result = dataclasses.replace(result, hits=rescored if self_rag else pre)
    post = result.hits
    reranker = recording.inner
    params = {
        "chat": chat_file,
        "k": k,
        "need_fresh": int(need_fresh),
        "half_life_days": reranker.fresh_half_life_days if need_fresh else reranker.half_life_days,
        "fresh_weight": reranker.fresh_weight,
        "self_rag": int(self_rag),
        "tiers": None if wanted is None else sorted(wanted),  # the filter asked for; None: every tier
        "variant": variant,
    }
    quarantine_error = None
    if settings.pii_strict():
        pre, post, quarantine_error = quarantine(query, params, pre, post, chat_file, root)
        result = dataclasses.replace(result, hits=post)
    pre_items = [run_item(h, chat_file, chat.tiers[h.local_id], with_rerank=False) for h in pre]
    post_items = [run_item(h, chat_file, chat.tiers[h.local_id], with_rerank=True) for h in post]
    try:
        path, error = write_run(query, params, pre_items, post_items, root=root), None
    except OSError as exc:
        path, error = None, f"could not write the recall-run record: {exc}"
    return RecordedSearch(
        result=result,
        pre=pre,
        params=params,
        run_path=path,
        run_error="; ".join(e for e in (error, quarantine_error) if e) or None,
    )


def quarantine(
    query: str, params: Mapping, pre: Sequence[Hit], post: Sequence[Hit], chat_file: str, root: Path | None = None
) -> tuple[list[Hit], list[Hit], str | None]:
    """The memory-API design's PII_STRICT: the hits whose text carries personal data (``pii``) get a marker
    naming the kinds for their text, and their real text goes to ``<root's parent>/quarantine/
    YYYYMMDD/run_<ms>.json`` instead (query, params, ts, items {id, kinds, text, path, line}).
    Returns (pre, post, an error when the quarantine file could not be written)."""
    found = {h.local_id: (h, kinds) for h in (*pre, *post) if (kinds := pii_kinds(h.text))}
    if not found:
        return list(pre), list(post), None

    def masked(hits: Sequence[Hit]) -> list[Hit]:
        return [
            dataclasses.replace(h, text=quarantine_marker(found[h.local_id][1])) if h.local_id in found else h
            for h in hits
        ]

    now = datetime.now(UTC)
    record = {
        "query": query,
        "params": dict(params),
        "ts": utc_iso(now),
        "items": [
            {"id": i, "kinds": kinds, "text": h.text, "path": chat_file, "line": h.position}
            for i, (h, kinds) in found.items()
        ],
    }
    try:
        write_record(Home(runs_dir(root).parent).quarantine, record, now)
        error = None
    except OSError as exc:
        error = f"could not write the quarantine record: {exc}"
    return masked(pre), masked(post), error


def redact_runs(
    redact_any,
    found,
    chat: str,
    forgotten_ids: set[str] | None,
    *,
    marker: str = "[forgotten]",
    root: Path | None = None,
) -> int:
    """Forgotten content out of the run records (append-only for runs, not for deleted content):
    in a run of ``chat``, an item of a forgotten message (``forgotten_ids``; None: the whole
    chat) gets ``marker`` for its text, and with the whole chat its query too; then every string
    of a record of that chat, or of one whose text ``found`` quotes, goes through ``redact_any``. A changed record is replaced
    atomically, same name and mode. Returns the files changed."""
    from narrative_mirror.storage import write_atomically

    base = runs_dir(root)
    changed = 0
    if not base.is_dir():
        return 0
    for path in sorted(base.glob("*/run_*.json")):
        try:
            raw = path.read_text(encoding="utf-8")
            record = json.loads(raw)
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict):
            continue
        of_chat = (record.get("params") or {}).get("chat") == chat
        if not of_chat and not found(raw):  # one pass over the file: most runs quote nothing forgotten
            continue
        new = json.loads(raw)
        if of_chat:
            if forgotten_ids is None:
                new["query"] = marker
            for key in ("pre_items", "post_items"):
                for item in new.get(key) or []:
                    if isinstance(item, dict) and (forgotten_ids is None or item.get("id") in forgotten_ids):
                        item["text"] = marker
        new = redact_any(new)
        if new != record:
            write_atomically(path, (json.dumps(new, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))
            changed += 1
    return changed
