"""A realistic WhatsApp iOS group export for the inspector's tests: the encryption notice, "X
added Y", "Y left", a missed call, a photo, a document, a voice note and a sticker, an edited
message, a very long name, emoji names, a long unbroken word and a long URL; read by the real
WhatsApp reader in Europe/Berlin, its layers built and indexed into a real LanceDB, its messages
layer stored where ``serve`` finds it (``NM_HOME/storage``)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import polars as pl

from narrative_mirror import schema, settings, storage
from narrative_mirror.embedding import message_texts
from narrative_mirror.exports.folder import ImportOptions
from narrative_mirror.exports.frames import conversation_chat
from narrative_mirror.exports.reader import read_export
from narrative_mirror.index_rows import build_rows
from narrative_mirror.index_store import IndexStore
from narrative_mirror.layers.l1_topics import build_topic_blocks
from narrative_mirror.layers.l15_signals import compute_signals

ZONE = "Europe/Berlin"
LRM = "\u200e"
GROUP = "Family Trip 🌍"
LONG_NAME = "Maria Fernanda Albuquerque-Vasconcelos de Bragança e Sousa"
JOAO = "João 🇵🇹 Silva"
UNICORN = "🦄"
LONG_WORD = "Supercalifragilistic_" + "x" * 140
LONG_URL = "https://www.example.com/rentals/lagos/casa-do-mar-" + "-".join(["segment"] * 25) + "?ref=" + "a" * 60
PHOTO = "00000012-PHOTO-2024-03-12-09-21-03.jpg"
EDITED = "That's the beach right in front of it 😍"
# (day, time, author, text): iOS attributes system lines to the group and starts them with U+200E
LINES = [
    (
        "12/03/2024",
        "09:14:02",
        GROUP,
        f"{LRM}Messages and calls are end-to-end encrypted. No one outside of this "
        "chat, not even WhatsApp, can read or listen to them.",
    ),
    ("12/03/2024", "09:14:02", GROUP, f'{LRM}{LONG_NAME} created group "{GROUP}"'),
    ("12/03/2024", "09:15:10", GROUP, f"{LRM}{LONG_NAME} added {JOAO}"),
    ("12/03/2024", "09:20:41", LONG_NAME, f"Hi all! I booked the house in Lagos for 14–21 July: {LONG_URL}"),
    ("12/03/2024", "09:21:03", JOAO, f"{LRM}<attached: {PHOTO}>"),
    ("12/03/2024", "09:21:30", JOAO, f"{EDITED} <This message was edited>"),
    ("12/03/2024", "09:25:00", UNICORN, LONG_WORD),
    ("12/03/2024", "09:26:12", LONG_NAME, f"{LRM}<attached: 00000013-Itinerary.pdf>"),
    ("12/03/2024", "09:30:00", JOAO, f"{LRM}audio omitted"),
    ("12/03/2024", "09:31:00", GROUP, f"{LRM}{JOAO} added Tia Rosa"),
    ("12/03/2024", "09:40:00", "Tia Rosa", "Obrigada! Who is bringing the car to Lagos?"),
    ("12/03/2024", "09:41:00", UNICORN, f"{LRM}sticker omitted"),
    ("13/03/2024", "20:02:00", GROUP, f"{LRM}Tia Rosa left"),
    ("13/03/2024", "20:05:00", LONG_NAME, "I'll drive the car to Lagos, we leave at 8"),
    ("13/03/2024", "20:06:00", JOAO, f"{LRM}Missed voice call"),
]
SYSTEM_LINES = 6


def write_export(folder: Path) -> Path:
    """The group's export as WhatsApp iOS writes it: ``_chat.txt`` in a zip."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "WhatsApp Chat - Family Trip.zip"
    text = "".join(f"[{day}, {time}] {who}: {said}\n" for day, time, who, said in LINES)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("_chat.txt", text)
    return path


def build_export_chat(root: Path, embedder) -> tuple[str, Path, IndexStore]:
    """(chat key, NM_HOME, index) of the export read in ``ZONE``: its messages layer stored,
    its blocks, signals and index rows built by the layers' own functions."""
    options = ImportOptions(tz=ZONE)
    (conversation,) = read_export(write_export(root / "chats"), "whatsapp", ZONE, None, machine_tz=ZONE)
    chat = conversation_chat(conversation, options)
    home = root / "home"
    messages = chat.messages
    storage.write_frame(storage.frame_path(home / "storage", "messages", chat.chat_file), messages)
    vectors = embedder.encode(message_texts(messages))
    layers = settings.load_config("layers")
    blocks = build_topic_blocks(messages, vectors, layers)
    signals = compute_signals(messages, blocks, layers)
    embeddings = pl.DataFrame(
        {
            "message_id": messages["message_id"],
            "chat_file": messages["chat_file"],
            "local_id": messages["local_id"],
            "vector": [v.tolist() for v in vectors],
        },
        schema=schema.MESSAGE_EMBEDDINGS,
    )
    index = IndexStore(str(home / "lancedb"))
    for table, rows in build_rows(messages, embeddings, signals=signals, blocks=blocks).items():
        index.replace_partition(table, chat.chat_file, rows)
    return chat.chat_file, home, index
