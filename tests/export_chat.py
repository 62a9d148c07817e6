"""A realistic WhatsApp iOS group export for the inspector's tests: the encryption notice, "X
added Y", "Y left", a missed call, a photo, a document, a voice note and a sticker, an edited
message, a very long name, emoji names, a long unbroken word and a long URL; read by the real
WhatsApp reader in Europe/Berlin, its layers built and indexed into a real LanceDB, its messages
layer stored where ``serve`` finds it (``NM_HOME/storage``). Also a small Telegram group whose
messages carry reactions."""

from __future__ import annotations

import json
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


# A Telegram group whose messages carry reactions (WhatsApp exports none): who reacted, and a
# count above the people Telegram lists.
REACTED = "Rota done: Priti Monday, Sam Wednesday"
REACTIONS = [
    {"type": "emoji", "count": 2, "emoji": "👍", "recent": [{"from": "Sam"}, {"from": "Dee"}]},
    {"type": "emoji", "count": 5, "emoji": "❤", "recent": [{"from": "Sam"}]},
]


def write_reactions_export(folder: Path) -> Path:
    """The Telegram group's ``result.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    said = [
        ("Priti", REACTED, REACTIONS),
        ("Sam", "Thanks, Wednesday is fine", []),
        ("Dee", "Key in the blue box?", []),
    ]
    messages = [
        {
            "id": 100 + i,
            "type": "message",
            "date": f"2024-03-12T09:{20 + i}:00",
            "date_unixtime": str(1710231600 + 60 * i),
            "from": who,
            "text": text,
            "reactions": reactions,
        }
        for i, (who, text, reactions) in enumerate(said)
    ]
    path = folder / "result.json"
    path.write_text(json.dumps({"name": "Allotment", "type": "private_group", "id": 7, "messages": messages}))
    return path


def build_export_chat(root: Path, embedder) -> tuple[str, Path, IndexStore]:
    """(chat key, NM_HOME, index) of the export read in ``ZONE``: its messages layer stored,
    its blocks, signals and index rows built by the layers' own functions."""
    return _built(write_export(root / "chats"), "whatsapp", root / "home", embedder)


def build_reactions_chat(root: Path, embedder) -> tuple[str, Path, IndexStore]:
    """The same for the Telegram group with reactions, in a home of its own."""
    return _built(write_reactions_export(root / "chats"), "telegram", root / "home", embedder)


def _built(path: Path, format: str, home: Path, embedder) -> tuple[str, Path, IndexStore]:
    (conversation,) = read_export(path, format, ZONE, None, machine_tz=ZONE)
    index = IndexStore(str(home / "lancedb"))
    return store_chat(conversation, home, index, embedder), home, index


def store_chat(conversation, home: Path, index: IndexStore, embedder) -> str:
    """The conversation's messages layer stored and its index rows written; returns its key."""
    chat = conversation_chat(conversation, ImportOptions(tz=ZONE))
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
    for table, rows in build_rows(messages, embeddings, signals=signals, blocks=blocks).items():
        index.replace_partition(table, chat.chat_file, rows)
    return chat.chat_file
