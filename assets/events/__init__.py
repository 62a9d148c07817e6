"""Events domain: how answers use what retrieval returned (the retrieval event log's statistics
and training-example export), and the nightly retention of events and recall-run files."""

import dagster as dg

from assets.events.assets import retrieval_event_stats
from assets.events.jobs import maintain_job, maintain_schedule

defs = dg.Definitions(assets=[retrieval_event_stats], jobs=[maintain_job], schedules=[maintain_schedule])
