"""Automation of the evaluation domain: train evaluations are kept current, test evaluations
never started by it, and the sensor that evaluates these conditions."""

import dagster as dg

from assets.freshness import PARTITION_AUTOMATION, NeedsRun, automated
from narrative_mirror import split as split_lib


class InTrainSplit(dg.AutomationCondition):
    """True for partitions whose chat file is in the train split: automation may re-evaluate
    train files when config or index changes, never test files (those need the tagged backfill)."""

    @property
    def name(self) -> str:
        return "in_train_split"

    def evaluate(self, context):
        candidates = context.candidate_subset
        train = {
            k for k in candidates.expensively_compute_partition_keys() if split_lib.assign(k).split == split_lib.TRAIN
        }
        return dg.AutomationResult(context, candidates.compute_intersection_with_partition_keys(train))


# Evaluations are kept current, not started: the automation re-runs a TRAIN evaluation that exists
# and became unsynced (the split filter first, so the rest is computed for train files alone); a
# first evaluation is for the nightly schedule or a command to ask for (minutes of work).
_EXISTS = ~dg.AutomationCondition.missing()
EVAL_AUTOMATION = InTrainSplit() & _EXISTS & PARTITION_AUTOMATION
# The summary aggregates every chat file, some never evaluated (test files outside an explicit test
# run), so it does not wait for all of its inputs, only for the train evaluations being refreshed.
SUMMARY_AUTOMATION = (
    _EXISTS & automated(NeedsRun()) & ~dg.AutomationCondition.any_deps_match(InTrainSplit() & _EXISTS & NeedsRun())
)

# Re-evaluates TRAIN partitions whose index, config, prompts or code changed (the conditions above).
eval_automation_sensor = dg.AutomationConditionSensorDefinition(
    "eval_automation_sensor",
    target=dg.AssetSelection.groups("evaluation"),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=300,
    use_user_code_server=True,
)
