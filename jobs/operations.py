"""Operations domain: how answers use what retrieval returned (retrieval events)."""

import dagster as dg

from assets.events import retrieval_event_stats

defs = dg.Definitions(assets=[retrieval_event_stats])
