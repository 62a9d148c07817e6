"""Readers for the chat exports people have: WhatsApp, Telegram, Slack, Discord, Messenger/Instagram, Signal.

``read_export(path)`` detects the format from the content and yields one :class:`Conversation`
per chat, channel or thread, each of :class:`ExportedMessage` records (see docs/exports.md).
"""

from narrative_mirror.exports.reader import detect, read_export
from narrative_mirror.exports.records import FORMATS, Attachment, Conversation, ExportedMessage, ExportFormatError
from narrative_mirror.reactions import Reaction

__all__ = [
    "FORMATS",
    "Attachment",
    "Conversation",
    "ExportFormatError",
    "ExportedMessage",
    "Reaction",
    "detect",
    "read_export",
]
