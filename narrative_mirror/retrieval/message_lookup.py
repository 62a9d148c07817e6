"""Messages of a chat by id, for the agent and the API: a block's members, messages by local id,
the replies and same-speaker continuations of messages, and the chat's names. A part of
``Retriever`` (mixed in), reading the chat's in-memory index (``chat``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from narrative_mirror.retrieval import expansion
from narrative_mirror.retrieval.chat_index import ChatIndex
from narrative_mirror.retrieval.records import Hit


class MessageLookup:
    """Lookups by id over ``self.chat(chat_file)`` (the ``Retriever``'s cached ``ChatIndex``)."""

    def chat(self, chat_file: str) -> ChatIndex:
        raise NotImplementedError

    def block_ids(self, chat_file: str, block_id: str) -> list[str]:
        """ALL local ids of a block, in order."""
        chat = self.chat(chat_file)
        if block_id not in chat.block_members:
            raise ValueError(f"{chat_file}: unknown block_id {block_id!r}")
        return expansion.block_range(chat.block_members[block_id])

    def messages(self, chat_file: str, local_ids: Sequence[str]) -> list[Hit]:
        """The messages with these local ids, in the given order (score 0)."""
        chat = self.chat(chat_file)
        unknown = [lid for lid in local_ids if lid not in chat.row_of]
        if unknown:
            raise ValueError(f"{chat_file}: unknown local ids {unknown[:5]}")
        return [chat.hit(chat.row_of[lid], 0.0, sources=["lookup"]) for lid in local_ids]

    def replies(self, chat_file: str, local_ids: Sequence[str]) -> dict[str, str]:
        """For each of ``local_ids`` that a message answers, that message's local id: the first
        reply linked to it (exports with reply links), else the next message when another speaker
        wrote it in the same session; unknown ids and the chat's last message have none."""
        chat = self.chat(chat_file)
        out = {}
        for local_id in local_ids:
            row = chat.row_of.get(local_id)
            if row is not None and (
                linked := [r for r in chat.reply_rows.get(row, []) if chat.speakers[r] != chat.speakers[row]]
            ):
                out[local_id] = chat.local_ids[linked[0]]
                continue
            if row is None or row + 1 >= chat.size:
                continue
            nxt = row + 1
            if chat.sessions[nxt] == chat.sessions[row] and chat.speakers[nxt] != chat.speakers[row]:
                out[local_id] = chat.local_ids[nxt]
        return out

    def continuations(
        self, chat_file: str, local_ids: Sequence[str], keep: Callable[[str], bool] = lambda text: True
    ) -> dict[str, str]:
        """For each of ``local_ids`` whose next message is the same speaker's (same session) and
        its text passes ``keep``, that message's local id: "My neighbour bought two parrots." /
        "He named them ..."."""
        chat = self.chat(chat_file)
        rows = {lid: chat.row_of[lid] for lid in local_ids if lid in chat.row_of}
        return {
            lid: chat.local_ids[row + 1]
            for lid, row in rows.items()
            if row + 1 < chat.size
            and chat.sessions[row + 1] == chat.sessions[row]
            and chat.speakers[row + 1] == chat.speakers[row]
            and keep(chat.raw_texts[row + 1])
        }

    def names(self, chat_file: str) -> tuple[list[str], list[str]]:
        """(the chat's named entities, its speakers): the names an answer may be read from."""
        chat = self.chat(chat_file)
        return chat.entities, chat.speaker_names
