"""The partitions every chat-file asset shares."""

import dagster as dg

# One partition per chat file; keys come from narrative_mirror.keys.partition_key_for.
chat_files = dg.DynamicPartitionsDefinition(name="chat_files")
