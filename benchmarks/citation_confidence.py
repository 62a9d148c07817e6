"""The citation confidences retrieval events get over the demo chats' questions (seed 001): every
gold question of each chat asked offline through ``Memory.ask`` (logged in the home's event log as a
user of its own, one per run), then the distribution of the
events' ``citation_confidence`` and of the per-cited-id values.

    NM_HOME=... narrative-mirror build   # the demo chats' memory first
    NM_HOME=... PYTHONPATH=. python benchmarks/citation_confidence.py
"""

from __future__ import annotations

import json
import uuid
from collections import Counter

from narrative_mirror import Memory, settings
from resources import environment


def main() -> None:
    environment.hand_to_library()
    user = f"citation-confidence-{uuid.uuid4().hex[:12]}"  # this run's events, apart from any other
    with Memory.open(environment.nm_home()) as memory:
        for path in sorted(settings.DEMO_DATA_DIR.glob("*.json")):
            for qa in json.loads(path.read_text(encoding="utf-8")).get("qa", []):
                memory.ask([path.stem], qa["question"], "balanced", user_id=user)
        frame = memory.event_log.events(user_id=user)
    event_values = frame["citation_confidence"].to_list()
    per_id = [v for values in frame["cited_confidences"].to_list() for v in values or []]
    known = [v for v in event_values if v is not None]
    print(f"asks: {frame.height}; abstentions (no citation, null confidence): {event_values.count(None)}")
    print(
        f"event confidence: {len(set(round(v, 3) for v in known))} distinct values over {len(known)} events; "
        f"min {min(known):.3f}, mean {sum(known) / len(known):.3f}, max {max(known):.3f}"
    )
    print(f"  exactly 1.0: {sum(v == 1.0 for v in known)}, exactly 0.0: {sum(v == 0.0 for v in known)}")
    buckets = Counter(min(int(v * 5), 4) for v in per_id)
    print(
        f"per cited id ({len(per_id)}): "
        + ", ".join(f"[{b / 5:.1f}, {(b + 1) / 5:.1f}): {buckets[b]}" for b in range(5))
    )


if __name__ == "__main__":
    main()
