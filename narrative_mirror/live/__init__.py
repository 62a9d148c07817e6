"""A live memory: messages added as they happen (``log``: the durable per-chat log;
``index``: their rows in the LanceDB index at once; ``memory``: both behind one call)."""

from narrative_mirror.live.log import LiveLog, LiveMessage, MessageError
from narrative_mirror.live.memory import AddResult, LiveMemory

__all__ = ["AddResult", "LiveLog", "LiveMemory", "LiveMessage", "MessageError"]
