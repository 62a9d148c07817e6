"""What a response of the API carries: hits as JSON, and messages without any server path."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from narrative_mirror.retrieval.records import Hit

# An absolute path (POSIX or Windows) inside a message: clients get its last part only.
_PATH = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?(?:[\\/][^\s\\/'\"`:,;()\[\]]+)+[\\/]?")


def without_paths(text: str) -> str:
    """``text`` with every absolute path replaced by its last part (no server path leaves the API)."""
    return _PATH.sub(lambda m: m.group(0).rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1] or "/", text)


def hit_json(hit: Hit) -> dict:
    """One search hit as the JSON the search endpoint returns."""
    return {
        "id": hit.local_id,
        "message_id": hit.message_id,
        "position": hit.position,
        "session": hit.session,
        "speaker": hit.speaker,
        "text": hit.text,
        "timestamp": hit.timestamp.isoformat(),
        "block_id": hit.block_id,
        "score": hit.score,
        "reasons": hit.reasons,
        "sources": hit.sources,
    }
