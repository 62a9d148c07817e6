"""Observable source assets: the files the graph reads, each versioned by its content hash.

- ``chat_file`` / ``arc_file`` (partitioned by chat file): the chat and its ARC cases.
- ``<name>_config``: the config files (``config/*.toml``).
- ``prompts/<name>``: one per prompt file, so an agent prompt edit touches only the evaluations
  and a summary prompt only the layer that uses it.

``observe_sources`` is the one function that records their versions: the command line calls it
before deciding what to run, ``source_files_sensor`` every minute, and the automation reads what
it recorded. It records an observation only when a version changed, so an unchanged folder
writes nothing and nothing downstream turns stale.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from assets.partitions import chat_files
from assets.versioning import DATA_VERSION_TAG
from narrative_mirror import sources as source_versions
from resources.dagster_resources import ChatDataResource


@dg.observable_source_asset(partitions_def=chat_files, group_name="sources",
                            description="Chat files of the data folder (content hash per file).")
def chat_file(chat_data: ChatDataResource) -> dg.DataVersionsByPartition:
    versions, _, _ = source_versions.chat_file_versions(chat_data.data_path())
    return dg.DataVersionsByPartition({k: dg.DataVersion(v) for k, v in versions.items()})


@dg.observable_source_asset(partitions_def=chat_files, group_name="sources",
                            description="ARC case file of each chat (content hash; 'absent' when it has none).")
def arc_file(chat_data: ChatDataResource) -> dg.DataVersionsByPartition:
    arcs = chat_data.arcs_path()
    return dg.DataVersionsByPartition(
        {k: dg.DataVersion(source_versions.arc_file_version(arcs, k)) for k in chat_data.chat_files()})


def _config_source(name: str, description: str) -> dg.SourceAsset:
    @dg.observable_source_asset(name=f"{name}_config", group_name="config", description=description)
    def _observe() -> dg.DataVersion:
        return dg.DataVersion(source_versions.config_versions()[name])

    return _observe


embedding_config = _config_source("embedding", "Embedder model (config/embedding.toml).")
layers_config = _config_source("layers", "L1/L1.5/L2 parameters (config/layers.toml).")
retrieval_config = _config_source("retrieval", "Retrieval and reranker settings (config/retrieval.toml).")
agent_config = _config_source("agent", "The agent's thresholds, budgets and profiles (config/agent.toml).")
split_config = _config_source("split", "Train/test assignment patterns (config/split.toml).")
evaluation_config = _config_source("evaluation", "Evaluation profile and regression tolerances (config/evaluation.toml).")
CONFIG_SOURCES = [embedding_config, layers_config, retrieval_config, agent_config, split_config, evaluation_config]


def _prompt_source(name: str) -> dg.SourceAsset:
    @dg.observable_source_asset(key=["prompts", name], group_name="config", description=f"prompts/{name}.txt")
    def _observe() -> dg.DataVersion:
        return dg.DataVersion(source_versions.prompt_versions()[name])

    return _observe


PROMPTS = {name: _prompt_source(name) for name in source_versions.prompt_names()}
AGENT_PROMPTS = [source for name, source in PROMPTS.items() if name.startswith("agent_")]
SOURCES = [chat_file, arc_file, *CONFIG_SOURCES, *PROMPTS.values()]


@dataclass
class SourceObservation:
    """What one look at the sources found: the chat files, the keys new to the instance,
    the observations to record (changed versions only) and files that were skipped."""

    files: dict[str, Path]
    new_keys: list[str]
    observations: list[dg.AssetObservation] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _recorded_version(instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None) -> str | None:
    filter_ = dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition else None)
    records = instance.fetch_observations(filter_, limit=1).records
    return records[0].asset_observation.tags.get(DATA_VERSION_TAG) if records else None


def observe_sources(instance: dg.DagsterInstance, chat_data: ChatDataResource) -> SourceObservation:
    """Current version of every source file, compared with what the instance recorded last.

    Chat files that left the folder are not observed again: their partitions and stored
    results stay as they are.
    """
    chats, files, problems = source_versions.chat_file_versions(chat_data.data_path())
    arcs_dir = chat_data.arcs_path()
    current: dict[tuple[dg.AssetKey, str | None], str] = {}
    for key, version in chats.items():
        current[(chat_file.key, key)] = version
        current[(arc_file.key, key)] = source_versions.arc_file_version(arcs_dir, key)
    for name, version in source_versions.config_versions().items():
        current[(dg.AssetKey(f"{name}_config"), None)] = version
    for name, version in source_versions.prompt_versions().items():
        current[(PROMPTS[name].key, None)] = version
    known = set(instance.get_dynamic_partitions(chat_files.name))
    result = SourceObservation(files=files, new_keys=sorted(set(chats) - known), problems=problems)
    for (key, partition), version in current.items():
        if _recorded_version(instance, key, partition) != version:
            result.observations.append(
                dg.AssetObservation(asset_key=key, partition=partition, tags={DATA_VERSION_TAG: version}))
    return result
