"""Observable source assets: the files the graph reads, each versioned by its content hash.

- ``chat_file`` / ``arc_file`` (partitioned by chat): the chat (a chat file, or one conversation
  of a chat export in the data folder) and its ARC cases.
- ``<name>_config``: the config files (``config/*.toml``).
- ``prompts/<name>``: one per prompt file, so an agent prompt edit touches only the evaluations
  and a summary prompt only the layer that uses it.

``observe_sources`` is the one function that records their versions: the command line calls it
before deciding what to run, ``source_files_sensor`` every minute, and the automation reads what
it recorded. It records an observation only when a version changed, so an unchanged folder
writes nothing and nothing downstream turns stale.

Each chat's observation also records the data folder it came from. Several data folders on one
home share a chat only while its content is the same: a chat built from another folder that
still exists, with other content, is refused (a problem line saying why) rather than rebuilt
back and forth between the two; a folder that moved (the old one is gone) takes over.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from assets.partitions import chat_files
from assets.versioning import DATA_VERSION_TAG
from narrative_mirror import sources as source_versions
from narrative_mirror.evaluation import prompts_read
from narrative_mirror.home import Home
from resources.dagster_resources import ChatDataResource, StateResource


@dg.observable_source_asset(
    partitions_def=chat_files,
    group_name="sources",
    description="Chat files of the data folder (content hash per file).",
)
def chat_file(chat_data: ChatDataResource) -> dg.DataVersionsByPartition:
    sources, _ = chat_data.chat_sources()
    return dg.DataVersionsByPartition({k: dg.DataVersion(s.version) for k, s in sources.items()})


@dg.observable_source_asset(
    partitions_def=chat_files,
    group_name="sources",
    description="ARC case file of each chat (content hash; 'absent' when it has none).",
)
def arc_file(chat_data: ChatDataResource) -> dg.DataVersionsByPartition:
    arcs = chat_data.arcs_path()
    return dg.DataVersionsByPartition(
        {k: dg.DataVersion(source_versions.arc_file_version(arcs, k)) for k in chat_data.chat_files()}
    )


def _config_source(name: str, description: str) -> dg.SourceAsset:
    @dg.observable_source_asset(name=f"{name}_config", group_name="config", description=description)
    def _observe(state: StateResource) -> dg.DataVersion:
        return dg.DataVersion(source_versions.config_versions(Home(state.root))[name])

    return _observe


embedding_config = _config_source("embedding", "Embedder model (config/embedding.toml).")
layers_config = _config_source("layers", "L1/L1.5/L2 parameters (config/layers.toml).")
retrieval_config = _config_source("retrieval", "Retrieval and reranker settings (config/retrieval.toml).")
agent_config = _config_source("agent", "The agent's thresholds, budgets and profiles (config/agent.toml).")
split_config = _config_source("split", "Train/test assignment patterns (config/split.toml).")
evaluation_config = _config_source(
    "evaluation", "Evaluation profile and regression tolerances (config/evaluation.toml)."
)
CONFIG_SOURCES = [embedding_config, layers_config, retrieval_config, agent_config, split_config, evaluation_config]


def _prompt_source(name: str) -> dg.SourceAsset:
    @dg.observable_source_asset(key=["prompts", name], group_name="config", description=f"prompts/{name}.txt")
    def _observe() -> dg.DataVersion:
        return dg.DataVersion(source_versions.prompt_versions()[name])

    return _observe


PROMPTS = {name: _prompt_source(name) for name in source_versions.packaged_prompt_names()}


def prompt_sources(evaluation_assets: tuple[str, ...]) -> list[dg.SourceAsset]:
    """The prompt sources the evaluation assets read (narrative_mirror.evaluation.prompts_read)."""
    return [PROMPTS[name] for name in prompts_read(evaluation_assets)]


SOURCES = [chat_file, arc_file, *CONFIG_SOURCES, *PROMPTS.values()]


@dataclass
class SourceObservation:
    """What one look at the sources found: the chat files, the keys new to the instance,
    the observations to record (changed versions only) and files that were skipped."""

    files: dict[str, Path]
    new_keys: list[str]
    observations: list[dg.AssetObservation] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    versions: dict[str, dict[str, str]] = field(default_factory=dict)  # per chat: its source versions
    # Chats of the folder not taken because this home built a chat of that key from another
    # folder: {key: the problem line} (the line is in ``problems`` too).
    elsewhere: dict[str, str] = field(default_factory=dict)


FOLDER_METADATA = "data_folder"  # metadata, not a tag: tag values cannot hold a path


def _recorded(instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None) -> tuple[str | None, str | None]:
    """(version, data folder) of the last observation of ``key`` / ``partition``."""
    filter_ = dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition else None)
    records = instance.fetch_observations(filter_, limit=1).records
    if not records:
        return None, None
    observation = records[0].asset_observation
    folder = observation.metadata.get(FOLDER_METADATA)
    return observation.tags.get(DATA_VERSION_TAG), folder.value if folder is not None else None


def _other_folder(recorded: tuple[str | None, str | None], version: str, folder: str) -> str | None:
    """The other, still existing data folder a chat was last observed in with other content."""
    before_version, before = recorded
    if not before or before == folder or before_version == version:
        return None
    return before if Path(before).is_dir() else None


def observe_sources(instance: dg.DagsterInstance, chat_data: ChatDataResource, progress=None) -> SourceObservation:
    """Current version of every source file, compared with what the instance recorded last.

    Chat files that left the folder are not observed again: their partitions and stored
    results stay as they are. ``progress(line)`` hears about long parses of big exports.
    """
    sources, problems = chat_data.chat_sources(progress)
    folder = str(chat_data.data_path())
    arcs_dir = chat_data.arcs_path()
    current: dict[tuple[dg.AssetKey, str | None], str] = {}
    files: dict[str, Path] = {}
    elsewhere: dict[str, str] = {}
    for key, source in sources.items():
        other = _other_folder(_recorded(instance, chat_file.key, key), source.version, folder)
        if other is not None:
            elsewhere[key] = (
                f"{source.path}: chat {key!r} is built on this NM_HOME from {other}, whose copy differs: "
                "not rebuilt from this folder (give this folder its own NM_HOME, or rename one of the two)"
            )
            problems.append(elsewhere[key])
            continue
        files[key] = source.path
        current[(chat_file.key, key)] = source.version
        current[(arc_file.key, key)] = source_versions.arc_file_version(arcs_dir, key)
    for name, version in source_versions.config_versions(Home.at(chat_data.home) if chat_data.home else None).items():
        current[(dg.AssetKey(f"{name}_config"), None)] = version
    for name, version in source_versions.prompt_versions().items():
        current[(PROMPTS[name].key, None)] = version
    known = set(instance.get_dynamic_partitions(chat_files.name))
    result = SourceObservation(
        files=files,
        new_keys=sorted(set(files) - known),
        problems=problems,
        elsewhere=elsewhere,
        versions={k: {"chat_file": v} for (a, k), v in current.items() if a == chat_file.key},
    )
    for (key, partition), version in current.items():
        if key == arc_file.key:
            result.versions[partition]["arc_file"] = version
        if _recorded(instance, key, partition)[0] != version:
            metadata = {FOLDER_METADATA: folder} if key == chat_file.key else None
            result.observations.append(
                dg.AssetObservation(
                    asset_key=key, partition=partition, tags={DATA_VERSION_TAG: version}, metadata=metadata
                )
            )
    return result


def record_observation(instance: dg.DagsterInstance, found: SourceObservation) -> None:
    """Record what ``observe_sources`` found on the instance, as the sensor's result does: new
    chat files as partitions, changed versions as observations."""
    if found.new_keys:
        instance.add_dynamic_partitions(chat_files.name, found.new_keys)
    for observation in found.observations:
        instance.report_runless_asset_event(observation)
