"""The command line's commands, grouped by what they do: memory, questions, service, operations."""
