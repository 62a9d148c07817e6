"""Events domain: how answers use what retrieval returned (the retrieval event log's statistics
and training-example export); the nightly retention of events and recall-run files is jobs/events.py."""

import dagster as dg

from assets.events.assets import retrieval_event_stats

defs = dg.Definitions(assets=[retrieval_event_stats])
