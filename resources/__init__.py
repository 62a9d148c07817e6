"""Dagster resources: thin wrappers that hand library objects to the assets."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import polars as pl

from narrative_mirror import settings, storage
from narrative_mirror.keys import find_chat_files


class ParquetIOManager(dg.ConfigurableIOManager):
    """Stores polars frames as ``<base_dir>/<asset>/<partition>.parquet``.

    Written atomically (temp file + rename), so a failed run never replaces a good output.
    Kept in-house because dagster-polars is broken on polars 2.x.
    """

    base_dir: str = ""

    def _base(self) -> Path:
        return Path(self.base_dir) if self.base_dir else settings.nm_home() / "storage"

    def _path(self, asset_key: dg.AssetKey, partition: str | None) -> Path:
        return storage.frame_path(self._base(), "__".join(asset_key.path), partition)

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame) -> None:
        if obj is None:
            return
        if not isinstance(obj, pl.DataFrame):
            raise TypeError(f"{context.asset_key.to_user_string()}: expected a polars DataFrame, got {type(obj).__name__}")
        partition = context.partition_key if context.has_asset_partitions else None
        path = self._path(context.asset_key, partition)
        storage.write_frame(path, obj)
        context.add_output_metadata({"path": dg.MetadataValue.path(str(path))})

    def load_input(self, context: dg.InputContext) -> pl.DataFrame | dict[str, pl.DataFrame]:
        key = context.asset_key
        if context.has_asset_partitions:
            keys = context.asset_partition_keys
            if len(keys) == 1:
                return storage.read_frame(self._path(key, keys[0]))
            return {k: storage.read_frame(self._path(key, k)) for k in keys}
        return storage.read_frame(self._path(key, None))


class ChatDataResource(dg.ConfigurableResource):
    """Where chat files and ARC case files are read from ("" = the packaged demo data)."""

    data_dir: str = ""
    arcs_dir: str = ""

    def data_path(self) -> Path:
        return Path(self.data_dir).expanduser().resolve() if self.data_dir else settings.data_dir()

    def arcs_path(self) -> Path | None:
        if self.arcs_dir:
            return Path(self.arcs_dir).expanduser().resolve()
        return settings.arcs_dir(self.data_path())

    def chat_files(self) -> dict[str, Path]:
        return find_chat_files(self.data_path())[0]

    def chat_path(self, key: str) -> Path:
        files = self.chat_files()
        if key not in files:
            raise FileNotFoundError(
                f"chat file for partition {key!r} is not in {self.data_path()} "
                f"(known: {', '.join(sorted(files)) or 'none'}); stored results are kept"
            )
        return files[key]


class EmbedderResource(dg.ConfigurableResource):
    """The embedder of config/embedding.toml (the ``embedding_config`` source asset tracks it);
    a non-empty field overrides the file."""

    model_name: str = ""
    batch_size: int = 0

    def get(self):
        from narrative_mirror.embedding import Embedder

        config = settings.load_config("embedding")
        return Embedder(self.model_name or config["model"], batch_size=self.batch_size or int(config["batch_size"]))


class LanceDBResource(dg.ConfigurableResource):
    uri: str = ""  # "" = NM_HOME/lancedb

    def resolved_uri(self) -> str:
        return self.uri or settings.lancedb_uri()

    def get(self):
        from narrative_mirror.index_store import IndexStore

        return IndexStore(self.resolved_uri())


class LLMResource(dg.ConfigurableResource):
    """OpenAI-compatible LLM from OPENAI_BASE_URL / OPENAI_API_KEY / NM_LLM_MODEL; None = offline."""

    def get(self):
        from narrative_mirror.llm import LLMClient, LLMSettings

        llm_settings = LLMSettings.from_env()
        return LLMClient(llm_settings) if llm_settings else None


def default_resources(data_dir: str = "", arcs_dir: str = "", nm_home: str = "") -> dict:
    base = str(Path(nm_home) / "storage") if nm_home else ""
    return {
        "io_manager": ParquetIOManager(base_dir=base),
        "chat_data": ChatDataResource(data_dir=data_dir, arcs_dir=arcs_dir),
        "embedder": EmbedderResource(),
        "lancedb": LanceDBResource(uri=str(Path(nm_home) / "lancedb") if nm_home else ""),
        "llm": LLMResource(),
    }
