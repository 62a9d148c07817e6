"""Column contracts shared by every layer.

Each layer is a polars DataFrame per chat file (one Dagster partition). Ids are strings:
``local_id`` is the chat's own message id (RealTalk/LoCoMo ``dia_id``, normalized, e.g.
``D3:14``); ``message_id`` = ``f"{chat_file}/{local_id}"`` is unique across chat files.
Positions are 0-based file order, the order the +-3 fuzzy window is measured in.

``MESSAGES`` is what the layers read; the stored messages layer is ``MESSAGE_RECORD``: those
columns plus what chat exports carry (UTC time and the zone it came from, reply links,
attachments, edits, system lines), the same for every format.
"""

from __future__ import annotations

import polars as pl

MESSAGES = {
    "message_id": pl.String,  # f"{chat_file}/{local_id}"
    "chat_file": pl.String,  # partition key
    "local_id": pl.String,  # normalized dia_id, e.g. "D3:14"
    "position": pl.Int64,  # 0-based order in the file (across sessions)
    "session": pl.Int64,  # session number N of session_N
    "speaker": pl.String,
    "text": pl.String,
    "timestamp": pl.Datetime("us"),  # timezone-naive, as written in the file
    "image_urls": pl.List(pl.String),
    "image_caption": pl.String,  # blip_caption when the file has one (LoCoMo, most RealTalk images), else ""
}

ATTACHMENT = pl.Struct({"kind": pl.String, "name": pl.String, "caption": pl.String})
# One emoji of a message's reactions: who reacted (as far as the export lists them) and how many.
REACTION = pl.Struct({"emoji": pl.String, "people": pl.List(pl.String), "count": pl.Int64})

# The one message record of every format: MESSAGES plus these. ``timestamp`` stays the chat's
# local wall-clock time (what the layers and relative dates read); ``utc_time`` is the instant,
# null where the file has no zone (RealTalk, LoCoMo).
MESSAGE_DETAILS = {
    "utc_time": pl.Datetime("us", "UTC"),
    "tz": pl.String,  # the zone the time came from ("Europe/Berlin", "UTC+02:00"); "" when unknown
    "tz_source": pl.String,  # "file", "--tz", "machine"; "" when unknown
    "reply_to": pl.String,  # local_id of the message this one answers, else null
    "attachments": pl.List(ATTACHMENT),
    "edited": pl.Boolean,
    "system": pl.Boolean,  # joins, calls, group changes: in the transcript, out of retrieval
    "bot": pl.Boolean,
    "reactions": pl.List(REACTION),
}
MESSAGE_RECORD = {**MESSAGES, **MESSAGE_DETAILS}

GOLD_QA = {
    "question_id": pl.String,  # f"{chat_file}/q{index:03d}"
    "chat_file": pl.String,
    "question": pl.String,
    "answer": pl.String,
    "category": pl.Int64,
    "evidence_raw": pl.List(pl.String),  # the annotation strings as written
    "gold_ids": pl.List(pl.String),  # resolved local_ids, file order, no duplicates
    "unresolved": pl.List(pl.String),  # parts that could not be resolved
    "oddities": pl.List(pl.String),  # annotation forms read with a guess (a bare string, a reversed range)
}

ARC_CASES = {
    "case_id": pl.String,
    "chat_file": pl.String,
    "query": pl.String,
    "subject": pl.String,
    "phase_names": pl.List(pl.String),
    "phase_summaries": pl.List(pl.String),
    "phase_evidence": pl.List(pl.List(pl.String)),  # local_ids per phase
}

BLOCKS = {  # L1 topic blocks
    "block_id": pl.String,  # f"{chat_file}/S{session}/B{n}"
    "chat_file": pl.String,
    "session": pl.Int64,
    "block_index": pl.Int64,  # 0-based over the whole chat, time order
    "first_position": pl.Int64,
    "last_position": pl.Int64,
    "message_ids": pl.List(pl.String),  # ALL local_ids in the range, in order
    "start_time": pl.Datetime("us"),
    "end_time": pl.Datetime("us"),
    "speakers": pl.List(pl.String),
    "keywords": pl.List(pl.String),
    "label": pl.String,
    "summary": pl.String,
}

MESSAGE_SIGNALS = {  # L1.5, one row per message (block-level signals aggregate these)
    "message_id": pl.String,
    "chat_file": pl.String,
    "local_id": pl.String,
    "block_id": pl.String,
    "entities": pl.List(pl.String),  # people/places/things mentioned (normalized lower-case)
    "temporal": pl.List(pl.String),  # temporal expressions as written ("tomorrow", "next week", "May 3")
    "is_plan": pl.Boolean,  # future marker about the speaker's own actions
    "is_question": pl.Boolean,
    "sentiment": pl.Float64,  # -1..1
    "emotion": pl.String,  # coarse label or ""
    "has_image": pl.Boolean,
    "ref_block_ids": pl.List(pl.String),  # earlier blocks this message refers back to (entity overlap)
    "refs": pl.Float64,  # 0..1 normalized reference strength, used by ranking
    "importance_tier": pl.Int64,  # 0 (low) .. 3 (high), used by ranking
}

THREADS = {  # L2 semantic threads: storylines across sessions
    "thread_id": pl.String,  # f"{chat_file}/T{n}"
    "chat_file": pl.String,
    "block_ids": pl.List(pl.String),  # ordered by time: the thread's phases
    "start_time": pl.Datetime("us"),
    "end_time": pl.Datetime("us"),
    "participants": pl.List(pl.String),
    "entities": pl.List(pl.String),
    "title": pl.String,
    "summary": pl.String,
}

MESSAGE_EMBEDDINGS = {
    "message_id": pl.String,
    "chat_file": pl.String,
    "local_id": pl.String,
    "vector": pl.List(pl.Float32),  # L2-normalized
}


def empty_frame(schema: dict) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


def conform(df: pl.DataFrame, schema: dict, where: str) -> pl.DataFrame:
    """Select and cast ``df`` to ``schema``; a missing column is an error naming ``where``."""
    missing = [c for c in schema if c not in df.columns]
    if missing:
        raise ValueError(f"{where}: missing columns {missing}")
    return df.select([pl.col(c).cast(t) for c, t in schema.items()])
