"""The adapted layers of a home, stored under the state folder (``<NM_HOME>/adaptation``): one
folder per adaptation, named by its fingerprint (the pairs' data version, the settings, the base
model and this package's code), and ``current.json`` naming the one the embedder loads."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from narrative_mirror.adaptation import pairs as pair_source
from narrative_mirror.adaptation.training import AdaptationSettings, encode_cost, train_top_layers
from narrative_mirror.embedding import message_texts
from narrative_mirror.storage import write_atomically

LAYERS_FILE = "top_layers.pt"
META_FILE = "adaptation.json"
CURRENT_FILE = "current.json"
PACKAGE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Adaptation:
    """One stored adaptation: its fingerprint, the layers file and what it was trained on."""

    fingerprint: str
    layers_path: Path
    meta: dict

    @property
    def messages(self) -> int:
        return int(self.meta.get("messages", 0))


def code_version() -> str:
    """Hash of the code that builds pairs and trains (a change retrains)."""
    digest = hashlib.sha256()
    for name in ("pairs.py", "training.py"):
        digest.update((PACKAGE_DIR / name).read_bytes())
    return digest.hexdigest()[:12]


def fingerprint(pairs_version: str, settings: AdaptationSettings, base_model: str, texts_version: str = "") -> str:
    """The adaptation's name: what it trained on (the pairs, and the home's texts, whose encode
    cost is the compute budget), how, from which model, with which code."""
    parts = {"pairs": pairs_version, "settings": settings.as_dict(), "base": base_model, "code": code_version()}
    if texts_version:
        parts["texts"] = texts_version
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def current(folder: Path) -> Adaptation | None:
    """The adaptation ``current.json`` names, or None (none trained, or its files are gone)."""
    pointer = Path(folder) / CURRENT_FILE
    if not pointer.is_file():
        return None
    name = json.loads(pointer.read_text(encoding="utf-8"))["fingerprint"]
    return stored(folder, name)


def stored(folder: Path, name: str) -> Adaptation | None:
    """The stored adaptation ``name``, or None."""
    meta_path = Path(folder) / name / META_FILE
    layers = Path(folder) / name / LAYERS_FILE
    if not (meta_path.is_file() and layers.is_file()):
        return None
    return Adaptation(name, layers, json.loads(meta_path.read_text(encoding="utf-8")))


def needs_retrain(previous: Adaptation | None, messages: int, growth: float) -> bool:
    """Whether the corpus grew enough since ``previous`` was trained (by ``growth``, e.g. 0.25 =
    25% more messages) to train again; with none trained, yes."""
    return previous is None or messages >= previous.messages * (1 + growth)


def adapt(
    chats: Iterable[pl.DataFrame],
    settings: AdaptationSettings,
    folder: Path,
    base_model: str = "",
    device: str = "cpu",
    load_model: Callable | None = None,
    log: Callable[[str], None] | None = None,
) -> Adaptation:
    """Train (or reuse, when one with the same fingerprint is stored) the adaptation of ``chats``
    (messages frames), store it under ``folder`` and make it current.

    ``load_model()`` gives a fresh copy of the base SentenceTransformer to train (changed in place)."""
    import torch

    frames = list(chats)
    messages = sum(frame.height for frame in frames)
    kinds = tuple(kind.strip() for kind in settings.pair_kinds.split(","))
    sampled = pair_source.sample_pairs(pair_source.home_pairs(frames, kinds), settings.pair_cap, settings.seed)
    version = pair_source.pairs_version(sampled)
    texts = [text for frame in frames for text in message_texts(frame)]
    texts_version = pair_source.pairs_version([(text, "") for text in texts])
    name = fingerprint(version, settings, base_model, texts_version)
    folder = Path(folder)
    existing = stored(folder, name)
    if existing is None:
        if len(sampled) < 2:
            raise ValueError(
                f"adaptation: {len(sampled)} training pairs; at least 2 messages of two speakers are needed"
            )
        model = load_model()
        # the budget: one full encode of the home's messages (settings.cost_budget of them)
        state, report = train_top_layers(
            model, sampled, settings, device=device, log=log, encode_layer_tokens=encode_cost(model, texts)
        )
        target = folder / name
        target.mkdir(parents=True, exist_ok=True)
        torch.save(state, target / LAYERS_FILE)
        meta = {
            "fingerprint": name,
            "base_model": base_model,
            "pairs_version": version,
            "pairs": len(sampled),
            "messages": messages,
            "texts_version": texts_version,
            "chats": len(frames),
            "settings": settings.as_dict(),
            "code": code_version(),
            "report": report.as_dict(),
        }
        write_atomically(target / META_FILE, json.dumps(meta, indent=1, sort_keys=True).encode("utf-8"))
        existing = stored(folder, name)
    write_atomically(folder / CURRENT_FILE, json.dumps({"fingerprint": name}).encode("utf-8"))
    return existing


def embedding_version(file_version: str, config: dict, folder: Path | None) -> str:
    """embedding.toml's version as the asset graph sees it: the file's, and while ``[adaptation]``
    is on, the current adaptation's fingerprint. A retrain moves it, so every chat's
    message_embeddings (and what reads them) turns stale by the freshness rule, nothing upstream."""
    adaptation = current(folder) if config.get("adaptation", {}).get("enabled") and folder is not None else None
    return f"{file_version}+adapted-{adaptation.fingerprint}" if adaptation else file_version
