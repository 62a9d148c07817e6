"""The evaluation profile as run config: which agent profile an evaluation run answers with,
recorded by Dagster with each run, and how the command line asks for one and reads it back."""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from narrative_mirror import evaluation as ev


class EvaluationRunConfig(dg.Config):
    """The agent profile the evaluation answers with ("": the profile of config/evaluation.toml)."""

    profile: str = ""


def eval_run_config(profile: str, asset_names: Sequence[str]) -> dict:
    """Run config that evaluates ``asset_names`` under ``profile`` ("" = the configured one)."""
    return {"ops": {name: {"config": {"profile": profile}} for name in asset_names}}


def effective_profile(profile: str) -> str:
    """The profile an evaluation asked for ``profile`` answers with."""
    return ev.load_eval_config(profile=profile or None)["run"]["profile"]


def recorded_profile(instance: dg.DagsterInstance, asset: str, partition: str) -> str | None:
    """The profile the latest materialization of ``asset``/``partition`` was made with, as its
    run's config records it ("" = the configured one); None when it was never materialized."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=1
    ).records
    if not records:
        return None
    run = instance.get_run_by_id(records[0].run_id)
    ops = (run.run_config or {}).get("ops", {}) if run else {}
    return ops.get(asset, {}).get("config", {}).get("profile", "")


def evaluated_under_another_profile(
    instance: dg.DagsterInstance, assets: Sequence[str], partitions: Sequence[str], profile: str
) -> list[str]:
    """The ``partitions`` whose latest evaluation (any of ``assets``) answered with another
    profile than ``profile`` asks for; never-evaluated partitions are left to the freshness rule."""
    wanted = effective_profile(profile)
    return [
        key
        for key in partitions
        if any(
            (recorded := recorded_profile(instance, asset, key)) is not None and effective_profile(recorded) != wanted
            for asset in assets
        )
    ]
