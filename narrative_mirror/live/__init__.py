"""A live memory: messages added as they happen (``log``: the durable per-chat log;
``index``: their rows in the LanceDB index at once; ``memory.LiveMemory``: both behind one call).
Nothing is imported here, so the log is usable without the embedder's and LanceDB's imports."""
